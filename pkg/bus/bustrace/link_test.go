package bustrace_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

const earlierTP = "00-11111111111111111111111111111111-2222222222222222-01"

// TestPublishLinked: a job released after a repair is published in the trace of
// whoever releases it, linked to the execution it runs again; the worker's span of
// its first delivery links there too, and to no recovered delivery of its own trace.
func TestPublishLinked(t *testing.T) {
	exp := record(t)
	m := nats.NewMsg("skillbus.exec.default.hello")
	m.Header.Set("ce-id", "x1.job.repair.r1")
	m.Header.Set("ce-traceparent", earlierTP)
	m.Header.Set("Skillbus-Recovered", "1")

	ctx, decision := telemetry.Start(context.Background(), "decide")
	_, pub := bustrace.StartPublishLinked(ctx, m, "skillbus.exec.{pool}.{skill}", telemetry.LinkRepair, telemetry.AttrExecutionID.String("x1"))
	pub.End()
	decision.End()
	if got := m.Header.Get("Skillbus-Link"); got != "repair "+earlierTP {
		t.Errorf("Skillbus-Link = %q", got)
	}
	_, del := bustrace.StartDelivery(context.Background(), bus.FromNATS(m), "worker-default", telemetry.Delivery{ExecutionID: "x1", Recovered: true, Attempt: 1})
	del.End()
	telemetrytest.Flush(t)

	spans := exp.GetSpans()
	p := telemetrytest.Named(t, spans, "publish skillbus.exec.{pool}.{skill}")
	if p.SpanKind != trace.SpanKindProducer || p.Parent.SpanID() != decision.SpanContext().SpanID() || p.SpanContext.TraceID() != decision.SpanContext().TraceID() {
		t.Errorf("the release's span is not a PRODUCER child of the decision: kind %v parent %v", p.SpanKind, p.Parent)
	}
	if a := telemetrytest.Attrs(p); a["messaging.operation.type"] != "send" || a["messaging.destination.name"] != "skillbus.exec.default.hello" || a["messaging.message.id"] != "x1.job.repair.r1" || a["messaging.system"] != "nats" {
		t.Errorf("the release's attributes %v", a)
	}
	if len(p.Links) != 1 || p.Links[0].SpanContext.SpanID().String() != "2222222222222222" || p.Links[0].Attributes[0].Value.AsString() != "repair" {
		t.Errorf("the release's links %v, want one to the earlier execution", p.Links)
	}
	d := telemetrytest.Named(t, spans, "process skillbus.exec.default.hello")
	if d.Parent.SpanID() != p.SpanContext.SpanID() {
		t.Errorf("the delivery's parent %v is not the release's span %v", d.Parent.SpanID(), p.SpanContext.SpanID())
	}
	if len(d.Links) != 1 || d.Links[0].SpanContext.TraceID().String() != "11111111111111111111111111111111" {
		t.Errorf("the delivery's links %v, want only the one to the earlier execution", d.Links)
	}
}

// A trigger replayed: the router's span links to the rejected trigger's.
func TestConsumeFollowsHeaderLink(t *testing.T) {
	exp := record(t)
	m := nats.NewMsg("skillbus.trigger.skill.hello")
	m.Header.Set("Skillbus-Link", "replay "+earlierTP)
	_, s := bustrace.StartConsume(context.Background(), bus.FromNATS(m), "router", nil)
	s.End()
	telemetrytest.Flush(t)
	c := telemetrytest.Named(t, exp.GetSpans(), "process skillbus.trigger.skill.hello")
	if len(c.Links) != 1 || c.Links[0].SpanContext.SpanID().String() != "2222222222222222" || c.Links[0].Attributes[0].Value.AsString() != "replay" {
		t.Errorf("the router's links %v, want one to the rejected trigger's span", c.Links)
	}
}

// TestPublishLinkedOff: a replay published by a process that does not trace (the
// CLI) still starts a new trace at its consumer, linked to the dead execution.
func TestPublishLinkedOff(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("skillbus.exec.default.hello")
	m.Header.Set("ce-traceparent", earlierTP)
	m.Header.Set("ce-tracestate", "vendor=x")
	_, s := bustrace.StartPublishLinked(context.Background(), m, "", telemetry.LinkReplay)
	s.End()
	tel.Shutdown(context.Background())
	exp := record(t) // the consumer traces
	if m.Header.Get("ce-traceparent") != "" || m.Header.Get("ce-tracestate") != "" || m.Header.Get("Skillbus-Link") != "replay "+earlierTP {
		t.Fatalf("headers after an unrecorded linked publish: %v", m.Header)
	}
	_, del := bustrace.StartDelivery(context.Background(), bus.FromNATS(m), "worker-default", telemetry.Delivery{ExecutionID: "x2", Attempt: 1})
	del.End()
	telemetrytest.Flush(t)
	d := telemetrytest.Named(t, exp.GetSpans(), "process skillbus.exec.default.hello")
	if d.Parent.IsValid() || d.SpanContext.TraceID().String() == "11111111111111111111111111111111" {
		t.Errorf("the replay's delivery continues the dead execution's trace: parent %v trace %v", d.Parent, d.SpanContext.TraceID())
	}
	if len(d.Links) != 1 || d.Links[0].SpanContext.SpanID().String() != "2222222222222222" || d.Links[0].Attributes[0].Value.AsString() != "replay" {
		t.Errorf("the replay's delivery links %v, want one to the dead execution", d.Links)
	}
}
