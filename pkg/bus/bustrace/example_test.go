package bustrace_test

import (
	"context"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// A consumer continues the trace of the event it handles and passes it on to the
// event it publishes. With tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT), the
// incoming trace context travels on unchanged.
func Example() {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }})
	if err != nil {
		panic(err)
	}
	defer tel.Shutdown(context.Background())

	in := event.New()
	in.SetID("t-1")
	in.SetSource("/shop")
	in.SetType("com.example.order.created")
	in.SetExtension("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	msg := bus.Encode("skillbus.trigger.com.example.order.created", "t-1", &in)

	ctx, span := bustrace.StartConsume(context.Background(), bus.FromNATS(msg), "router", nil)
	out := event.New()
	out.SetID("j-1")
	_, pub := bustrace.StartPublishEvent(ctx, "skillbus.jobs.default", &out)
	telemetry.End(pub, nil)
	telemetry.End(span, nil)

	fmt.Println(tel.Tracing, out.Extensions()["traceparent"])
	// Output: false 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
}
