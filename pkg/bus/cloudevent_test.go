package bus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

func binaryMsg(h map[string]string, data string) *nats.Msg {
	m := nats.NewMsg("skillbus.trigger.x")
	for k, v := range h {
		m.Header.Set(k, v)
	}
	m.Data = []byte(data)
	return m
}

func TestDecodeBinary(t *testing.T) {
	t.Parallel()
	m := binaryMsg(map[string]string{
		"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/test", "ce-type": "com.example.x",
		"ce-time": "2026-01-02T03:04:05Z", "ce-subject": "sub", "Content-Type": "application/json",
		"ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}, `{"a":1}`)
	e, err := bus.Decode(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(),
		"time": e.Time().Format(time.RFC3339), "ct": e.DataContentType(), "data": string(e.Data()),
		"traceparent": e.Extensions()["traceparent"]}
	want := map[string]any{"id": "1", "source": "/test", "type": "com.example.x", "subject": "sub",
		"time": "2026-01-02T03:04:05Z", "ct": "application/json", "data": `{"a":1}`,
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
}

func TestDecodeStructured(t *testing.T) {
	t.Parallel()
	body := `{"specversion":"1.0","id":"7","source":"/s","type":"com.example.y","data":{"k":"v"}}`
	for name, m := range map[string]*nats.Msg{
		"content-type": func() *nats.Msg {
			m := nats.NewMsg("x")
			m.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
			m.Data = []byte(body)
			return m
		}(),
		"no headers": {Subject: "x", Data: []byte(body)},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := bus.Decode(bus.FromNATS(m))
			if err != nil {
				t.Fatal(err)
			}
			if e.ID() != "7" || e.Type() != "com.example.y" || string(e.Data()) != `{"k":"v"}` {
				t.Fatalf("got %v", e)
			}
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	t.Parallel()
	full := map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t"}
	without := func(k string) map[string]string {
		h := map[string]string{}
		for kk, v := range full {
			if kk != k {
				h[kk] = v
			}
		}
		return h
	}
	tests := []struct {
		name  string
		msg   *nats.Msg
		field string
	}{
		{"missing id", binaryMsg(without("ce-id"), `{}`), "id"},
		{"missing source", binaryMsg(without("ce-source"), `{}`), "source"},
		{"missing type", binaryMsg(without("ce-type"), `{}`), "type"},
		{"missing specversion", binaryMsg(without("ce-specversion"), `{}`), "specversion"},
		{"bad specversion", binaryMsg(map[string]string{"ce-specversion": "9.9", "ce-id": "1", "ce-source": "/s", "ce-type": "t"}, ``), "specversion"},
		{"bad time", binaryMsg(map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t", "ce-time": "yesterday"}, ``), "time"},
		{"structured missing id", &nats.Msg{Data: []byte(`{"specversion":"1.0","source":"/s","type":"t"}`)}, "id"},
		{"structured missing specversion", &nats.Msg{Data: []byte(`{"id":"1","source":"/s","type":"t"}`)}, "specversion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bus.Decode(bus.FromNATS(tt.msg))
			var ie *bus.InvalidEventError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *InvalidEventError", err)
			}
			if _, ok := ie.Fields[tt.field]; !ok {
				t.Fatalf("fields %v lack %q", ie.Fields, tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("message %q does not name %q", err, tt.field)
			}
		})
	}
	if _, err := bus.Decode(bus.FromNATS(&nats.Msg{Data: []byte("hello")})); !errors.Is(err, bus.ErrNotCloudEvent) {
		t.Fatalf("plain text: err = %v, want ErrNotCloudEvent", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	meta := bus.Meta{CorrelationID: "c", ExecutionID: "x", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	m, err := bus.Event{ID: "id-1", Source: "/src", Type: "io.skillbus.test", Meta: meta, Data: map[string]int{"n": 1}}.Msg("s")
	if err != nil {
		t.Fatal(err)
	}
	// A structured-mode event: its attributes are in its JSON; its headers are the
	// content type and the message id.
	if len(m.Header) != 2 || m.Header.Get(bus.HeaderContentType) != "application/cloudevents+json" {
		t.Fatalf("headers %v", m.Header)
	}
	if got := m.Header.Get(bus.HeaderMsgID); got != "id-1" {
		t.Fatalf("Nats-Msg-Id = %q", got)
	}
	back, err := bus.Decode(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != "id-1" || back.Source() != "/src" || back.Type() != "io.skillbus.test" || back.Time().IsZero() {
		t.Fatalf("attributes lost: %v", back)
	}
	if d := cmp.Diff(meta, bus.MetaOf(back)); d != "" {
		t.Fatalf("meta (-want +got)\n%s", d)
	}
	var data map[string]int
	if err := json.Unmarshal(back.Data(), &data); err != nil || data["n"] != 1 {
		t.Fatalf("data = %s (%v)", back.Data(), err)
	}
}

// An event given a time carries it; a scheduled message says when it is due, not
// when it was written.
func TestEncodeGivenTime(t *testing.T) {
	t.Parallel()
	due := time.Date(2030, 3, 2, 6, 0, 5, 0, time.FixedZone("CET", 3600))
	m, err := bus.Event{ID: "id-1", Source: "/src", Type: "io.skillbus.test", Data: map[string]int{"n": 1}, Time: due}.Msg("s")
	if err != nil {
		t.Fatal(err)
	}
	back, err := bus.Decode(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	if !back.Time().Equal(due) {
		t.Fatalf("time %v, want %v", back.Time(), due)
	}
}

func TestCheckType(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"com.example.order.created", "a", "A-b_c.9"} {
		if err := events.CheckType(ok); err != nil {
			t.Errorf("CheckType(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a..b", ".a", "a.", "a b", "a*", "a>", "café", strings.Repeat("a", 201)} {
		if err := events.CheckType(bad); err == nil {
			t.Errorf("CheckType(%q) = nil, want an error", bad)
		}
	}
}
