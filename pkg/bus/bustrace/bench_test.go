package bustrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
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
		ctx, span := bustrace.StartConsume(context.Background(), bus.FromNATS(m), "worker-default", nil)
		sctx, step := telemetry.StartStep(ctx, "fetch", "tool")
		h := nats.Header{}
		bustrace.InjectHeader(sctx, h)
		telemetry.End(step, nil)
		e := event.New()
		bustrace.InjectEvent(ctx, &e)
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

// BenchmarkExecution records the spans of one execution of a one-step skill as
// the router and the worker record them — the trigger's process span, the job's
// publish span, the delivery's process span, the step's span, the outcome's
// publish span — with the trace context injected where they inject it: "on" with
// every span sampled and batched to an exporter that drops them, "off" with no
// endpoint set. Unlike the throughput ratio of `skillbus bench --only tracing`,
// on minus off here is what tracing alone costs, in one goroutine, and barely
// moves with the machine's load.
func BenchmarkExecution(b *testing.B) {
	for _, on := range []bool{false, true} {
		name, cfg := "off", telemetry.Config{Getenv: env(nil)}
		if on {
			name, cfg = "on", telemetry.Config{Getenv: env(map[string]string{telemetry.EnvSampler: "always_on"}), SpanExporter: discard{}}
		}
		b.Run(name, func(b *testing.B) {
			gtp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
			tel, err := telemetry.Setup(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				tel.Shutdown(context.Background())
				otel.SetTracerProvider(gtp)
				otel.SetMeterProvider(mp)
				otel.SetTextMapPropagator(prop)
			}()
			b.ReportAllocs()
			for b.Loop() {
				execution()
			}
		})
	}
}

func execution() {
	const jobTmpl = "skillbus.exec.{pool}.{skill}.{activation}.{stage}"
	trigger := &nats.Msg{Subject: "skillbus.trigger.bench.noop", Data: make([]byte, 120), Header: nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"t-1"}, "ce-type": {"bench.noop"}, "ce-source": {"/bench"}, "Nats-Msg-Id": {"t-1"}}}
	job := &nats.Msg{Subject: "skillbus.exec.default.noop.a1.primary", Data: make([]byte, 300), Header: nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"e1.job"}, "ce-type": {"skillbus.job"}, "ce-source": {"/router"}, "Nats-Msg-Id": {"e1.job"}}}
	outcome := &nats.Msg{Subject: "skillbus.events.e1.execution.completed", Data: make([]byte, 200), Header: nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"e1.outcome"}, "ce-type": {"skillbus.execution.completed"}, "Nats-Msg-Id": {"e1.outcome"}}}

	// The router.
	rctx, rspan := bustrace.StartConsume(context.Background(), bus.FromNATS(trigger), "router", nil)
	_, _ = telemetry.Inject(rctx)
	_, pub := bustrace.StartPublishMsg(rctx, job, jobTmpl, append(telemetry.Job{
		Skill: "noop", Version: "1.0.0", ActivationID: "a1", ExecutionID: "e1", Pool: "default",
	}.Attributes(), telemetry.AttrRouteMethod.String("explicit"), telemetry.AttrRouteScore.Float64(1))...)
	telemetry.End(pub, nil)
	if rspan.IsRecording() {
		rspan.SetAttributes(telemetry.AttrOutcome.String(telemetry.OutcomeRouted))
		rspan.SetAttributes(telemetry.AttrRouteMethod.String("explicit"))
	}
	telemetry.End(rspan, nil)

	// The worker.
	wctx, dspan := bustrace.StartDelivery(context.Background(), bus.FromNATS(job), "worker-default", telemetry.Delivery{
		ExecutionID: "e1", Attempt: 1, Template: jobTmpl,
	}, telemetry.Job{Skill: "noop", Version: "1.0.0", ActivationID: "a1", ExecutionID: "e1", Attempt: 1, Pool: "default"}.Attributes()...)
	_, _ = telemetry.Inject(wctx)
	_, step := telemetry.StartStep(wctx, "run", "compute", telemetry.AttrTool.String(""))
	telemetry.End(step, nil)
	_, out := bustrace.StartPublishMsg(wctx, outcome, "skillbus.events.{execution}.execution.completed",
		telemetry.Job{Skill: "noop", Version: "1.0.0", ActivationID: "a1", ExecutionID: "e1", Attempt: 1, Pool: "default"}.Attributes()...)
	telemetry.End(out, nil)
	telemetry.End(dspan, nil)
}

// BenchmarkMetricsExecution is what a worker's metrics cost per execution.
func BenchmarkMetricsExecution(b *testing.B) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tel.Metrics.Execution(ctx, "hello", "1.0.0", telemetry.OutcomeCompleted, time.Millisecond)
	}
}
