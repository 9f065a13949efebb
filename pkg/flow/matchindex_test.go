package flow_test

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/flow"
)

// A match indexed by its equality files two events under the same token
// whenever it can be true of them, and under different ones for values that
// differ.
func TestMatchIndex(t *testing.T) {
	t.Parallel()
	ev := func(data any) *flow.Event {
		return &flow.Event{ID: "1", Type: "com.example.t", Source: "/s", Subject: "sub", Data: data}
	}
	for _, tc := range []struct {
		match   string
		indexed bool
	}{
		{"event.data.order == trigger.data.order", true},
		{"trigger.data.order == event.data.order", true},
		{"event.data.shop == 'x' && event.data['order'] == trigger.data['order']", true},
		{"event.subject == trigger.subject", true},
		{"event.data.order != trigger.data.order", false},
		{"event.data.order == trigger.data.order || event.data.all == true", false},
		{"event.data.order == 7", false},
		{"event.data.order + 1 == trigger.data.order", false},
	} {
		p, err := flow.CompileMatch(tc.match)
		if err != nil {
			t.Fatalf("%s: %v", tc.match, err)
		}
		if got := p.Index() != nil; got != tc.indexed {
			t.Fatalf("%s: indexed %v; want %v", tc.match, got, tc.indexed)
		}
	}

	p, err := flow.CompileMatch("event.data.shop == 'x' && event.data.order == trigger.data.order")
	if err != nil {
		t.Fatal(err)
	}
	ix := p.Index()
	values := []any{int64(7), 7.0, uint64(7), 7.5, "7", "seven", true, nil, []any{int64(1)}, map[string]any{"a": 1.0}, []any{1.0}}
	for _, a := range values {
		for _, b := range values {
			e, tr := ev(map[string]any{"shop": "x", "order": a}), ev(map[string]any{"order": b})
			matched, _ := p.MatchPair(e, tr)
			et, ok1 := ix.EventToken(e)
			tt, ok2 := ix.TriggerToken(tr)
			if !ok1 || !ok2 {
				t.Fatalf("%v, %v: no token", a, b)
			}
			if matched && et != tt {
				t.Fatalf("event %#v, trigger %#v: matched, but filed under %s and %s", a, b, et, tt)
			}
			if _, isList := a.([]any); !matched && et == tt && et != flow.UnindexedToken && !isList {
				t.Fatalf("event %#v, trigger %#v: not equal, but both filed under %s", a, b, et)
			}
		}
	}
	if _, ok := ix.TriggerToken(ev(map[string]any{"shop": "x"})); ok {
		t.Fatal("a token for a trigger without the field")
	}
}
