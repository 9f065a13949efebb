package telemetry_test

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

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
		b.Run(bc.name, func(b *testing.B) {
			m := &nats.Msg{Subject: "skillbus.jobs.default", Header: bc.hdr}
			msg := telemetry.Message{Destination: m.Subject, ID: "x", ConsumerGroup: "worker-default"}
			b.ReportAllocs()
			for b.Loop() {
				ctx := telemetry.ExtractMsg(context.Background(), m)
				ctx, span := telemetry.StartProcess(ctx, msg, nil)
				sctx, step := telemetry.StartStep(ctx, "fetch", "tool")
				h := nats.Header{}
				telemetry.InjectHeader(sctx, h)
				telemetry.End(step, nil)
				e := event.New()
				telemetry.InjectEvent(ctx, &e)
				telemetry.End(span, nil)
			}
		})
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
