package telemetry_test

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// BenchmarkOn is BenchmarkOff with tracing on, 100% sampling, spans batched to an
// exporter that drops them: the cost of recording.
func BenchmarkOn(b *testing.B) {
	gtp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(map[string]string{telemetry.EnvSampler: "always_on"}), SpanExporter: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(gtp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	}()
	hop(b, nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-type": {"t"}, "ce-source": {"/s"}, "Nats-Msg-Id": {"x"}, "ce-traceparent": {tp}})
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func hop(b *testing.B, hdr nats.Header) {
	m := &nats.Msg{Subject: "skillbus.jobs.default", Header: hdr}
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := telemetry.StartConsume(context.Background(), m, "worker-default", nil)
		sctx, step := telemetry.StartStep(ctx, "fetch", "tool")
		h := nats.Header{}
		telemetry.InjectHeader(sctx, h)
		telemetry.End(step, nil)
		e := event.New()
		telemetry.InjectEvent(ctx, &e)
		telemetry.End(span, nil)
	}
}

// BenchmarkOff measures what a hop pays with tracing off (no endpoint set): read
// the context of a job message, start its process span and a step span, inject
// into the next event and into a tool request, end the spans.
func BenchmarkOff(b *testing.B) {
	gtp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(gtp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	}()

	for _, bc := range []struct {
		name string
		hdr  nats.Header
	}{
		{"no traceparent", nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-type": {"t"}, "ce-source": {"/s"}, "Nats-Msg-Id": {"x"}}},
		{"with traceparent", nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-type": {"t"}, "ce-source": {"/s"}, "Nats-Msg-Id": {"x"}, "ce-traceparent": {tp}}},
	} {
		b.Run(bc.name, func(b *testing.B) { hop(b, bc.hdr) })
	}
}

// BenchmarkBaseline is the same hop without telemetry: the header and event it
// writes, for comparison.
func BenchmarkBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		h := nats.Header{}
		sinkHeader(h)
		e := event.New()
		sinkEvent(&e)
	}
}

//go:noinline
func sinkHeader(nats.Header) {}

//go:noinline
func sinkEvent(*event.Event) {}
