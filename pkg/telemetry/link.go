package telemetry

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// HeaderLink is the header of a message published again for a new run of earlier
// work — a job released after its skill's repair, a dead letter replayed — that
// names the span the new run follows from: "<reason> <traceparent>". The span of
// processing the message links to it (StartDelivery), since it is in a trace of its
// own: the earlier work's trace may have ended hours or days before.
const HeaderLink = "Skillbus-Link"

// StartPublishLinked starts the PRODUCER span of publishing m, an encoded
// binary-mode CloudEvent, for a new run of the work whose trace m carries (its
// ce-traceparent): a job released after a repair (reason LinkRepair), a dead letter
// replayed (LinkReplay). The span is a child of the span in ctx, or the root of a
// new trace — not a child of m's trace, whose spans ended long ago — and links to
// m's traceparent with reason. m's trace headers are set to the new span (removed
// when it is not recorded: tracing off here), and its Skillbus-Link header to the
// earlier span, so the consumer's span is in the new trace and links to the earlier
// one even when whoever publishes m does not trace. template, when set, names the
// span instead of m's subject.
func StartPublishLinked(ctx context.Context, m *nats.Msg, template, reason string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	tp, ts := headerValue(m.Header, CETraceParent), headerValue(m.Header, CETraceState)
	for _, k := range []string{CETraceParent, CETraceState, "Ce-Traceparent", "Ce-Tracestate"} {
		delete(m.Header, k)
	}
	l, linked := Link(tp, ts, reason)
	if linked {
		m.Header.Set(HeaderLink, reason+" "+tp)
	} else {
		m.Header.Del(HeaderLink)
	}
	var span trace.Span
	if s, ok := off(ctx); ok {
		span = s
	} else {
		var links []trace.Link
		if linked {
			links = []trace.Link{l}
		}
		msg := MessageOf(m, "")
		msg.Template = template
		ctx, span = startMessage(ctx, msg, trace.SpanKindProducer, opSend, "publish", links, attrs)
	}
	if span.IsRecording() {
		InjectCE(ctx, m.Header)
	}
	return ctx, span
}

// headerLink returns the link m's Skillbus-Link header names.
func headerLink(m *nats.Msg) (trace.Link, bool) {
	v := headerValue(m.Header, HeaderLink)
	if v == "" {
		return trace.Link{}, false
	}
	reason, tp, ok := strings.Cut(v, " ")
	if !ok {
		return trace.Link{}, false
	}
	return Link(tp, "", reason)
}

// StartPublishLinkedMeta is StartPublishLinked for a message not encoded yet, whose
// trace context is *traceparent and *tracestate (the TraceParent and TraceState of
// the bus.Meta it will be published with; a job, which carries its trace context in
// its JSON): they name the earlier span on the way in and the new span on the way
// out (empty when it is not recorded). link is the value for the message's
// Skillbus-Link header ("" for none).
func StartPublishLinkedMeta(ctx context.Context, m Message, traceparent, tracestate *string, reason string, attrs ...attribute.KeyValue) (_ context.Context, _ trace.Span, link string) {
	tp, ts := *traceparent, *tracestate
	*traceparent, *tracestate = "", ""
	l, linked := Link(tp, ts, reason)
	if linked {
		link = reason + " " + tp
	}
	if s, ok := off(ctx); ok {
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
