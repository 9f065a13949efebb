package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// FilterExpr is the filter whose cost RunFilter measures: a comparison of a
// number and of a nested string, as filters over order events are written.
const FilterExpr = `data.amount > 100 && data.customer.tier == "gold"`

// FilterResult is what a filter costs the router's decision per trigger.
type FilterResult struct {
	Triggers, Rounds int
	// Without and With are the median over rounds of the CPU time per trigger
	// to decide it (its data read, the flow controls admitted, the selector run)
	// for the skill without and with the filter; Cost is the median of their
	// differences. CPU time, which waiting for a core on a busy machine does not
	// inflate as it does the time on the clock.
	Without, With, Cost time.Duration
}

// RunFilter decides triggers of one type, which one skill takes, in rounds of
// triggers each, alternately against the skill without and with FilterExpr, as
// the router decides a trigger: its data decoded as flow expressions read it,
// the skill's flow control compiled once (router.Admission), the selector run
// with its verdicts. Publishing and acking, the same either way, are left out.
func RunFilter(triggers, rounds int) FilterResult {
	base := &skill.Skill{Name: "review-order", Description: "Reviews an order.", Kind: skill.KindWorkflow, Digest: "bench-filter-0",
		Triggers: []string{"com.example.order.created"}}
	filtered := *base
	filtered.Digest, filtered.Filter = "bench-filter-1", FilterExpr
	datas := make([]json.RawMessage, 64)
	for i := range datas {
		tier := "silver"
		if i%3 == 0 {
			tier = "gold"
		}
		datas[i] = fmt.Appendf(nil, `{"order": %d, "amount": %d.5, "customer": {"id": "c-%d", "tier": %q}}`, i, 50+i*7, i, tier)
	}
	type setup struct {
		sel *selector.Selector
		adm *router.Admission
	}
	mk := func(s *skill.Skill) setup {
		sel := selector.New(selector.Config{})
		sel.Sync([]*skill.Skill{s})
		return setup{sel, router.NewAdmission([]*skill.Skill{s})}
	}
	without, with := mk(base), mk(&filtered)
	decide := func(st setup, n int) time.Duration {
		start := cpuTime()
		for i := range n {
			obj, data, err := router.RequestData(datas[i%len(datas)])
			if err != nil {
				panic(err) // the data above is JSON
			}
			req := selector.Request{Type: "com.example.order.created", Data: obj}
			ev := &flow.Event{ID: "e", Type: req.Type, Source: "/bench", Data: data}
			if _, err := st.sel.Select(req, selector.Env{Admit: st.adm.Admit(ev)}); err != nil {
				panic(err)
			}
		}
		return (cpuTime() - start) / time.Duration(n)
	}
	decide(without, triggers/10) // warm up
	decide(with, triggers/10)
	var a, b, d []time.Duration
	for range rounds {
		x, y := decide(without, triggers), decide(with, triggers)
		a, b, d = append(a, x), append(b, y), append(d, y-x)
	}
	med := func(s []time.Duration) time.Duration { slices.Sort(s); return s[len(s)/2] }
	return FilterResult{Triggers: triggers, Rounds: rounds, Without: med(a), With: med(b), Cost: med(d)}
}

// FilterLimit is what a filter may cost per trigger.
const FilterLimit = 5 * time.Microsecond

// PrintFilter writes the filter's cost with its settings.
func PrintFilter(w io.Writer, r FilterResult) {
	verdict := "within"
	if r.Cost > FilterLimit {
		verdict = "OVER"
	}
	fmt.Fprintf(w, "filter cost per trigger (router decision, one skill, filter %s; CPU time, median of %d rounds of %d triggers): %s (%s with, %s without) — %s the %s limit\n",
		FilterExpr, r.Rounds, r.Triggers, r.Cost.Round(10*time.Nanosecond), r.With.Round(10*time.Nanosecond), r.Without.Round(10*time.Nanosecond), verdict, FilterLimit)
}
