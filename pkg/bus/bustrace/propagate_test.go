package bustrace_test

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

const (
	tp  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ts  = "congo=t61rcWkgMzE"
	tid = "0af7651916cd43dd8448eb211c80319c"
	sid = "b7ad6b7169203331"
)

func remote(t *testing.T, ctx context.Context) trace.SpanContext {
	t.Helper()
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() {
		t.Fatalf("no remote span context (%v)", sc)
	}
	return sc
}

func checkSC(t *testing.T, sc trace.SpanContext, wantState string) {
	t.Helper()
	if sc.TraceID().String() != tid || sc.SpanID().String() != sid || !sc.IsSampled() {
		t.Errorf("span context %s/%s sampled=%v, want %s/%s sampled", sc.TraceID(), sc.SpanID(), sc.IsSampled(), tid, sid)
	}
	if got := sc.TraceState().String(); got != wantState {
		t.Errorf("tracestate %q, want %q", got, wantState)
	}
}

func TestExtractMsgBinaryMode(t *testing.T) {
	e := event.New()
	e.SetID("1")
	e.SetSource("/s")
	e.SetType("io.skillbus.test")
	e.SetExtension("traceparent", tp)
	e.SetExtension("tracestate", ts)
	m := bus.Encode("skillbus.trigger.x", "1", &e)
	checkSC(t, remote(t, bustrace.ExtractMsg(context.Background(), bus.FromNATS(m))), ts)
}

func TestExtractMsgHeaderCase(t *testing.T) {
	m := nats.NewMsg("s")
	m.Header["Ce-Traceparent"] = []string{tp}
	m.Header["ce-specversion"] = []string{"1.0"}
	checkSC(t, remote(t, bustrace.ExtractMsg(context.Background(), bus.FromNATS(m))), "")
}

func TestExtractMsgStructuredMode(t *testing.T) {
	for name, m := range map[string]*nats.Msg{
		"content type": {Subject: "s", Header: nats.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}},
			Data: []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","traceparent":"` + tp + `","tracestate":"` + ts + `"}`)},
		"no headers": {Subject: "s",
			Data: []byte(` {"specversion":"1.0","id":"1","source":"/s","type":"t","traceparent":"` + tp + `","tracestate":"` + ts + `"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			checkSC(t, remote(t, bustrace.ExtractMsg(context.Background(), bus.FromNATS(m))), ts)
			e, err := bus.Decode(bus.FromNATS(m))
			if err != nil {
				t.Fatal(err)
			}
			checkSC(t, remote(t, bustrace.ExtractEvent(context.Background(), e)), ts)
		})
	}
}

func TestExtractMsgPlainHeaders(t *testing.T) {
	m := nats.NewMsg("skillbus.tool.x")
	m.Header.Set("traceparent", tp)
	m.Data = []byte(`{"text":"x"}`) // a tool call's arguments, not an event
	checkSC(t, remote(t, bustrace.ExtractMsg(context.Background(), bus.FromNATS(m))), "")
	checkSC(t, remote(t, bustrace.ExtractHeader(context.Background(), m.Header)), "")
}

func TestExtractMsgNoContext(t *testing.T) {
	for name, m := range map[string]*nats.Msg{
		"nothing":          nats.NewMsg("s"),
		"malformed":        {Subject: "s", Header: nats.Header{"ce-traceparent": {"00-zz-yy-01"}}},
		"all-zero":         {Subject: "s", Header: nats.Header{"traceparent": {"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}},
		"not JSON":         {Subject: "s", Data: []byte(`{nope`)},
		"binary, no trace": {Subject: "s", Header: nats.Header{"ce-specversion": {"1.0"}}, Data: []byte(`{"traceparent":"` + tp + `"}`)},
		"nil":              nil,
	} {
		t.Run(name, func(t *testing.T) {
			if sc := trace.SpanContextFromContext(bustrace.ExtractMsg(context.Background(), bus.FromNATS(m))); sc.IsValid() {
				t.Fatalf("extracted %v from a message with no valid trace context", sc)
			}
		})
	}
}

func TestInjectRoundTrips(t *testing.T) {
	ctx := telemetry.Extract(context.Background(), tp, ts)

	e := event.New()
	bustrace.InjectEvent(ctx, &e)
	if e.Extensions()["traceparent"] != tp || e.Extensions()["tracestate"] != ts {
		t.Errorf("InjectEvent set %v", e.Extensions())
	}
	checkSC(t, remote(t, bustrace.ExtractEvent(context.Background(), &e)), ts)

	h := nats.Header{}
	bustrace.InjectCE(ctx, h)
	if h.Get("ce-traceparent") != tp || h.Get("ce-tracestate") != ts {
		t.Errorf("InjectCE set %v", h)
	}
	h = nats.Header{}
	bustrace.InjectHeader(ctx, h)
	if h.Get("traceparent") != tp || h.Get("tracestate") != ts {
		t.Errorf("InjectHeader set %v", h)
	}
	checkSC(t, remote(t, bustrace.ExtractHeader(context.Background(), h)), ts)

	gotTP, gotTS := telemetry.Inject(ctx)
	if gotTP != tp || gotTS != ts {
		t.Errorf("Inject = %q, %q", gotTP, gotTS)
	}

	// No span context: nothing is written.
	e2 := event.New()
	bustrace.InjectEvent(context.Background(), &e2)
	h = nats.Header{}
	bustrace.InjectHeader(context.Background(), h)
	if len(e2.Extensions()) != 0 || len(h) != 0 {
		t.Errorf("injected without a span context: %v %v", e2.Extensions(), h)
	}
}

// TestInjectWritesWhatThePropagatorWrites: Inject, InjectCE and InjectHeader
// format the traceparent themselves (it is cheaper); they must write what the W3C
// propagator writes, flags and trace state included.
func TestInjectWritesWhatThePropagatorWrites(t *testing.T) {
	state, err := trace.ParseTraceState("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, trace.FlagsRandom, trace.FlagsSampled | trace.FlagsRandom, 0xff} {
		for _, st := range []trace.TraceState{{}, state} {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
				SpanID:  trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}, TraceFlags: flags, TraceState: st,
			})
			ctx := trace.ContextWithSpanContext(context.Background(), sc)
			want := propagation.MapCarrier{}
			propagation.TraceContext{}.Inject(ctx, want)

			gotTP, gotTS := telemetry.Inject(ctx)
			if gotTP != want["traceparent"] || gotTS != want["tracestate"] {
				t.Errorf("flags %02x: Inject = %q, %q; the propagator writes %q, %q", byte(flags), gotTP, gotTS, want["traceparent"], want["tracestate"])
			}
			h := nats.Header{}
			bustrace.InjectCE(ctx, h)
			bustrace.InjectHeader(ctx, h)
			for _, prefix := range []string{"ce-", ""} {
				for _, k := range []string{"traceparent", "tracestate"} {
					if got := h[prefix+k]; len(want[k]) == 0 && len(got) != 0 || len(want[k]) != 0 && (len(got) != 1 || got[0] != want[k]) {
						t.Errorf("flags %02x: header %s%s = %q; the propagator writes %q", byte(flags), prefix, k, got, want[k])
					}
				}
			}
		}
	}
}

func FuzzExtractMsg(f *testing.F) {
	f.Add("ce-traceparent", tp, "", []byte(nil))
	f.Add("traceparent", tp, "application/json", []byte(`{}`))
	f.Add("", "", "application/cloudevents+json", []byte(`{"traceparent":"`+tp+`"}`))
	f.Add("Ce-TraceParent", "00-"+tid+"-"+sid+"-ff", "", []byte(` {"traceparent":1}`))
	f.Fuzz(func(t *testing.T, key, value, contentType string, data []byte) {
		m := &nats.Msg{Subject: "s", Header: nats.Header{}, Data: data}
		if key != "" {
			m.Header[key] = []string{value}
		}
		if contentType != "" {
			m.Header["Content-Type"] = []string{contentType}
		}
		sc := trace.SpanContextFromContext(bustrace.ExtractMsg(context.Background(), bus.FromNATS(m)))
		if !sc.IsValid() {
			return
		}
		// Whatever came in valid goes out as a well-formed traceparent.
		out, _ := telemetry.Inject(trace.ContextWithSpanContext(context.Background(), sc))
		back := trace.SpanContextFromContext(telemetry.Extract(context.Background(), out, ""))
		if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() {
			t.Fatalf("%q does not round-trip: %v vs %v", out, back, sc)
		}
	})
}
