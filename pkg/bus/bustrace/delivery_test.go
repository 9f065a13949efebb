package bustrace_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// A retried job's second delivery links to the first delivery's span, which a
// different worker may have recorded: both derive its ID from the job alone.
func TestDeliveryLinksTheAttemptBefore(t *testing.T) {
	exp := record(t)
	job := func() *nats.Msg {
		m := nats.NewMsg("skillbus.exec.default.hello")
		m.Header.Set("ce-id", "x1.job")
		m.Header.Set("ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		return m
	}
	d := telemetry.Delivery{ExecutionID: "x1", Attempt: 1}
	ctx, first := bustrace.StartDelivery(context.Background(), bus.FromNATS(job()), "worker-default", d)
	_, step := telemetry.StartStep(ctx, "compose", "compute")
	step.End()
	first.End()
	d.Attempt = 2
	_, second := bustrace.StartDelivery(context.Background(), bus.FromNATS(job()), "worker-default", d)
	second.End()
	d = telemetry.Delivery{ExecutionID: "x1", Recovered: true, Attempt: 1}
	_, recovered := bustrace.StartDelivery(context.Background(), bus.FromNATS(job()), "worker-default", d)
	recovered.End()
	telemetrytest.Flush(t)

	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	byName := func(i int) tracetest.SpanStub { return spans[i] }
	s1, st, s2, s3 := byName(1), byName(0), byName(2), byName(3)
	if s1.SpanContext.SpanID() != (telemetry.Delivery{ExecutionID: "x1", Attempt: 1}).SpanID() {
		t.Errorf("first delivery's span id %s is not the derived one", s1.SpanContext.SpanID())
	}
	if st.Parent.SpanID() != s1.SpanContext.SpanID() || st.SpanContext.SpanID() == s1.SpanContext.SpanID() {
		t.Errorf("the step's span %s (parent %s) is not a child with an ID of its own of %s", st.SpanContext.SpanID(), st.Parent.SpanID(), s1.SpanContext.SpanID())
	}
	if s2.Parent.SpanID().String() != "00f067aa0ba902b7" || s2.SpanContext.TraceID() != s1.SpanContext.TraceID() {
		t.Errorf("the second delivery does not continue the job's trace: parent %s", s2.Parent.SpanID())
	}
	if len(s2.Links) != 1 || s2.Links[0].SpanContext.SpanID() != s1.SpanContext.SpanID() || s2.Links[0].SpanContext.TraceID() != s1.SpanContext.TraceID() {
		t.Fatalf("second delivery's links %+v, want one to the first delivery's span %s", s2.Links, s1.SpanContext.SpanID())
	}
	if !hasAttr(s2.Links[0].Attributes, "skillbus.link.reason", "redelivery") || !hasAttr(s2.Attributes, "messaging.operation.type", "process") {
		t.Errorf("link attrs %v, span attrs %v", s2.Links[0].Attributes, s2.Attributes)
	}
	if s3.SpanContext.SpanID() == s1.SpanContext.SpanID() || len(s3.Links) != 1 || s3.Links[0].SpanContext.SpanID() != s1.SpanContext.SpanID() ||
		!hasAttr(s3.Links[0].Attributes, "skillbus.link.reason", "recovered") {
		t.Errorf("a recovered job's first delivery %s links %+v, want its own id and a link to %s", s3.SpanContext.SpanID(), s3.Links, s1.SpanContext.SpanID())
	}
	resumed := telemetry.Delivery{ExecutionID: "x1", Resumes: 1, Attempt: 1}
	if resumed.SpanID() == s1.SpanContext.SpanID() {
		t.Error("a resumed job's first delivery has the same span id as the paused one")
	}
	if _, ok := resumed.Previous(); ok {
		t.Error("a resumed job's first delivery has a previous delivery; the confirmation's link ties it to the paused one")
	}
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.Emit() == value {
			return true
		}
	}
	return false
}

// A job in structured mode has its trace context in its JSON: the worker passes
// what it decoded, and the delivery continues that trace with the job's id.
func TestDeliveryOfAStructuredJob(t *testing.T) {
	exp := record(t)
	m := nats.NewMsg("skillbus.exec.default.hello.a1.job")
	m.Header.Set("Content-Type", "application/cloudevents+json")
	m.Data = []byte(`{"specversion":"1.0","id":"x1.job","source":"/r","type":"io.skillbus.job","traceparent":"00-00000000000000000000000000000001-0000000000000001-01","data":{}}`)
	d := telemetry.Delivery{ExecutionID: "x1", Attempt: 1, ID: "x1.job", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	_, span := bustrace.StartDelivery(context.Background(), bus.FromNATS(m), "worker-default", d)
	span.End()
	telemetrytest.Flush(t)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Parent.SpanID().String() != "00f067aa0ba902b7" || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the delivery continues %s/%s, not the trace it was given", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	if !hasAttr(s.Attributes, "messaging.message.id", "x1.job") {
		t.Errorf("attrs %v, want the job's id", s.Attributes)
	}
}

// A decoded job without trace context of its own still continues a plain W3C
// traceparent header.
func TestDeliveryTakesAPlainTraceparentHeader(t *testing.T) {
	exp := record(t)
	m := nats.NewMsg("skillbus.exec.default.hello.a1.job")
	m.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, span := bustrace.StartDelivery(context.Background(), bus.FromNATS(m), "worker-default", telemetry.Delivery{ExecutionID: "x1", Attempt: 1, ID: "x1.job"})
	span.End()
	telemetrytest.Flush(t)
	if s := exp.GetSpans(); len(s) != 1 || s[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans %v, want one continuing the header's trace", s)
	}
}
