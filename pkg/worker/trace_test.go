package worker_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A retried job's second attempt links to the first, which failed retryably; both
// continue the trace the job carries, and the first records its failure class.
func TestRetryLinksTheAttemptBefore(t *testing.T) {
	rec := telemetrytest.Record(t)

	f := setup(t, oneStep("once", "once-flaky", 3))
	f.start()
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ref := events.SkillRef{Name: "once", Pool: "default", ExecutionID: events.ExecutionID("/t", "tr", "once"), Version: "1.0.0"}
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", "tr"), Skill: ref, Inputs: json.RawMessage(`{"who":"ada"}`)}
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Exec("default", "once", j.ActivationID, events.StagePlan), bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob,
		Meta: bus.Meta{ExecutionID: j.ExecutionID, TraceParent: "00-" + traceID + "-" + parent + "-01"}, Data: j})
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(j.ExecutionID, events.TypeExecutionCompleted)

	var attempts []tracetest.SpanStub
	natstest.Eventually(t, 10*time.Second, func() bool {
		attempts = attempts[:0]
		for _, s := range rec.Spans() {
			if s.SpanKind == trace.SpanKindConsumer && s.Name == "process skillbus.exec.default.once.{activation}.{stage}" {
				attempts = append(attempts, s)
			}
		}
		return len(attempts) == 2
	}, "want the spans of two deliveries")
	first, second := attempts[0], attempts[1]
	for _, s := range attempts {
		if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parent {
			t.Errorf("delivery span %s does not continue the job's trace: trace %s parent %s", s.SpanContext.SpanID(), s.SpanContext.TraceID(), s.Parent.SpanID())
		}
	}
	if first.Status.Code != codes.Error || !hasAttr(first, "skillbus.failure.class", "retryable") || !hasAttr(first, "skillbus.attempt", "1") {
		t.Errorf("the first attempt's span: status %v, attributes %v; want an error of class retryable, attempt 1", first.Status, first.Attributes)
	}
	if second.Status.Code == codes.Error || !hasAttr(second, "skillbus.attempt", "2") {
		t.Errorf("the second attempt's span: status %v, attributes %v", second.Status, second.Attributes)
	}
	if len(second.Links) != 1 || second.Links[0].SpanContext.SpanID() != first.SpanContext.SpanID() ||
		second.Links[0].SpanContext.TraceID() != first.SpanContext.TraceID() {
		t.Fatalf("the second attempt links %+v, want the first attempt's span %s", second.Links, first.SpanContext.SpanID())
	}
}

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key && kv.Value.Emit() == value {
			return true
		}
	}
	return false
}

// An outcome, a structured-mode event, carries the trace context of its PRODUCER
// span in its JSON, and no header but Content-Type and Nats-Msg-Id: a watcher
// continues the trace from the publish, whichever reader it uses.
func TestOutcomeCarriesItsPublishSpan(t *testing.T) {
	rec := telemetrytest.Record(t)
	f := setup(t, oneStep("hello", "echo", 0))
	f.start()
	id := f.job("pub", "hello")
	f.waitEvent(id, events.TypeExecutionCompleted)
	m := f.stored(id, events.TypeExecutionCompleted)
	if len(m.Header) != 2 || m.Header.Get(bus.HeaderContentType) != "application/cloudevents+json" || m.Header.Get(bus.HeaderMsgID) == "" {
		t.Fatalf("outcome headers %v, want Content-Type and Nats-Msg-Id alone", m.Header)
	}
	e, err := bus.DecodeFast(bus.FromNATS(&nats.Msg{Header: m.Header, Data: m.Data}))
	if err != nil {
		t.Fatal(err)
	}
	var pub tracetest.SpanStub
	natstest.Eventually(t, 10*time.Second, func() bool {
		for _, s := range rec.Spans() {
			if s.SpanKind == trace.SpanKindProducer && s.Name == "publish skillbus.events.{execution}.execution.completed" {
				pub = s
				return true
			}
		}
		return false
	}, "the outcome's publish span")
	if tp := e.Ext(events.ExtTraceParent); tp != "00-"+pub.SpanContext.TraceID().String()+"-"+pub.SpanContext.SpanID().String()+"-01" {
		t.Fatalf("the outcome carries traceparent %q, not its publish span %s", tp, pub.SpanContext.SpanID())
	}
	if !hasAttr(pub, "messaging.message.body.size", strconv.Itoa(len(m.Data))) || !hasAttr(pub, "messaging.message.id", id+".outcome") {
		t.Errorf("the publish span's attributes %v", pub.Attributes)
	}
}
