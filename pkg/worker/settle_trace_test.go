package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// TestTraceSettleAndDeadLetters: with tracing on, a retried delivery ends with a
// nak span carrying its delay, a dead execution with its dead letter's PRODUCER
// span and an ack span, both children of its process span, and an unreadable job's
// dead letter is published under a span that continues the job's trace.
func TestTraceSettleAndDeadLetters(t *testing.T) {
	rec := telemetrytest.Record(t)
	f := setup(t, oneStep("doomed", "broken", 0), oneStep("flappy", "once-flaky", 3))
	f.start()
	doomed := f.job("d1", "doomed")
	flappy := f.job("r1", "flappy")
	m := nats.NewMsg("skillbus.exec.default.x")
	m.Header.Set("ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	m.Data = []byte("not an event")
	if _, err := f.b.JS.PublishMsg(f.ctx, m); err != nil {
		t.Fatal(err)
	}

	var spans tracetest.SpanStubs
	find := func(name string, match func(tracetest.SpanStub) bool) (tracetest.SpanStub, bool) {
		for _, s := range spans {
			if s.Name == name && (match == nil || match(s)) {
				return s, true
			}
		}
		return tracetest.SpanStub{}, false
	}
	exec := func(id string) func(tracetest.SpanStub) bool {
		return func(s tracetest.SpanStub) bool {
			for _, kv := range s.Attributes {
				if kv.Key == telemetry.AttrExecutionID && kv.Value.AsString() == id {
					return true
				}
			}
			return false
		}
	}
	child := func(parent tracetest.SpanStub) func(tracetest.SpanStub) bool {
		return func(s tracetest.SpanStub) bool { return s.Parent.SpanID() == parent.SpanContext.SpanID() }
	}
	var doomedProc, flappyFirst tracetest.SpanStub
	natstest.Eventually(t, 20*time.Second, func() bool {
		spans = rec.Spans()
		var ok1, ok2, ok3 bool
		doomedProc, ok1 = find("process skillbus.exec.default.doomed.{activation}.{stage}", exec(doomed))
		flappyFirst, ok2 = find("process skillbus.exec.default.flappy.{activation}.{stage}", func(s tracetest.SpanStub) bool {
			return exec(flappy)(s) && attrString(s, "skillbus.attempt") == "1"
		})
		_, ok3 = find("publish skillbus.dead._job", nil)
		return ok1 && ok2 && ok3 && len(f.dead("skillbus.dead.doomed")) == 1
	}, "the spans of the dead, retried and unreadable jobs")

	dl, ok := find("publish skillbus.dead.{skill}", child(doomedProc))
	if !ok || dl.SpanKind != trace.SpanKindProducer || attrString(dl, "messaging.destination.name") != "skillbus.dead.doomed" ||
		attrString(dl, "messaging.message.id") != doomed+".dead" || attrString(dl, "messaging.operation.type") != "send" {
		t.Errorf("the dead letter's span under %v: %v %v", doomedProc.SpanContext.SpanID(), ok, dl.Attributes)
	}
	raw := f.dead("skillbus.dead.doomed")[0]
	if e, err := bus.DecodeFast(bus.FromNATS(&nats.Msg{Header: raw.Header, Data: raw.Data})); err != nil || !strings.Contains(e.Ext(events.ExtTraceParent), dl.SpanContext.SpanID().String()) {
		t.Errorf("the dead letter carries %v (%v), not its publish span %v", e, err, dl.SpanContext.SpanID())
	}
	if _, ok := find("ack skillbus.exec.default.doomed.{activation}.{stage}", child(doomedProc)); ok {
		t.Error("an ack has a span of its own; the process span covers it")
	}
	if nak, ok := find("nak skillbus.exec.default.flappy.{activation}.{stage}", child(flappyFirst)); !ok || attrString(nak, "messaging.operation.name") != "nak" || attrString(nak, "skillbus.settle.delay_ms") == "" {
		t.Errorf("the retried delivery's nak span: %v %v", ok, nak.Attributes)
	}
	poison, _ := find("publish skillbus.dead._job", nil)
	if poison.Parent.SpanID().String() != "00f067aa0ba902b7" || poison.SpanKind != trace.SpanKindProducer {
		t.Errorf("the unreadable job's dead letter span: parent %v kind %v", poison.Parent.SpanID(), poison.SpanKind)
	}
}

func attrString(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
