package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// record sets up telemetry exporting to an in-memory exporter and returns it.
func record(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	restoreGlobals(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil), SpanExporter: syncExporter{exp}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return exp
}

// syncExporter makes the batcher's exports visible by Shutdown; the in-memory
// exporter forgets its spans on Shutdown, so that is a no-op here.
type syncExporter struct{ *tracetest.InMemoryExporter }

func (syncExporter) Shutdown(context.Context) error { return nil }

func TestMessagingSpans(t *testing.T) {
	exp := record(t)
	job := telemetry.Job{Skill: "hello", Version: "1.2.0", ExecutionID: "x1", Attempt: 2, Pool: "default"}

	ctx, pub := telemetry.StartPublish(context.Background(), telemetry.Message{Destination: "skillbus.jobs.default", ID: "x1.job", BodySize: 42}, job.Attributes()...)
	tp, _ := telemetry.Inject(ctx)
	pub.End()

	earlier := "00-11111111111111111111111111111111-2222222222222222-01"
	link, ok := telemetry.Link(earlier, "", telemetry.LinkRedelivery, telemetry.AttrAttempt.Int(1))
	if !ok {
		t.Fatal("Link rejected a valid traceparent")
	}
	if _, ok := telemetry.Link("garbage", "", telemetry.LinkRedelivery); ok {
		t.Fatal("Link accepted garbage")
	}
	pctx, proc := telemetry.StartProcess(telemetry.Extract(context.Background(), tp, ""),
		telemetry.Message{Destination: "skillbus.jobs.default", Template: "skillbus.jobs.{pool}", ID: "x1.job", ConsumerGroup: "worker-default"},
		[]trace.Link{link}, job.Attributes()...)
	_, step := telemetry.StartStep(pctx, "fetch", "tool", telemetry.AttrTool.String("http"))
	telemetry.End(step, failure.Fatalf("fetch: 404 not found"))
	_, settle := telemetry.StartSettle(pctx, telemetry.Message{Destination: "skillbus.jobs.default"}, "ack")
	telemetry.End(settle, nil)
	telemetry.End(proc, fmt.Errorf("step fetch: %w", failure.Retry("timeout")))
	telemetrytest.Flush(t)
	spans := exp.GetSpans()

	p := telemetrytest.Named(t, spans, "publish skillbus.jobs.default")
	if p.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish kind %v", p.SpanKind)
	}
	want := map[string]string{
		"messaging.system": "nats", "messaging.operation.type": "send", "messaging.operation.name": "publish",
		"messaging.destination.name": "skillbus.jobs.default", "messaging.message.id": "x1.job", "messaging.message.body.size": "42",
		"skillbus.skill.name": "hello", "skillbus.skill.version": "1.2.0", "skillbus.execution.id": "x1", "skillbus.attempt": "2", "skillbus.pool": "default",
	}
	got := telemetrytest.Attrs(p)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("publish %s = %q, want %q", k, got[k], v)
		}
	}

	pr := telemetrytest.Named(t, spans, "process skillbus.jobs.{pool}")
	if pr.Parent.SpanID() != p.SpanContext.SpanID() || pr.SpanContext.TraceID() != p.SpanContext.TraceID() {
		t.Errorf("process is not a child of publish")
	}
	a := telemetrytest.Attrs(pr)
	if a["messaging.operation.type"] != "process" || a["messaging.consumer.group.name"] != "worker-default" || a["messaging.destination.template"] != "skillbus.jobs.{pool}" {
		t.Errorf("process attributes %v", a)
	}
	if len(pr.Links) != 1 || pr.Links[0].SpanContext.SpanID().String() != "2222222222222222" {
		t.Fatalf("process links %v", pr.Links)
	}
	if la := pr.Links[0].Attributes; len(la) != 2 || la[0].Value.AsString() != "redelivery" {
		t.Errorf("link attributes %v", la)
	}
	if pr.Status.Code != codes.Error || a["skillbus.failure.class"] != "retryable" || a["error.type"] != "retryable" {
		t.Errorf("process status %v, attributes %v", pr.Status, a)
	}

	st := telemetrytest.Named(t, spans, "step fetch")
	sa := telemetrytest.Attrs(st)
	if st.Parent.SpanID() != pr.SpanContext.SpanID() || sa["skillbus.step.id"] != "fetch" || sa["skillbus.step.kind"] != "tool" {
		t.Errorf("step span: parent %v attrs %v", st.Parent.SpanID(), sa)
	}
	if st.Status.Code != codes.Error || sa["skillbus.failure.class"] != "fatal" || len(st.Events) != 1 || st.Events[0].Name != "exception" {
		t.Errorf("step error: status %v attrs %v events %v", st.Status, sa, st.Events)
	}
	se := telemetrytest.Named(t, spans, "ack skillbus.jobs.default")
	if telemetrytest.Attrs(se)["messaging.operation.type"] != "settle" || se.SpanKind != trace.SpanKindClient || se.Status.Code == codes.Error {
		t.Errorf("settle span %v %v", telemetrytest.Attrs(se), se.Status)
	}
}

func TestEndCancelledIsNotAnError(t *testing.T) {
	exp := record(t)
	_, s := telemetry.Start(context.Background(), "work")
	telemetry.End(s, fmt.Errorf("stopping: %w", context.Canceled))
	telemetrytest.Flush(t)
	got := telemetrytest.Named(t, exp.GetSpans(), "work")
	if got.Status.Code == codes.Error {
		t.Errorf("a cancelled span has status %v", got.Status)
	}
	if telemetrytest.Attrs(got)["error.type"] != "canceled" {
		t.Errorf("attributes %v", telemetrytest.Attrs(got))
	}
	if errors.Is(nil, context.Canceled) {
		t.Fatal("unreachable")
	}
}

func TestLinkSpan(t *testing.T) {
	record(t)
	if _, ok := telemetry.LinkSpan(context.Background(), telemetry.LinkResumed); ok {
		t.Error("LinkSpan linked a context without a span")
	}
	ctx, s := telemetry.Start(context.Background(), "asked")
	defer s.End()
	l, ok := telemetry.LinkSpan(ctx, telemetry.LinkResumed)
	if !ok || l.SpanContext.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("LinkSpan = %v, %v", l, ok)
	}
}

// sawAttrs is a sampler that samples everything and keeps the attributes each span
// started with: what a sampler of a program's own provider may decide on.
type sawAttrs struct {
	seen map[string][]attribute.KeyValue
}

func (s sawAttrs) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.seen[p.Name] = p.Attributes
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (sawAttrs) Description() string { return "sawAttrs" }

// TestOwnProviderSamplerSeesAttributes: in a program that installs its own SDK
// rather than calling Setup, the helpers give a span's attributes to Start, where
// its sampler can read them (the messaging conventions name them for sampling), and
// the spans record them, each its own (the helpers build them in a shared buffer).
func TestOwnProviderSamplerSeesAttributes(t *testing.T) {
	restoreGlobals(t)
	exp := tracetest.NewInMemoryExporter()
	s := sawAttrs{seen: map[string][]attribute.KeyValue{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(s))
	defer tp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)

	job := telemetry.Job{Skill: "hello", ExecutionID: "x1", Pool: "default"}
	ctx, pub := telemetry.StartPublish(context.Background(), telemetry.Message{Destination: "skillbus.jobs.default", ID: "x1.job"}, job.Attributes()...)
	_, step := telemetry.StartStep(ctx, "fetch", "tool")
	step.End()
	pub.End()

	for name, want := range map[string]map[string]string{
		"publish skillbus.jobs.default": {"messaging.system": "nats", "messaging.destination.name": "skillbus.jobs.default", "messaging.message.id": "x1.job", "skillbus.skill.name": "hello", "skillbus.pool": "default"},
		"step fetch":                    {"skillbus.step.id": "fetch", "skillbus.step.kind": "tool"},
	} {
		saw := map[string]string{}
		for _, kv := range s.seen[name] {
			saw[string(kv.Key)] = kv.Value.Emit()
		}
		got := telemetrytest.Attrs(telemetrytest.Named(t, exp.GetSpans(), name))
		for k, v := range want {
			if saw[k] != v || got[k] != v {
				t.Errorf("%s: %s = %q at Start, %q recorded; want %q", name, k, saw[k], got[k], v)
			}
		}
		if _, ok := got["skillbus.step.id"]; ok != (name == "step fetch") {
			t.Errorf("%s records another span's attributes: %v", name, got)
		}
	}
}
