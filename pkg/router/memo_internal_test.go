package router

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// memoSkill is a workflow skill with required inputs, changed by edit.
func memoSkill(name string, edit func(*skill.Skill), required ...string) *skill.Skill {
	s := &skill.Skill{Name: name, Description: name + " handles requests", Kind: skill.KindWorkflow,
		Version: "1.0.0", Digest: name + "-0123456789abcdef", Workflow: &skill.Workflow{}}
	for _, in := range required {
		s.Workflow.Inputs = append(s.Workflow.Inputs, skill.Input{Name: in, Type: "string", Required: true})
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func triggers(types ...string) func(*skill.Skill) {
	return func(s *skill.Skill) { s.Triggers = types }
}

// memoEnv is the running system as a test sets it: success counts by skill,
// dead pools.
type memoEnv struct {
	success map[string][2]int
	dead    map[string]bool
}

func (e memoEnv) env() selector.Env {
	return selector.Env{
		Success:  func(name, _ string) (int, int) { c := e.success[name]; return c[0], c[1] },
		PoolLive: func(pool string) bool { return !e.dead[pool] },
	}
}

// TestRememberedDecisionsAreTheSelectors routes text-less triggers over varied
// catalogs (subscribers by type and by pattern, priorities, costs, parallel
// skills, always-skills, a generic fallback, every kind of flow control, dead
// pools, success counts that change) both ways — as triggers, which the router
// remembers the decisions of, and with the memo out of the way — and requires
// the same decision (candidates, scores, reasons, roles), the same plan (its
// jobs as JSON) and the same flow verdicts, for the first trigger asking a
// question and for the ones asking it again.
func TestRememberedDecisionsAreTheSelectors(t *testing.T) {
	const typ = "com.example.order"
	catalogs := []struct {
		name   string
		cfg    selector.Config
		skills []*skill.Skill
	}{
		{"one subscriber", selector.Config{}, []*skill.Skill{
			memoSkill("orders", triggers(typ), "n"),
		}},
		{"subscribers", selector.Config{Generic: "generic"}, []*skill.Skill{
			memoSkill("first", func(s *skill.Skill) { s.Triggers, s.Priority, s.CostHint = []string{typ}, "high", "low" }, "n"),
			memoSkill("second", func(s *skill.Skill) { s.Triggers, s.Priority, s.Pool = []string{typ}, "low", "gpu" }),
			memoSkill("pattern", func(s *skill.Skill) { s.Triggers = []string{"com.example.*"}; s.CostHint = "high" }, "name"),
			memoSkill("par-a", func(s *skill.Skill) { s.Triggers, s.ParallelSafe = []string{typ}, true }),
			memoSkill("par-b", func(s *skill.Skill) { s.Triggers, s.ParallelSafe, s.Pool = []string{typ}, true, "gpu" }),
			memoSkill("audit", func(s *skill.Skill) { s.Always = true }),
			memoSkill("generic", nil),
			memoSkill("other", triggers("com.example.refund")),
		}},
		{"flow control", selector.Config{}, []*skill.Skill{
			memoSkill("plain", triggers(typ)),
			memoSkill("filtered", func(s *skill.Skill) { s.Triggers, s.Filter = []string{typ}, `has(data.n) && int(data.n) > 2` }),
			memoSkill("limited", func(s *skill.Skill) {
				s.Triggers = []string{typ}
				s.RateLimit = &skill.RateLimit{Limit: 5, Period: skill.Duration(time.Minute)}
			}),
			memoSkill("debounced", func(s *skill.Skill) {
				s.Triggers = []string{typ}
				s.Debounce = &skill.Debounce{Period: skill.Duration(time.Second)}
			}),
			memoSkill("queued", func(s *skill.Skill) { s.Triggers, s.QueuePriority = []string{typ}, "int(data.n) % 2 == 0 ? 60 : 0" }),
			memoSkill("audit", func(s *skill.Skill) { s.Always, s.Filter = true, `has(data.n)` }),
		}},
		{"filters", selector.Config{Generic: "fallback"}, []*skill.Skill{
			memoSkill("plain", triggers(typ)),
			memoSkill("filtered", func(s *skill.Skill) { s.Triggers, s.Filter = []string{typ}, `has(data.n) && int(data.n) > 2` }),
			memoSkill("named", func(s *skill.Skill) { s.Triggers, s.Filter = []string{typ}, `has(data.name)` }),
			memoSkill("fallback", func(s *skill.Skill) { s.Filter = `!has(data.name)` }),
			memoSkill("audit", func(s *skill.Skill) { s.Always, s.Filter = true, `has(data.n)` }),
		}},
		{"bad filter", selector.Config{}, []*skill.Skill{
			memoSkill("broken", func(s *skill.Skill) { s.Triggers, s.Filter = []string{typ}, `data.n >` }),
			memoSkill("fine", triggers(typ)),
		}},
	}
	// The running system, changing between rounds: a decision remembered in one
	// round is not the next round's.
	rounds := []memoEnv{
		{},
		{},
		{success: map[string][2]int{"orders": {9, 10}, "first": {1, 10}, "plain": {3, 4}}},
		{success: map[string][2]int{"orders": {9, 10}, "first": {1, 10}, "plain": {3, 4}}, dead: map[string]bool{"gpu": true, "default": true}},
		{dead: map[string]bool{"default": true}},
		{},
	}
	type request struct{ subject, typ, data string }
	requests := []request{
		{testSubjects.Trigger(typ), typ, `{"n":3}`},
		{testSubjects.Trigger(typ), typ, `{"n":4,"name":"Ada"}`},
		{testSubjects.Trigger(typ), typ, `{"name":"Bo"}`},
		{testSubjects.Trigger(typ), typ, `{"n":"three"}`}, // the keys of a question before, other values
		{testSubjects.Trigger(typ), typ, `{"n":null}`},
		{testSubjects.Trigger(typ), typ, ``},
		{testSubjects.Trigger(typ), typ, `[1,2]`},
		{testSubjects.Trigger("com.example.refund"), "com.example.refund", `{"n":1}`},
		{testSubjects.Trigger("com.example.unknown"), "com.example.unknown", `{"n":1}`},
		{testSubjects.TriggerSkill("orders"), "io.example.any", `{"n":3}`},
		{testSubjects.TriggerSkill("second"), "io.example.any", `{}`},
		{testSubjects.TriggerSkill("filtered"), "io.example.any", `{"n":1}`},
		{testSubjects.TriggerSkill("nope"), "io.example.any", `{"n":1}`},
	}
	ctx := context.Background()
	for _, c := range catalogs {
		t.Run(c.name, func(t *testing.T) {
			r, flows := memoRouter(c.cfg, c.skills)
			n := 0
			for round, e := range rounds {
				for _, q := range requests {
					n++
					id := fmt.Sprint(n % 3) // triggers asked again, by ids seen before
					decide := func(remember bool) (*selector.Decision, string) {
						tr := mustParse(t, stub(q.subject, ceHeaders(id, q.typ), q.data))
						if !remember {
							tr.msg = nil // as Decide's requests: never remembered
						}
						d, err := r.selectWith(ctx, tr, e.env(), flows)
						if err != nil {
							return nil, "error: " + err.Error()
						}
						return d, routeOf(t, d, tr, r)
					}
					want, wantRoute := decide(false)
					for again := range 2 {
						got, gotRoute := decide(true)
						if diff := cmp.Diff(decisionJSON(t, want), decisionJSON(t, got)); diff != "" {
							t.Fatalf("round %d, %+v, asked %d times: decision (-selector +remembered):\n%s", round, q, again+1, diff)
						}
						if diff := cmp.Diff(wantRoute, gotRoute); diff != "" {
							t.Fatalf("round %d, %+v, asked %d times: route (-selector +remembered):\n%s", round, q, again+1, diff)
						}
					}
				}
			}
		})
	}
}

// TestRememberedDecisionIsAskedOnce: a text-less trigger's question is
// remembered the second time it is asked; asked again with the same answers
// from the running system it gets the decision remembered; another success
// count, a dead pool or other data keys ask the selector again.
func TestRememberedDecisionIsAskedOnce(t *testing.T) {
	const typ = "com.example.order"
	skills := []*skill.Skill{memoSkill("orders", triggers(typ), "n")}
	r, flows := memoRouter(selector.Config{}, skills)
	decide := func(e memoEnv, id, data string) *selector.Decision {
		tr := mustParse(t, stub(testSubjects.Trigger(typ), ceHeaders(id, typ), data))
		d, err := r.selectWith(context.Background(), tr, e.env(), flows)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	once := decide(memoEnv{}, "0", `{"n":0}`)
	if len(r.memo.m) != 0 {
		t.Fatal("a question asked once was remembered")
	}
	first := decide(memoEnv{}, "1", `{"n":1}`)
	if first == once || len(r.memo.m) != 1 {
		t.Fatal("a question asked twice was not remembered")
	}
	if d := decide(memoEnv{}, "2", `{"n":2}`); d != first {
		t.Fatal("the same question with the same answers was decided again")
	}
	for _, c := range []struct {
		name string
		env  memoEnv
		data string
	}{
		{"success", memoEnv{success: map[string][2]int{"orders": {1, 2}}}, `{"n":1}`},
		{"dead pool", memoEnv{dead: map[string]bool{"default": true}}, `{"n":1}`},
		{"data keys", memoEnv{}, `{"m":1}`},
	} {
		if d := decide(c.env, "3", c.data); d == first {
			t.Errorf("%s: the remembered decision was taken for another question", c.name)
		}
	}
	r.gen.Store(2)
	if d := decide(memoEnv{}, "4", `{"n":1}`); d == first {
		t.Error("a decision of another catalog was taken")
	}
}

// TestRememberedDecisionAsksFiltersAgain: a decision that asked about a skill
// whose only flow control is a filter is taken again while the filter answers
// the trigger as it did, with the same verdicts noted; a filter that answers
// otherwise asks the selector again. One that asked about a skill with any other
// flow control is never taken again.
func TestRememberedDecisionAsksFiltersAgain(t *testing.T) {
	const typ = "com.example.order"
	skills := []*skill.Skill{
		memoSkill("big", func(s *skill.Skill) { s.Triggers, s.Filter = []string{typ}, `int(data.n) > 2` }),
		memoSkill("small", triggers(typ)),
		memoSkill("limited", func(s *skill.Skill) {
			s.Triggers = []string{"com.example.limited"}
			s.RateLimit = &skill.RateLimit{Limit: 1 << 20, Period: skill.Duration(time.Minute)}
		}),
	}
	r, flows := memoRouter(selector.Config{}, skills)
	decide := func(id, typ, data string) (*selector.Decision, flowVerdicts) {
		tr := mustParse(t, stub(testSubjects.Trigger(typ), ceHeaders(id, typ), data))
		d, err := r.selectWith(context.Background(), tr, memoEnv{}.env(), flows)
		if err != nil {
			t.Fatal(err)
		}
		return d, tr.verdicts
	}
	decide("0", typ, `{"n":5}`) // asked once: not remembered yet
	big, _ := decide("1", typ, `{"n":5}`)
	if d, _ := decide("2", typ, `{"n":7}`); d != big {
		t.Fatal("a filter that answered the same did not take the remembered decision")
	}
	small, v := decide("3", typ, `{"n":1}`)
	if small == big || len(v.filtered) != 1 {
		t.Fatalf("a filter that answered otherwise took the remembered decision (verdicts %+v)", v)
	}
	if d, v2 := decide("4", typ, `{"n":0}`); d != small || !cmp.Equal(v, v2, cmp.AllowUnexported(flowVerdicts{})) {
		t.Fatalf("the remembered decision of a filter false was not taken with its verdicts: %+v, want %+v", v2, v)
	}
	if d, _ := decide("5", typ, `{"n":9}`); d != big {
		t.Fatal("the decision remembered for the filter true was forgotten")
	}
	decide("6", "com.example.limited", `{"n":1}`)
	limited, _ := decide("7", "com.example.limited", `{"n":1}`)
	if d, _ := decide("8", "com.example.limited", `{"n":1}`); d == limited {
		t.Fatal("a decision that counted a rate limit was taken again")
	}
}

// memoRouter is a router with a selector over skills, at catalog generation 1,
// and their compiled flow control.
func memoRouter(cfg selector.Config, skills []*skill.Skill) (*Router, map[string]*compiledFlow) {
	r := &Router{sel: selector.New(cfg)}
	r.sel.Sync(skills)
	r.gen.Store(1)
	return r, compileFlows(skills, nil)
}

func decisionJSON(t *testing.T, d *selector.Decision) string {
	t.Helper()
	if d == nil {
		return "null"
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// routeOf is what plan makes of d for tr, as text: the outcome, its jobs as
// JSON, and what flow control said.
func routeOf(t *testing.T, d *selector.Decision, tr *trigger, r *Router) string {
	t.Helper()
	s := fmt.Sprintf("folds %v, verdicts %+v, prio %v\n", tr.folds, tr.verdicts, tr.prio)
	switch o := plan(d, tr, testSubjects, r.sel.Get).(type) {
	case *routed:
		for _, pj := range o.jobs() {
			b, err := pj.job.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			s += pj.subject + " " + pj.id + " " + string(b) + "\n"
		}
	case unmatched:
		s += "unmatched " + o.code + ": " + o.reason
	default:
		s += fmt.Sprintf("%#v", o)
	}
	return s
}

// BenchmarkSelectRemembered is selectFor's work on a text-less trigger its
// type's one subscriber takes: remembered, and asked of the selector each time.
func BenchmarkSelectRemembered(b *testing.B) {
	const typ = "com.example.order"
	skills := []*skill.Skill{memoSkill("orders", triggers(typ), "n")}
	r, flows := memoRouter(selector.Config{}, skills)
	m := stub(testSubjects.Trigger(typ), ceHeaders("1", typ), `{"n":3}`)
	var tr trigger
	if o := parse(context.Background(), m, testParse, &tr); o != nil {
		b.Fatal(o)
	}
	env := memoEnv{success: map[string][2]int{"orders": {3, 4}}}.env()
	for _, remember := range []bool{true, false} {
		b.Run(map[bool]string{true: "remembered", false: "selector"}[remember], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t := tr
				if !remember {
					t.msg = nil
				}
				if _, err := r.selectWith(context.Background(), &t, env, flows); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSelectUnrepeated is selectFor's work on text-less triggers whose
// questions do not repeat (data with keys of its own each time): the memo's
// cost when it never helps, against the selector alone.
func BenchmarkSelectUnrepeated(b *testing.B) {
	const typ = "com.example.order"
	skills := []*skill.Skill{memoSkill("orders", triggers(typ), "n")}
	r, flows := memoRouter(selector.Config{}, skills)
	env := memoEnv{success: map[string][2]int{"orders": {3, 4}}}.env()
	const n = 1 << 12
	trs := make([]trigger, n)
	for i := range trs {
		m := stub(testSubjects.Trigger(typ), ceHeaders("1", typ), fmt.Sprintf(`{"k%d":3}`, i))
		if o := parse(context.Background(), m, testParse, &trs[i]); o != nil {
			b.Fatal(o)
		}
	}
	for _, memo := range []bool{true, false} {
		b.Run(map[bool]string{true: "memo", false: "selector"}[memo], func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := trs[i%n]
				i++
				if !memo {
					t.msg = nil
				}
				if _, err := r.selectWith(context.Background(), &t, env, flows); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
