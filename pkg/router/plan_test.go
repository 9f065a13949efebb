package router

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// These tests run the router's pure half — parse and plan — with no server.

var testSubjects = events.Subjects{Prefix: "skillbus"}

var testParse = parseConfig{subjects: testSubjects, maxEventBytes: 4096}

// stub is a first delivery of a trigger on subject with CloudEvents headers
// written by hand, as any NATS client would.
func stub(subject string, hdr map[string]string, data string) *stubMsg {
	m := &stubMsg{subject: subject, header: nats.Header{}, data: []byte(data)}
	for k, v := range hdr {
		m.header.Set(k, v)
	}
	m.md.NumDelivered, m.md.Sequence.Stream = 1, 7
	return m
}

func ceHeaders(id, typ string) map[string]string {
	return map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "/test", "ce-type": typ, "Content-Type": "application/json"}
}

func mustParse(t *testing.T, m *stubMsg) *trigger {
	t.Helper()
	var tr trigger
	if o := parse(context.Background(), m, testParse, &tr); o != nil {
		t.Fatalf("parse: %#v", o)
	}
	return &tr
}

// decideFor is the selector's decision about tr over skills.
func decideFor(t *testing.T, cfg selector.Config, tr *trigger, skills ...*skill.Skill) (*selector.Decision, *selector.Selector) {
	t.Helper()
	sel := selector.New(cfg)
	sel.Sync(skills)
	d, err := sel.Select(tr.req, selector.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return d, sel
}

func TestParseRejectsBadTriggers(t *testing.T) {
	t.Parallel()
	big := `{"x":"` + strings.Repeat("a", 5000) + `"}`
	noType := ceHeaders("1", "com.example.greet")
	delete(noType, "ce-type")
	xml := ceHeaders("1", "com.example.greet")
	xml["Content-Type"] = "text/plain"
	withSource := func(src string) map[string]string {
		h := ceHeaders("run-1/step-2", "io.skillbus.invoke")
		h["ce-source"] = src
		return h
	}
	for _, tc := range []struct {
		name, subject string
		hdr           map[string]string
		data          string
		code          string
		reason        string
	}{
		{"too large", "skillbus.trigger.com.example.greet", ceHeaders("1", "com.example.greet"), big, events.UnmatchedTooLarge, "the limit is 4096"},
		{"no type", "skillbus.trigger.com.example.greet", noType, `{}`, events.UnmatchedInvalid, "type"},
		{"type not its subject", "skillbus.trigger.com.example.other", ceHeaders("1", "com.example.greet"), `{}`, events.UnmatchedBadType, "publish it on skillbus.trigger.com.example.greet"},
		{"data not JSON", "skillbus.trigger.com.example.greet", ceHeaders("1", "com.example.greet"), `{nope`, events.UnmatchedInvalid, "not valid JSON"},
		// skillbus's own sources, by a sender: a child call or a tick taken first.
		{"skill tool's source", "skillbus.trigger.skill.hello", withSource("/skillbus/skill-tool"), `{}`, events.UnmatchedReservedSource, "skillbus.trigger.skill.*.internal"},
		{"scheduler's source, encoded", "skillbus.trigger.skill.hello", withSource("/skillbus%2Fscheduler"), `{}`, events.UnmatchedReservedSource, "sources beginning /skillbus/"},
		{"reserved source by type", "skillbus.trigger.io.skillbus.invoke", withSource("/skillbus/skill-tool"), `{}`, events.UnmatchedReservedSource, "use a source of your own"},
		{"debounce's source", "skillbus.trigger.skill.hello", withSource("/skillbus/debounce/hello"), `{}`, events.UnmatchedReservedSource, "skillbus's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tr trigger
			o := parse(context.Background(), stub(tc.subject, tc.hdr, tc.data), testParse, &tr)
			rej, ok := o.(rejected)
			if !ok {
				t.Fatalf("parse = %#v, want a rejection", o)
			}
			if rej.code != tc.code || !strings.Contains(rej.reason, tc.reason) {
				t.Fatalf("rejected %s %q, want %s containing %q", rej.code, rej.reason, tc.code, tc.reason)
			}
			if rej.outcome() != telemetry.OutcomeRejected || tr.ref.Seq != 7 {
				t.Fatalf("outcome %s, ref %+v", rej.outcome(), tr.ref)
			}
		})
	}
	// Non-JSON data of another media type is wrapped, not rejected.
	tr := mustParse(t, stub("skillbus.trigger.com.example.greet", xml, "hi <b>"))
	if string(tr.inputs) != `{"data":"hi \u003cb\u003e"}` && string(tr.inputs) != `{"data":"hi <b>"}` {
		t.Fatalf("inputs = %s", tr.inputs)
	}
}

func TestParseFindsTheSkillInvokedByName(t *testing.T) {
	t.Parallel()
	tr := mustParse(t, stub("skillbus.trigger.skill.hello", ceHeaders("1", "io.skillbus.invoke"), `{"text":"hi"}`))
	if tr.req.Skill != "hello" || tr.req.Text != "hi" {
		t.Fatalf("request = %+v", tr.req)
	}
	// skillbus's own triggers, on the subject only its roles publish.
	own := ceHeaders("run-1/step-2", "io.skillbus.invoke")
	own["ce-source"] = "/skillbus/skill-tool"
	if tr := mustParse(t, stub("skillbus.trigger.skill.hello.internal", own, `{}`)); tr.req.Skill != "hello" || tr.burstOf != "" {
		t.Fatalf("internal trigger: request %+v, burst of %q", tr.req, tr.burstOf)
	}
	h := ceHeaders("2", "com.example.greet")
	h["ce-"+events.ExtSkill] = "other"
	h["ce-"+events.ExtProgress] = events.ProgressLive
	tr = mustParse(t, stub("skillbus.trigger.com.example.greet", h, ``))
	if tr.req.Skill != "other" || !tr.live || string(tr.inputs) != "{}" {
		t.Fatalf("request = %+v live %v inputs %s", tr.req, tr.live, tr.inputs)
	}
	if tr.actID != events.ActivationID("/test", "2") || tr.meta.CorrelationID != tr.actID || tr.meta.CausationID != "2" {
		t.Fatalf("activation %s meta %+v", tr.actID, tr.meta)
	}
}

func TestPlanOneSkill(t *testing.T) {
	t.Parallel()
	greet := &skill.Skill{Name: "hello", Description: "greets", Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"}}
	tr := mustParse(t, stub("skillbus.trigger.com.example.greet", ceHeaders("1", "com.example.greet"), `{"name":"Ada"}`))
	tr.depth = 2
	d, sel := decideFor(t, selector.Config{}, tr, greet)
	o, ok := plan(d, tr, testSubjects, sel.Get).(*routed)
	if !ok {
		t.Fatalf("plan = %#v, want routed", o)
	}
	act := events.ActivationID("/test", "1")
	exec := events.ExecutionID("/test", "1", "hello")
	if len(o.jobs()) != 1 {
		t.Fatalf("%d jobs", len(o.jobs()))
	}
	j := o.jobs()[0]
	want := plannedJob{
		subject: "skillbus.exec.default.hello." + act + "." + events.StagePlan,
		id:      exec + ".job",
		job: events.Job{
			Depth: 2, ExecutionID: exec, ActivationID: act, Inputs: json.RawMessage(`{"name":"Ada"}`), Trigger: tr.ref,
			Skill: events.SkillRef{Name: "hello", Version: "abcdef012345", Digest: "abcdef0123456789", Pool: "default", ExecutionID: exec, Source: selector.SourceRule, Score: o.decided.Plan.Primary.Score},
		},
	}
	want.job.Route = events.RouteOf(o.decided, true)
	want.meta = tr.meta
	want.meta.ExecutionID, want.meta.CausationID = exec, act+".route.decided"
	if diff := cmp.Diff(want, j, cmp.AllowUnexported(plannedJob{})); diff != "" {
		t.Fatalf("job (-want +got):\n%s", diff)
	}
	if o.decidedID != act+".route.decided" || o.decided.ActivationID != act || o.decided.Plan.Primary.Name != "hello" || o.outcome() != telemetry.OutcomeRouted {
		t.Fatalf("decision %s %+v", o.decidedID, o.decided)
	}
}

func TestPlanParallelAlwaysAndFallback(t *testing.T) {
	t.Parallel()
	mk := func(name string, ps bool) *skill.Skill {
		return &skill.Skill{Name: name, Description: name, Digest: name + "0123456789ab", Triggers: []string{"com.example.build"}, ParallelSafe: ps}
	}
	a, b, c := mk("a", true), mk("b", true), mk("c", false)
	audit := &skill.Skill{Name: "audit", Description: "audit", Digest: "audit0123456789", Always: true}
	generic := &skill.Skill{Name: "generic", Description: "anything", Digest: "generic012345678"}
	tr := mustParse(t, stub("skillbus.trigger.com.example.build", ceHeaders("9", "com.example.build"), `{}`))
	d, sel := decideFor(t, selector.Config{Generic: "generic"}, tr, a, b, c, audit, generic)
	o, ok := plan(d, tr, testSubjects, sel.Get).(*routed)
	if !ok {
		t.Fatalf("plan = %#v", o)
	}
	var names []string
	for _, j := range o.jobs() {
		names = append(names, j.job.Skill.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "audit"}, names); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	var chain []string
	for _, f := range o.jobs()[0].job.Fallback {
		chain = append(chain, f.Name)
	}
	if diff := cmp.Diff([]string{"c", "generic"}, chain); diff != "" {
		t.Fatalf("the primary's fallback chain (-want +got):\n%s", diff)
	}
	if o.jobs()[0].job.Fallback[1].Source != "generic" {
		t.Fatalf("generic ref %+v", o.jobs()[0].job.Fallback[1])
	}
	for _, j := range o.jobs()[1:] {
		if j.job.Fallback != nil || j.job.Route.Primary == nil || j.job.Route.Primary.Name != "a" {
			t.Fatalf("%s: fallback %v route %+v; only the primary's job falls back, the others name it", j.job.Skill.Name, j.job.Fallback, j.job.Route)
		}
	}
	// Every job knows its partners, and the primary's entry its whole chain.
	tog := o.jobs()[0].job.Together
	if len(tog) != 3 || len(tog[0]) != 3 || tog[1][0] != o.jobs()[1].job.ExecutionID || tog[2][0] != o.jobs()[2].job.ExecutionID {
		t.Fatalf("together = %v", tog)
	}
}

// The generic skill the selector put at the end of a chain, removed from the
// catalog before the plan is made (a sync between the two): the chain ends
// without it, and the router carries on.
func TestPlanWithoutAGenericSkillRemovedSinceTheDecision(t *testing.T) {
	t.Parallel()
	a := &skill.Skill{Name: "a", Description: "a", Digest: "a0123456789ab", Triggers: []string{"com.example.build"}}
	generic := &skill.Skill{Name: "generic", Description: "anything", Digest: "generic012345678"}
	tr := mustParse(t, stub("skillbus.trigger.com.example.build", ceHeaders("9", "com.example.build"), `{}`))
	d, sel := decideFor(t, selector.Config{Generic: "generic"}, tr, a, generic)
	if !slices.Contains(d.Fallback, "generic") {
		t.Fatalf("the decision's chain %v lacks the generic skill", d.Fallback)
	}
	sel.Sync([]*skill.Skill{a})
	o, ok := plan(d, tr, testSubjects, sel.Get).(*routed)
	if !ok {
		t.Fatalf("plan = %#v", o)
	}
	if f := o.jobs()[0].job.Fallback; len(f) != 0 {
		t.Fatalf("fallback chain %+v, want none: its skill is gone", f)
	}
}

func TestPlanUnmatched(t *testing.T) {
	t.Parallel()
	greet := &skill.Skill{Name: "hello", Description: "greets people by name", Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"}}
	tr := mustParse(t, stub("skillbus.trigger.com.example.other", ceHeaders("1", "com.example.other"), `{}`))
	d, sel := decideFor(t, selector.Config{}, tr, greet)
	o, ok := plan(d, tr, testSubjects, sel.Get).(unmatched)
	if !ok || o.code != events.UnmatchedNoSkill || o.reason != `no skill matches event type "com.example.other"` {
		t.Fatalf("plan = %#v", o)
	}
	tr = mustParse(t, stub("skillbus.trigger.io.skillbus.request", ceHeaders("2", "io.skillbus.request"), `{"text":"greets people quietly"}`))
	d, sel = decideFor(t, selector.Config{Threshold: 0.99}, tr, greet)
	o, ok = plan(d, tr, testSubjects, sel.Get).(unmatched)
	if !ok || !strings.HasPrefix(o.reason, "no skill scored above the threshold 0.99; best: hello") || o.outcome() != telemetry.OutcomeUnmatched {
		t.Fatalf("plan = %#v", o)
	}
	// Above the threshold, but its inputs would refuse the request's data: the
	// reason says so, not that nothing scored.
	greet.Workflow = &skill.Workflow{Inputs: []skill.Input{{Name: "name"}}}
	tr = mustParse(t, stub("skillbus.trigger.io.skillbus.request", ceHeaders("3", "io.skillbus.request"), `{"query":"greets people by name"}`))
	d, sel = decideFor(t, selector.Config{}, tr, greet)
	o, ok = plan(d, tr, testSubjects, sel.Get).(unmatched)
	if !ok || o.code != events.UnmatchedNoSkill || !strings.HasPrefix(o.reason, "hello scores ") ||
		!strings.Contains(o.reason, "but is kept out: not for this request: its inputs (name) do not take the field query") {
		t.Fatalf("plan = %#v", o)
	}
	// Below the threshold too (a required input missing): the best candidate's
	// refusal is named beside its score.
	greet.Workflow = &skill.Workflow{Inputs: []skill.Input{{Name: "name", Required: true}}}
	tr = mustParse(t, stub("skillbus.trigger.io.skillbus.request", ceHeaders("4", "io.skillbus.request"), `{"query":"greets people by name"}`))
	d, sel = decideFor(t, selector.Config{}, tr, greet)
	o, ok = plan(d, tr, testSubjects, sel.Get).(unmatched)
	if !ok || !strings.HasPrefix(o.reason, "no skill scored above the threshold 0.65; best: hello ") ||
		!strings.HasSuffix(o.reason, "(not for this request: its inputs (name) do not take the field query)") {
		t.Fatalf("plan = %#v", o)
	}
}

// decideWithFlow is decideFor with the skills' flow control, as the router runs it.
func decideWithFlow(t *testing.T, tr *trigger, skills ...*skill.Skill) (*selector.Decision, *selector.Selector) {
	t.Helper()
	sel := selector.New(selector.Config{})
	sel.Sync(skills)
	d, err := sel.Select(tr.req, selector.Env{Admit: admit(tr, compileFlows(skills, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return d, sel
}

func TestPlanFilter(t *testing.T) {
	t.Parallel()
	big := &skill.Skill{Name: "big-orders", Description: "big", Digest: "big0123456789ab", Triggers: []string{"com.example.order"}, Filter: `data.amount > 100`}
	vip := &skill.Skill{Name: "vip", Description: "vip", Digest: "vip0123456789ab", Triggers: []string{"com.example.order"}, Filter: `extensions.tier == "gold"`, Priority: "high"}
	order := func(id, data string, ext map[string]string) *trigger {
		h := ceHeaders(id, "com.example.order")
		for k, v := range ext {
			h["ce-"+k] = v
		}
		return mustParse(t, stub("skillbus.trigger.com.example.order", h, data))
	}
	for _, tc := range []struct {
		name, data string
		ext        map[string]string
		primary    string
		code       string
		reasons    map[string]string // candidate → reason it must contain
	}{
		{name: "both take it", data: `{"amount": 250}`, ext: map[string]string{"tier": "gold"}, primary: "vip",
			reasons: map[string]string{"vip": "filter true", "big-orders": "filter true"}},
		{name: "one takes it", data: `{"amount": 250}`, primary: "big-orders",
			reasons: map[string]string{"vip": `filter false: extensions.tier == "gold"`, "big-orders": "filter true"}},
		{name: "none takes it", data: `{"amount": 5}`, code: events.UnmatchedFiltered,
			reasons: map[string]string{"big-orders": "filter false: data.amount > 100"}},
		{name: "a filter fails", data: `{"total": 5}`, code: events.UnmatchedFilterError,
			reasons: map[string]string{"big-orders": "filter error: no such key: amount"}},
		{name: "by name, filtered all the same", data: `{"amount": 5}`, ext: map[string]string{events.ExtSkill: "big-orders"}, code: events.UnmatchedFiltered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := order("1", tc.data, tc.ext)
			d, sel := decideWithFlow(t, tr, big, vip)
			for name, want := range tc.reasons {
				if c := d.Candidate(name); c == nil || !strings.Contains(c.Reason, want) {
					t.Errorf("candidate %s: %+v; want its reason to say %q", name, c, want)
				}
			}
			o := plan(d, tr, testSubjects, sel.Get)
			if tc.primary != "" {
				r, ok := o.(*routed)
				if !ok || r.decided.Plan.Primary.Name != tc.primary {
					t.Fatalf("plan = %#v, want %s as primary", o, tc.primary)
				}
				for _, c := range r.decided.Candidates {
					if want, ok := tc.reasons[c.Name]; ok && !strings.Contains(c.Reason, want) {
						t.Errorf("route.decided candidate %s: reason %q, want %q in it", c.Name, c.Reason, want)
					}
				}
				return
			}
			u, ok := o.(unmatched)
			if !ok || u.code != tc.code || !strings.Contains(u.reason, "big-orders: filter") {
				t.Fatalf("plan = %#v, want unmatched %s naming big-orders' filter", o, tc.code)
			}
		})
	}
}

func TestCompileFlowsOncePerVersion(t *testing.T) {
	t.Parallel()
	a := &skill.Skill{Name: "a", Digest: "d1", Filter: "data.x > 1"}
	b := &skill.Skill{Name: "b", Digest: "d1"}
	bad := &skill.Skill{Name: "bad", Digest: "d1", Filter: "data.x >"}
	first := compileFlows([]*skill.Skill{a, b, bad}, nil)
	if len(first) != 2 || first["a"].filter == nil || first["bad"].err == nil {
		t.Fatalf("flows = %+v", first)
	}
	same := compileFlows([]*skill.Skill{a}, first)
	if same["a"] != first["a"] {
		t.Fatal("an unchanged version was compiled again")
	}
	a2 := &skill.Skill{Name: "a", Digest: "d2", Filter: "data.x > 2"}
	if next := compileFlows([]*skill.Skill{a2}, first); next["a"] == first["a"] || next["a"].filter.String() != "data.x > 2" {
		t.Fatal("a new version kept the old filter")
	}
	// A filter that does not compile refuses every trigger, as a failing filter.
	tr := mustParse(t, stub("skillbus.trigger.com.example.x", ceHeaders("1", "com.example.x"), `{"x": 5}`))
	if ok, why := admit(tr, first)(bad); ok || !strings.Contains(why, "filter error: filter does not compile") {
		t.Fatalf("admit = %v %q", ok, why)
	}
}
