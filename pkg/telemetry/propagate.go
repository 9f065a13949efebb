package telemetry

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/textproto"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Names of the trace context on the wire: the W3C header names, which are also the
// CloudEvents distributed-tracing extension names; binary-mode CloudEvents on NATS
// carry the extensions as headers with the ce- prefix.
const (
	TraceParent   = "traceparent"
	TraceState    = "tracestate"
	CETraceParent = "ce-traceparent"
	CETraceState  = "ce-tracestate"
)

// w3c is the propagator of every helper here: only the trace context travels,
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

// Inject returns the traceparent and tracestate of the span in ctx, "" when there is
// none: the values a CloudEvent's extensions (or bus.Meta) carry.
func Inject(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return format(sc), sc.TraceState().String()
}

// format returns the W3C traceparent of sc, as the TraceContext propagator writes
// it (version 00, the flags the specification defines), in one allocation instead
// of the propagator's four: it runs for every message a traced process publishes.
func format(sc trace.SpanContext) string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	f := [1]byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))}
	hex.Encode(b[53:], f[:])
	return string(b[:])
}

// injectHeader sets header traceparent of h and, when sc has one, header
// tracestate to sc, as w3c.Inject does with a carrier of h.
func injectHeader(h nats.Header, sc trace.SpanContext, traceparent, tracestate string) {
	if h == nil || !sc.IsValid() {
		return
	}
	if ts := sc.TraceState().String(); ts != "" {
		h[tracestate] = []string{ts}
	}
	h[traceparent] = []string{format(sc)}
}

// Extract returns ctx with the remote span context traceparent and tracestate name;
// ctx unchanged when traceparent is empty or malformed.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, &strCarrier{tp: traceparent, ts: tracestate})
}

// InjectHeader sets the W3C traceparent and tracestate headers of h (a plain NATS
// request, as bus tools send it) to the span in ctx.
func InjectHeader(ctx context.Context, h nats.Header) {
	injectHeader(h, trace.SpanContextFromContext(ctx), TraceParent, TraceState)
}

// ExtractHeader returns ctx with the remote span context of the W3C traceparent
// and tracestate headers of h, lowercase or in canonical MIME form (Traceparent).
func ExtractHeader(ctx context.Context, h nats.Header) context.Context {
	tp := headerValue(h, TraceParent)
	if tp == "" {
		return ctx
	}
	return Extract(ctx, tp, headerValue(h, TraceState))
}

// InjectCE sets the ce-traceparent and ce-tracestate headers of h, the trace
// extensions of a binary-mode CloudEvent, to the span in ctx.
func InjectCE(ctx context.Context, h nats.Header) {
	injectHeader(h, trace.SpanContextFromContext(ctx), CETraceParent, CETraceState)
}

// ExtractMsg returns ctx with the remote span context m carries: the ce-traceparent
// header of a binary-mode CloudEvent, else the traceparent attribute of a
// structured-mode one (Content-Type application/cloudevents+json, or a JSON payload
// and no ce- headers), else a plain traceparent header. ctx is unchanged when m
// carries none.
func ExtractMsg(ctx context.Context, m *nats.Msg) context.Context {
	if m == nil {
		return ctx
	}
	if tp := headerValue(m.Header, CETraceParent); tp != "" {
		return Extract(ctx, tp, headerValue(m.Header, CETraceState))
	}
	if structured(m) {
		var attrs struct {
			TraceParent string `json:"traceparent"`
			TraceState  string `json:"tracestate"`
		}
		if json.Unmarshal(m.Data, &attrs) == nil && attrs.TraceParent != "" {
			return Extract(ctx, attrs.TraceParent, attrs.TraceState)
		}
	}
	return ExtractHeader(ctx, m.Header)
}

// structured reports whether m may be a structured-mode CloudEvent.
func structured(m *nats.Msg) bool {
	ct := headerValue(m.Header, "content-type")
	if ct != "" {
		mt, _, _ := strings.Cut(ct, ";") // the media type without its parameters
		return strings.EqualFold(strings.TrimSpace(mt), "application/cloudevents+json")
	}
	if headerValue(m.Header, "ce-specversion") != "" {
		return false
	}
	for i := 0; i < len(m.Data); i++ {
		switch m.Data[i] {
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

func (c eventCarrier) Keys() []string { return []string{TraceParent, TraceState} }

type strCarrier struct{ tp, ts string }

func (c *strCarrier) Get(key string) string {
	switch key {
	case TraceParent:
		return c.tp
	case TraceState:
		return c.ts
	}
	return ""
}

func (c *strCarrier) Set(key, value string) {
	switch key {
	case TraceParent:
		c.tp = value
	case TraceState:
		c.ts = value
	}
}

func (c *strCarrier) Keys() []string { return []string{TraceParent, TraceState} }

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

var canonical = map[string]string{
	TraceParent:      "Traceparent",
	TraceState:       "Tracestate",
	CETraceParent:    "Ce-Traceparent",
	CETraceState:     "Ce-Tracestate",
	"content-type":   "Content-Type",
	"ce-specversion": "Ce-Specversion",
}
