package bustrace

import (
	"context"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// MessageOf describes m for a messaging span: its subject, its id (the CloudEvent
// id of a binary-mode event, else Nats-Msg-Id) and its payload size; group is the
// durable consumer reading it ("" for a publication).
func MessageOf(m bus.Msg, group string) telemetry.Message {
	return messageOf(m.Subject(), m.Headers(), len(m.Data()), group)
}

func messageOf(subject string, h nats.Header, size int, group string) telemetry.Message {
	id := headerValue(h, events.HeaderCEID)
	if id == "" {
		id = headerValue(h, events.HeaderMsgID)
	}
	return telemetry.Message{Destination: subject, ID: id, ConsumerGroup: group, BodySize: size}
}

// StartConsume continues the trace a consumed message carries (ExtractMsg) with the
// CONSUMER span of processing it (telemetry.StartProcess): the one call a router
// makes per delivery. links name earlier spans this one follows from
// (telemetry.Link); the span also links to the one m's Skillbus-Link header names
// (StartPublishLinked).
func StartConsume(ctx context.Context, m bus.Msg, group string, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx = ExtractMsg(ctx, m)
	if s, ok := telemetry.OffSpan(ctx); ok {
		return ctx, s
	}
	if l, ok := headerLink(m.Headers()); ok {
		links = append(links[:len(links):len(links)], l)
	}
	return telemetry.StartProcess(ctx, MessageOf(m, group), links, attrs...)
}

// StartPublishEvent starts the PRODUCER span of publishing e on subject and sets
// e's traceparent and tracestate to it, so whoever consumes e continues from this
// span. Encode e after this call.
func StartPublishEvent(ctx context.Context, subject string, e *event.Event, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := telemetry.StartPublish(ctx, telemetry.Message{Destination: subject, ID: e.ID(), BodySize: len(e.Data())}, attrs...)
	InjectEvent(ctx, e)
	return ctx, span
}

// StartPublishMsg starts the PRODUCER span of publishing m, a message already
// encoded (a binary-mode CloudEvent), and sets m's ce-traceparent and ce-tracestate
// headers to it, so whoever consumes m continues from this span. template, when
// set, is the low-cardinality form of m's subject that names the span. End the span
// when the publish is acknowledged (or failed).
func StartPublishMsg(ctx context.Context, m *nats.Msg, template string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := telemetry.OffSpan(ctx); ok {
		return ctx, s
	}
	msg := messageOf(m.Subject, m.Header, len(m.Data), "")
	msg.Template = template
	ctx, span := telemetry.StartPublish(ctx, msg, attrs...)
	InjectCE(ctx, m.Header)
	return ctx, span
}

// StartPublishLinked starts the PRODUCER span of publishing m, an encoded
// binary-mode CloudEvent, for a new run of the work whose trace m carries (its
// ce-traceparent): a job released after a repair (reason telemetry.LinkRepair), a
// dead letter replayed (telemetry.LinkReplay). The span is a child of the span in
// ctx, or the root of a new trace — not a child of m's trace, whose spans ended
// long ago — and links to m's traceparent with reason. m's trace headers are set to
// the new span (removed when it is not recorded: tracing off here), and its
// Skillbus-Link header to the earlier span, so the consumer's span is in the new
// trace and links to the earlier one even when whoever publishes m does not trace.
// template, when set, names the span instead of m's subject.
func StartPublishLinked(ctx context.Context, m *nats.Msg, template, reason string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	tp, ts := headerValue(m.Header, events.HeaderCETraceParent), headerValue(m.Header, events.HeaderCETraceState)
	for _, k := range []string{events.HeaderCETraceParent, events.HeaderCETraceState} {
		delete(m.Header, k)
		delete(m.Header, canonical[k])
	}
	msg := messageOf(m.Subject, m.Header, len(m.Data), "")
	msg.Template = template
	ctx, span, link := telemetry.StartPublishLinkedMeta(ctx, msg, &tp, &ts, reason, attrs...)
	if link != "" {
		m.Header.Set(events.HeaderLink, link)
	} else {
		m.Header.Del(events.HeaderLink)
	}
	if tp != "" {
		m.Header[events.HeaderCETraceParent] = []string{tp}
		if ts != "" {
			m.Header[events.HeaderCETraceState] = []string{ts}
		}
	}
	return ctx, span
}

// headerLink returns the link a Skillbus-Link header of h names.
func headerLink(h nats.Header) (trace.Link, bool) {
	v := headerValue(h, events.HeaderLink)
	if v == "" {
		return trace.Link{}, false
	}
	reason, tp, ok := strings.Cut(v, " ")
	if !ok {
		return trace.Link{}, false
	}
	return telemetry.Link(tp, "", reason)
}

// StartDelivery is StartConsume for a job's delivery d (see telemetry.Delivery):
// the CONSUMER span continues the trace m carries, with the span ID d derives, and
// links to the delivery before it and to the span m's Skillbus-Link header names
// (see StartPublishLinked). Its attributes include d.Attempt.
func StartDelivery(ctx context.Context, m bus.Msg, group string, d telemetry.Delivery, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	h := m.Headers()
	switch {
	case d.TraceParent != "":
		ctx = telemetry.Extract(ctx, d.TraceParent, d.TraceState)
	case d.ID != "":
		// The event has no trace context of its own; a plain W3C traceparent
		// header, as a publisher outside skillbus may set, still counts.
		ctx = ExtractHeader(ctx, h)
	default:
		ctx = ExtractMsg(ctx, m)
	}
	if s, ok := telemetry.OffSpan(ctx); ok {
		return ctx, s
	}
	var links []trace.Link
	// A job published again for a new run of earlier work (a repair's release, a
	// DLQ replay) names that work's span in Skillbus-Link; it is in another trace.
	if hl, ok := headerLink(h); ok {
		links = append(links, hl)
	}
	msg := MessageOf(m, group)
	if d.ID != "" {
		msg.ID = d.ID
	}
	return telemetry.StartDelivery(ctx, msg, d, links, attrs...)
}
