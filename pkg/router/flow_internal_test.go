package router

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A skill version flows does not hold yet (the selector saw the new catalog
// first) is filtered all the same: its filter is compiled on the spot.
func TestAdmitCompilesAVersionFlowsLacks(t *testing.T) {
	t.Parallel()
	old := &skill.Skill{Name: "orders", Digest: "v1", Filter: "true"}
	cur := &skill.Skill{Name: "orders", Digest: "v2", Filter: "data.amount > 100"}
	small := &flow.Event{Type: "com.example.order", Data: map[string]any{"amount": 5.0}}
	for name, flows := range map[string]map[string]*compiledFlow{
		"no entry":    nil,
		"old version": compileFlows([]*skill.Skill{old}, nil),
	} {
		ok, why := admit(&trigger{fev: small}, flows)(cur)
		if ok || !strings.Contains(why, "filter false") {
			t.Errorf("%s: admit = %v, %q; want refused by the filter", name, ok, why)
		}
	}
}

// A filter reads a structured-mode trigger's time.
func TestFilterReadsTheTimeOfAStructuredTrigger(t *testing.T) {
	t.Parallel()
	m := &nats.Msg{Subject: "skillbus.trigger.x", Header: nats.Header{"Content-Type": []string{"application/cloudevents+json"}},
		Data: []byte(`{"specversion":"1.0","id":"1","source":"/t","type":"x","time":"2026-11-27T04:30:00Z","data":{}}`)}
	e, err := bus.DecodeFast(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	s := &skill.Skill{Name: "late", Digest: "d1", Filter: `time.startsWith("2026-11-27")`}
	if ok, why := Filters([]*skill.Skill{s}, (&trigger{e: e}).event())(s); !ok {
		t.Fatalf("admit = false, %q", why)
	}
}
