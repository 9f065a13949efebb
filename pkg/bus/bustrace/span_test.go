package bustrace_test

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// record sets up telemetry exporting to an in-memory exporter and returns it.
func record(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	return telemetrytest.Record(t).Exporter()
}

func TestPublishEventThenConsume(t *testing.T) {
	exp := record(t)
	e := event.New()
	e.SetID("ev-1")
	e.SetSource("/router")
	e.SetType("io.skillbus.job")
	_ = e.SetData("application/json", map[string]string{"a": "b"})
	_, pub := bustrace.StartPublishEvent(context.Background(), "skillbus.jobs.default", &e)
	pub.End()
	m := bus.Encode("skillbus.jobs.default", "x1.job", &e)
	_, proc := bustrace.StartConsume(context.Background(), bus.FromNATS(m), "worker-default", nil, telemetry.Job{Pool: "default"}.Attributes()...)
	proc.End()
	telemetrytest.Flush(t)
	spans := exp.GetSpans()
	p := telemetrytest.Named(t, spans, "publish skillbus.jobs.default")
	c := telemetrytest.Named(t, spans, "process skillbus.jobs.default")
	if c.Parent.SpanID() != p.SpanContext.SpanID() || !c.Parent.IsRemote() {
		t.Errorf("the consumer's span is not a remote child of the publisher's")
	}
	a := telemetrytest.Attrs(c)
	if a["messaging.message.id"] != "ev-1" || a["messaging.consumer.group.name"] != "worker-default" || a["skillbus.pool"] != "default" || a["messaging.message.body.size"] != "9" {
		t.Errorf("consume attributes %v", a)
	}
}

func TestPublishEventOffPassesContextOn(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	in := event.New()
	in.SetExtension("traceparent", tp)
	m := bus.Encode("skillbus.trigger.x", "1", &in)
	ctx, span := bustrace.StartConsume(context.Background(), bus.FromNATS(m), "router", nil)
	defer span.End()
	out := event.New()
	_, pub := bustrace.StartPublishEvent(ctx, "skillbus.jobs.default", &out)
	pub.End()
	if out.Extensions()["traceparent"] != tp {
		t.Errorf("with tracing off the next event carries %v, want the incoming traceparent", out.Extensions())
	}
}
