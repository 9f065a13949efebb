// Package bustrace carries trace context on the bus's messages and starts the
// spans of publishing, consuming and settling them, on top of the NATS-free
// helpers of package telemetry.
//
// Trace context travels in the CloudEvents distributed-tracing extension
// (traceparent, tracestate): on the bus as ce-traceparent headers of a
// binary-mode event, or as attributes of a structured-mode JSON event. InjectEvent,
// ExtractEvent, ExtractMsg and InjectCE move it between a context and an event;
// InjectHeader and ExtractHeader do the same with plain W3C headers on a NATS
// request, as bus tools use them.
//
// StartPublishMsg (or StartPublishEvent) starts a producer's span and sets the
// message's trace headers; StartConsume continues the trace a consumed message
// carries; StartDelivery does so for a job's delivery, linking to the delivery
// before it (see telemetry.Delivery); StartPublishLinked covers a message
// published again for a new run of earlier work (a repair's release, a DLQ
// replay) in a trace of its own; Settling traces a nak or a term.
package bustrace
