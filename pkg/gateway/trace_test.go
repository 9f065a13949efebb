package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/gateway"
)

// A trigger posted with a traceparent is published under the gateway's PRODUCER
// span, a child of the caller's span, which the trigger then carries.
func TestProducerSpan(t *testing.T) {
	rec := telemetrytest.Record(t)
	f := setup(t, gateway.Config{Tokens: []string{token}})
	h := binary("tr-1", "com.example.traced")
	h["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if code, out, _ := f.post("/events", h, `{}`); code != http.StatusAccepted {
		t.Fatalf("%d %v", code, out)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return len(f.triggers()) > 0 }, "the trigger was not published")
	trs := f.triggers()
	if len(trs) != 1 {
		t.Fatalf("%d triggers published", len(trs))
	}
	spans := rec.Spans()
	var pub *tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "publish skillbus.trigger.com.example.traced" {
			pub = &s
		}
	}
	if pub == nil {
		t.Fatalf("no producer span among %v", spans)
	}
	if pub.SpanKind != trace.SpanKindProducer || pub.Parent.SpanID().String() != "00f067aa0ba902b7" || pub.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the gateway's span: kind %v parent %v trace %v", pub.SpanKind, pub.Parent.SpanID(), pub.SpanContext.TraceID())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + pub.SpanContext.SpanID().String() + "-01"
	if got := trs[0].Extensions()["traceparent"]; got != want {
		t.Errorf("the trigger's traceparent %v, want the gateway's span %s", got, want)
	}
}
