package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/gateway"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

// A trigger posted with a traceparent is published under the gateway's PRODUCER
// span, a child of the caller's span, which the trigger then carries.
func TestProducerSpan(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }, SpanExporter: keep{exp}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
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
	if p, ok := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
		_ = p.ForceFlush(context.Background())
	}
	var pub *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "publish skillbus.trigger.com.example.traced" {
			pub = &s
		}
	}
	if pub == nil {
		t.Fatalf("no producer span among %v", exp.GetSpans())
	}
	if pub.SpanKind != trace.SpanKindProducer || pub.Parent.SpanID().String() != "00f067aa0ba902b7" || pub.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the gateway's span: kind %v parent %v trace %v", pub.SpanKind, pub.Parent.SpanID(), pub.SpanContext.TraceID())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + pub.SpanContext.SpanID().String() + "-01"
	if got := trs[0].Extensions()["traceparent"]; got != want {
		t.Errorf("the trigger's traceparent %v, want the gateway's span %s", got, want)
	}
}
