package telemetry

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
)

// w3c is the propagator of every helper here: only the trace context travels,
// whatever global propagator a program installs.
var w3c propagation.TraceContext

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

// Extract returns ctx with the remote span context traceparent and tracestate name;
// ctx unchanged when traceparent is empty or malformed.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, &strCarrier{tp: traceparent, ts: tracestate})
}

type strCarrier struct{ tp, ts string }

func (c *strCarrier) Get(key string) string {
	switch key {
	case events.ExtTraceParent:
		return c.tp
	case events.ExtTraceState:
		return c.ts
	}
	return ""
}

func (c *strCarrier) Set(key, value string) {
	switch key {
	case events.ExtTraceParent:
		c.tp = value
	case events.ExtTraceState:
		c.ts = value
	}
}

func (c *strCarrier) Keys() []string { return []string{events.ExtTraceParent, events.ExtTraceState} }
