// Package telemetry gives every skillbus process its traces, metrics, health probes
// and trace-aware logs, configured from the standard OpenTelemetry environment.
//
// A process sets it up once and shuts it down on exit, which flushes the spans:
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "skillbus-worker"})
//	defer tel.Shutdown(context.Background())
//	tel.Health.Add("nats", bus.NATSConnected(nc))
//	addr, err := tel.Serve(":9464") // /metrics, /livez, /readyz
//
// With no OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set,
// tracing is off: the tracer provider is a no-op and the helpers below cost a few
// nanoseconds, while a traceparent that arrives on an event still travels on
// unchanged.
//
// The package holds no NATS and no CloudEvents: the core packages (workflow,
// tool, selector) trace through it, and package bustrace builds the messaging
// side on it — trace context carried on the bus's messages, and the spans of
// publishing, consuming, delivering and settling them. Here are the helpers
// that need no message: StartPublish, StartProcess, StartSettle, StartRequest and
// StartServe take a Message that describes one; StartStep covers a step of a
// skill, Start and StartClient other work; Inject and Extract move trace context
// between a context and the traceparent and tracestate strings an event carries;
// StartPublishMeta and StartPublishLinkedMeta cover an event published through
// bus.Meta, the latter for a new run of earlier work (a repair's release, a DLQ
// replay) in a trace of its own; StartDelivery starts a job delivery's span with
// the ID its Delivery derives. End records an error with its failure class; Link
// and LinkSpan make the links of spans that follow from another without being its
// child (a confirmation resumed hours later).
//
// Metrics are OpenTelemetry instruments exported in the Prometheus format; Metrics
// holds every instrument skillbus defines, and a nil *Metrics records nothing.
package telemetry
