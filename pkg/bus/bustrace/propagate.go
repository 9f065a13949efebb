package bustrace

import (
	"context"
	"encoding/json"
	"net/textproto"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// w3c is the propagator of the event helpers: only the trace context travels,
// whatever global propagator a program installs.
var w3c propagation.TraceContext

// InjectEvent sets the traceparent and tracestate extensions of e to the span in
// ctx; without a valid span context it leaves e alone.
func InjectEvent(ctx context.Context, e *event.Event) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, eventCarrier{e})
}

// ExtractEvent returns ctx with the remote span context the traceparent and
// tracestate extensions of e name; ctx unchanged when e has none or they are
// malformed.
func ExtractEvent(ctx context.Context, e *event.Event) context.Context {
	return w3c.Extract(ctx, eventCarrier{e})
}

// injectHeader sets header traceparent of h and, when the span in ctx has one,
// header tracestate to the span in ctx.
func injectHeader(ctx context.Context, h nats.Header, traceparent, tracestate string) {
	if h == nil {
		return
	}
	tp, ts := telemetry.Inject(ctx)
	if tp == "" {
		return
	}
	if ts != "" {
		h[tracestate] = []string{ts}
	}
	h[traceparent] = []string{tp}
}

// InjectHeader sets the W3C traceparent and tracestate headers of h (a plain NATS
// request, as bus tools send it) to the span in ctx.
func InjectHeader(ctx context.Context, h nats.Header) {
	injectHeader(ctx, h, events.HeaderTraceParent, events.HeaderTraceState)
}

// ExtractHeader returns ctx with the remote span context of the W3C traceparent
// and tracestate headers of h, lowercase or in canonical MIME form (Traceparent).
func ExtractHeader(ctx context.Context, h nats.Header) context.Context {
	tp := headerValue(h, events.HeaderTraceParent)
	if tp == "" {
		return ctx
	}
	return telemetry.Extract(ctx, tp, headerValue(h, events.HeaderTraceState))
}

// InjectCE sets the ce-traceparent and ce-tracestate headers of h, the trace
// extensions of a binary-mode CloudEvent, to the span in ctx.
func InjectCE(ctx context.Context, h nats.Header) {
	injectHeader(ctx, h, events.HeaderCETraceParent, events.HeaderCETraceState)
}

// ExtractMsg returns ctx with the remote span context m carries: the ce-traceparent
// header of a binary-mode CloudEvent, else the traceparent attribute of a
// structured-mode one (Content-Type application/cloudevents+json, or a JSON payload
// and no ce- headers), else a plain traceparent header. ctx is unchanged when m
// is nil or carries none.
func ExtractMsg(ctx context.Context, m bus.Msg) context.Context {
	if m == nil {
		return ctx
	}
	h := m.Headers()
	if tp := headerValue(h, events.HeaderCETraceParent); tp != "" {
		return telemetry.Extract(ctx, tp, headerValue(h, events.HeaderCETraceState))
	}
	if data := m.Data(); structured(h, data) {
		var attrs struct {
			TraceParent string `json:"traceparent"`
			TraceState  string `json:"tracestate"`
		}
		if json.Unmarshal(data, &attrs) == nil && attrs.TraceParent != "" {
			return telemetry.Extract(ctx, attrs.TraceParent, attrs.TraceState)
		}
	}
	return ExtractHeader(ctx, h)
}

// structured reports whether a message of headers h and payload data may be a
// structured-mode CloudEvent.
func structured(h nats.Header, data []byte) bool {
	ct := headerValue(h, "content-type")
	if ct != "" {
		mt, _, _ := strings.Cut(ct, ";") // the media type without its parameters
		return strings.EqualFold(strings.TrimSpace(mt), "application/cloudevents+json")
	}
	if headerValue(h, events.HeaderCESpecVersion) != "" {
		return false
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

type eventCarrier struct{ e *event.Event }

func (c eventCarrier) Get(key string) string {
	v, ok := c.e.Extensions()[key]
	if !ok {
		return ""
	}
	s, err := types.ToString(v)
	if err != nil {
		return ""
	}
	return s
}

func (c eventCarrier) Set(key, value string) { c.e.SetExtension(key, value) }

func (c eventCarrier) Keys() []string { return []string{events.ExtTraceParent, events.ExtTraceState} }

// headerValue returns the first value of header name in h, looked up as given
// (lowercase, as the bus writes it) and in its canonical MIME form
// (Ce-Traceparent), as HTTP-minded publishers write it. No scan of every key: this
// runs on every message, traced or not.
func headerValue(h nats.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	c, ok := canonical[name]
	if !ok {
		c = textproto.CanonicalMIMEHeaderKey(name)
	}
	if v := h[c]; len(v) > 0 {
		return v[0]
	}
	return ""
}

var canonical = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		events.HeaderTraceParent, events.HeaderTraceState, events.HeaderCETraceParent, events.HeaderCETraceState,
		events.HeaderCEID, events.HeaderCESpecVersion, "content-type", events.HeaderMsgID, events.HeaderLink,
	} {
		m[k] = textproto.CanonicalMIMEHeaderKey(k)
	}
	return m
}()
