package telemetry

import (
	"context"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// StartPublishLinkedMeta starts the PRODUCER span of publishing m for a new run of
// the work whose trace context is *traceparent and *tracestate (the TraceParent and
// TraceState of the bus.Meta it will be published with; a job, which carries its
// trace context in its JSON): a job released after a repair (reason LinkRepair), a
// dead letter replayed (LinkReplay). The span is a child of the span in ctx, or the
// root of a new trace — not a child of the earlier work's trace, whose spans ended
// long ago — and links to it with reason. *traceparent and *tracestate name the
// earlier span on the way in and the new span on the way out (empty when it is not
// recorded). link is the value for the message's Skillbus-Link header
// (events.HeaderLink; "" for none). bustrace.StartPublishLinked does the same for
// an encoded message.
func StartPublishLinkedMeta(ctx context.Context, m Message, traceparent, tracestate *string, reason string, attrs ...attribute.KeyValue) (_ context.Context, _ trace.Span, link string) {
	tp, ts := *traceparent, *tracestate
	*traceparent, *tracestate = "", ""
	l, linked := Link(tp, ts, reason)
	if linked {
		link = reason + " " + tp
	}
	if s, ok := OffSpan(ctx); ok {
		return ctx, s, link
	}
	var links []trace.Link
	if linked {
		links = []trace.Link{l}
	}
	ctx, span := startMessage(ctx, m, trace.SpanKindProducer, opSend, "publish", links, attrs)
	if span.IsRecording() {
		*traceparent, *tracestate = Inject(ctx)
	}
	return ctx, span, link
}
