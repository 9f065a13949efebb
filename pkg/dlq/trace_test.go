package dlq_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-io/nats.go"
	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/dlq"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// deadTP is the span of the execution (or trigger) that died.
const deadTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// traced turns tracing on, spans to memory; collect flushes and returns them.
func traced(t *testing.T) (collect func() tracetest.SpanStubs) {
	t.Helper()
	return telemetrytest.Record(t).Spans
}

// checkReplaySpan checks that the replay's PRODUCER span is the child of the span
// the replay ran in, links to the dead span, and is the parent the published
// message names, which also names the dead span in Skillbus-Link.
func checkReplaySpan(t *testing.T, spans tracetest.SpanStubs, op trace.Span, name string, h interface{ Get(string) string }) {
	t.Helper()
	var pub *tracetest.SpanStub
	for i := range spans {
		if spans[i].Name == name {
			pub = &spans[i]
		}
	}
	if pub == nil {
		t.Fatalf("no span %q among %v", name, spans)
	}
	if pub.SpanKind != trace.SpanKindProducer || pub.Parent.SpanID() != op.SpanContext().SpanID() || pub.SpanContext.TraceID() != op.SpanContext().TraceID() {
		t.Errorf("the replay's span: kind %v, parent %v; want a PRODUCER child of %v", pub.SpanKind, pub.Parent.SpanID(), op.SpanContext().SpanID())
	}
	if len(pub.Links) != 1 || pub.Links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		pub.Links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" || pub.Links[0].Attributes[0].Value.AsString() != "replay" {
		t.Errorf("the replay's links %v, want one to the dead span, reason replay", pub.Links)
	}
	attrs := map[string]string{}
	for _, kv := range pub.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["messaging.system"] != "nats" || attrs["messaging.operation.type"] != "send" || attrs["messaging.message.id"] == "" || attrs["messaging.destination.name"] == "" {
		t.Errorf("the replay's attributes %v", attrs)
	}
	if tp := h.Get("ce-traceparent"); !strings.Contains(tp, pub.SpanContext.SpanID().String()) || !strings.Contains(tp, pub.SpanContext.TraceID().String()) {
		t.Errorf("the published message's traceparent %q is not the replay's span", tp)
	}
	if got := h.Get(events.HeaderLink); got != "replay "+deadTP {
		t.Errorf("the published message's %s = %q", events.HeaderLink, got)
	}
}

func TestReplayJobTrace(t *testing.T) {
	f := setup(t)
	collect := traced(t)
	f.putSkill("a", "1.0.0", digest("1"), true)
	dl := events.DeadLetter{
		Job:   events.Job{ExecutionID: execA1, ActivationID: "act", Skill: events.SkillRef{Name: "a", Version: "1.0.0", Digest: digest("1"), Pool: "default", ExecutionID: execA1}, Inputs: json.RawMessage(`{}`)},
		Class: "fatal", Reason: "permission denied", Deliveries: 1,
	}
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Dead("a"), bus.Event{ID: execA1 + ".dead", Source: "/skillbus/worker", Type: events.TypeJob,
		Meta: bus.Meta{ExecutionID: execA1, TraceParent: deadTP}, Data: dl})
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}

	ctx, op := telemetry.Start(f.ctx, "replay")
	if _, err := f.q.Replay(ctx, execA1, dlq.ReplayOptions{By: "ada"}); err != nil {
		t.Fatal(err)
	}
	op.End()
	ms := f.published(f.b.StreamJobs(), "skillbus.exec.>")
	if len(ms) != 1 {
		t.Fatalf("%d jobs published, want 1", len(ms))
	}
	job, err := bus.DecodeFast(bus.FromNATS(&nats.Msg{Subject: ms[0].Subject, Header: ms[0].Header, Data: ms[0].Data}))
	if err != nil {
		t.Fatal(err)
	}
	checkReplaySpan(t, collect(), op, "publish skillbus.exec.{pool}.{skill}.{activation}.{stage}", jobAttrs{ms[0].Header, job})
}

// jobAttrs reads a job's CloudEvent attributes (ce-*) from its JSON and its other
// headers from the message.
type jobAttrs struct {
	h   nats.Header
	job *bus.Binary
}

func (a jobAttrs) Get(k string) string {
	if name, ok := strings.CutPrefix(k, "ce-"); ok {
		return a.job.Ext(name)
	}
	return a.h.Get(k)
}

func TestReplayTriggerTrace(t *testing.T) {
	f := setup(t)
	collect := traced(t)
	f.deadTrigger("12", "t 12", false, deadTP)
	ctx, op := telemetry.Start(f.ctx, "replay")
	if _, err := f.q.Replay(ctx, "trigger.12", dlq.ReplayOptions{By: "ada"}); err != nil {
		t.Fatal(err)
	}
	op.End()
	ms := f.published(f.b.StreamTriggers(), "skillbus.trigger.>")
	if len(ms) != 1 {
		t.Fatalf("%d triggers published, want 1", len(ms))
	}
	checkReplaySpan(t, collect(), op, "publish "+ms[0].Subject, ms[0].Header)
}
