// Package telemetry gives every skillbus process its traces, metrics, health probes
// and trace-aware logs, configured from the standard OpenTelemetry environment.
//
// A process sets it up once and shuts it down on exit, which flushes the spans:
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "skillbus-worker"})
//	defer tel.Shutdown(context.Background())
//	tel.Health.Add("nats", telemetry.NATSConnected(nc))
//	addr, err := tel.Serve(":9464") // /metrics, /livez, /readyz
//
// With no OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set,
// tracing is off: the tracer provider is a no-op and the helpers below cost a few
// nanoseconds, while a traceparent that arrives on an event still travels on
// unchanged.
//
// Trace context travels in the CloudEvents distributed-tracing extension
// (traceparent, tracestate): on the bus as ce-traceparent headers of a binary-mode
// event, or as attributes of a structured-mode JSON event. InjectEvent, ExtractEvent,
// ExtractMsg and InjectCE move it between a context and an event; InjectHeader and
// ExtractHeader do the same with plain W3C headers on a NATS request, as bus tools
// use them.
//
// Spans follow the OpenTelemetry messaging conventions: StartPublish (or
// StartPublishMsg, which also sets the message's trace headers) for a producer,
// StartReceive/StartProcess/StartConsume for a consumer, StartDelivery for a job's
// delivery (which links to the delivery before it, see Delivery), Settling (or
// StartSettle) for an ack, nak or term, and StartStep for a step of a skill.
// StartPublishMeta covers an event published through bus.Meta, StartPublishLinked
// a message published again for a new run of earlier work (a repair's release, a
// DLQ replay) in a trace of its own. End records an error with its failure class;
// Link and LinkSpan make the links of spans that follow from another without being
// its child (a confirmation resumed hours later).
//
// Metrics are OpenTelemetry instruments exported in the Prometheus format; Metrics
// holds every instrument skillbus defines, and a nil *Metrics records nothing.
package telemetry
