package router

import (
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A skill's flow control (filter, rate_limit) is compiled once per skill version,
// when the router syncs with the catalog, and evaluated for each trigger that
// recalls the skill.

// compiledFlow is a skill version's flow-control expressions, compiled.
type compiledFlow struct {
	digest string
	filter *flow.Program
	key    *flow.Program
	rate   *skill.RateLimit
	// debounce and dkey, its key compiled, fold bursts of triggers into one run.
	debounce *skill.Debounce
	dkey     *flow.Program
	// batch and bkey, its key compiled, gather triggers into one run.
	batch *skill.Batch
	bkey  *flow.Program
	// cancels are the skill's cancel_on rules, their matches compiled.
	cancels []cancelRule
	// prio is the skill's queue_priority, compiled (prio.go).
	prio *flow.Program
	// err is an expression that did not compile (a skill published by an older
	// registry, or built by hand): every trigger then gets filter_error.
	err error
}

// compileFlows compiles the flow control of skills, reusing prev's entries for
// versions it already holds. Skills without flow control have no entry.
func compileFlows(skills []*skill.Skill, prev map[string]*compiledFlow) map[string]*compiledFlow {
	out := make(map[string]*compiledFlow)
	for _, s := range skills {
		if !hasFlow(s) {
			continue
		}
		if c, ok := prev[s.Name]; ok && c.digest == s.Digest && s.Digest != "" {
			out[s.Name] = c
			continue
		}
		c := &compiledFlow{digest: s.Digest, rate: s.RateLimit, debounce: s.Debounce, batch: s.Batch}
		if s.Filter != "" {
			if c.filter, c.err = flow.Compile(s.Filter, flow.Filter); c.err != nil {
				c.err = fmt.Errorf("filter does not compile: %w", c.err)
			}
		}
		if rl := s.RateLimit; c.err == nil && rl != nil && rl.Key != "" {
			if c.key, c.err = flow.Compile(rl.Key, flow.Key); c.err != nil {
				c.err = fmt.Errorf("rate_limit.key does not compile: %w", c.err)
			}
		}
		if db := s.Debounce; c.err == nil && db != nil && db.Key != "" {
			if c.dkey, c.err = flow.Compile(db.Key, flow.Key); c.err != nil {
				c.err = fmt.Errorf("debounce.key does not compile: %w", c.err)
			}
		}
		if bt := s.Batch; c.err == nil && bt != nil && bt.Key != "" {
			if c.bkey, c.err = flow.Compile(bt.Key, flow.Key); c.err != nil {
				c.err = fmt.Errorf("batch.key does not compile: %w", c.err)
			}
		}
		if c.err == nil && s.QueuePriority != "" {
			if c.prio, c.err = flow.Compile(s.QueuePriority, flow.Priority); c.err != nil {
				c.err = fmt.Errorf("queue_priority does not compile: %w", c.err)
			}
		}
		for _, co := range s.CancelOn {
			if c.err != nil {
				break
			}
			rule := cancelRule{skill: s.Name, typ: co.Type, timeout: time.Duration(co.Timeout)}
			if co.Match != "" {
				if rule.match, c.err = flow.CompileMatch(co.Match); c.err != nil {
					c.err = fmt.Errorf("cancel_on match does not compile: %w", c.err)
				}
			}
			c.cancels = append(c.cancels, rule)
		}
		out[s.Name] = c
	}
	return out
}

// hasFlow is whether a skill has any flow control the router decides.
func hasFlow(s *skill.Skill) bool {
	return s.Filter != "" || s.RateLimit != nil || s.Debounce != nil || s.Batch != nil || len(s.CancelOn) > 0 || s.QueuePriority != ""
}

// flowVerdicts are what flow control said about one trigger, for the unmatched
// record when no skill is left.
type flowVerdicts struct {
	filtered, failed, limited, debounced, batched []string // "skill: why"
}

// event is the trigger as flow expressions read it, built on first use.
func (t *trigger) event() *flow.Event {
	if t.fev == nil {
		e := t.e
		t.fev = &flow.Event{ID: e.ID, Type: e.Type, Source: e.Source, Subject: e.Subject, Time: e.Time, Data: t.data, Ext: e.Ext}
	}
	return t.fev
}

// admit is selector.Env.Admit for one trigger: a skill whose filter is false, or
// fails, does not take it; nor does one over its rate limit (t.limited), or whose
// rate limit's key fails, or whose debounce folded the trigger (t.folds). A
// skill with a rate limit the trigger has not been counted against is taken and
// noted in t.uncounted, for Router.count; one with a debounce, in t.unfolded
// (see admitDebounce). Verdicts are kept on t. A skill taken with a
// queue_priority has it evaluated (prio.go).
func admit(t *trigger, flows map[string]*compiledFlow) func(*skill.Skill) (bool, string) {
	return func(s *skill.Skill) (ok bool, why string) {
		c := flows[s.Name]
		defer func() {
			if ok && c != nil && c.prio != nil {
				why = joinWhy(why, t.prioritize(s.Name, c.prio))
			}
		}()
		if c == nil || c.digest != s.Digest {
			if !hasFlow(s) {
				return true, ""
			}
			// A version flows does not hold (the catalog moved between a sync's
			// steps, or a skill built by hand): compile it now rather than take
			// the trigger unfiltered.
			c = compileFlows([]*skill.Skill{s}, nil)[s.Name]
		}
		if why, ok := t.limited[s.Name]; ok {
			t.verdicts.limited = append(t.verdicts.limited, s.Name+": "+why)
			return false, why
		}
		if c.err != nil {
			why := "filter error: " + c.err.Error()
			t.verdicts.failed = append(t.verdicts.failed, s.Name+": "+why)
			return false, why
		}
		why = ""
		if c.batch != nil && t.burstOf == s.Name {
			// A batch's run: each of its events passed the filter on its way in.
			if c.rate == nil {
				return true, "batch run"
			}
			return t.admitRate(s.Name, c, "batch run")
		}
		if c.filter != nil {
			ok, err := c.filter.Match(t.event())
			switch {
			case err != nil:
				why := fmt.Sprintf("filter error: %v (filter: %s)", err, c.filter)
				t.verdicts.failed = append(t.verdicts.failed, s.Name+": "+why)
				return false, why
			case !ok:
				why := "filter false: " + c.filter.String()
				t.verdicts.filtered = append(t.verdicts.filtered, s.Name+": "+why)
				return false, why
			}
			why = "filter true"
		}
		if c.debounce != nil || c.batch != nil {
			ok, w, decided := t.admitDebounce(s.Name, c, why)
			if decided {
				return ok, w
			}
			why = w
		}
		if c.rate == nil {
			return true, why
		}
		return t.admitRate(s.Name, c, why)
	}
}

// admitRate is admit's verdict on a skill with a rate limit whose filter, if
// any, took the trigger (why says so).
func (t *trigger) admitRate(name string, c *compiledFlow, why string) (bool, string) {
	if r, ok := t.rated[name]; ok {
		return true, joinWhy(why, r)
	}
	rc := rateCheck{rl: c.rate}
	if c.key != nil {
		k, err := c.key.KeyOf(t.event())
		if err != nil {
			w := fmt.Sprintf("rate_limit key error: %v (key: %s)", err, c.key)
			t.verdicts.failed = append(t.verdicts.failed, name+": "+w)
			return false, joinWhy(why, w)
		}
		rc.key = k
	}
	if t.uncounted == nil {
		t.uncounted = make(map[string]rateCheck, 1)
	}
	t.uncounted[name] = rc
	return true, joinWhy(why, "rate_limit "+c.rate.String())
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// unmatchedByFlow is the code and reason of a trigger no skill took because flow
// control refused every skill that would have: a filter or a key that failed
// first (it is the author's to fix), then a debounce that folded it, then a rate
// limit, then a filter that said no.
func (v *flowVerdicts) unmatchedByFlow() (code, reason string, ok bool) {
	switch {
	case len(v.failed) > 0:
		return events.UnmatchedFilterError, strings.Join(v.failed, "; "), true
	case len(v.debounced) > 0:
		return events.UnmatchedDebounced, strings.Join(v.debounced, "; "), true
	case len(v.batched) > 0:
		return events.UnmatchedBatched, strings.Join(v.batched, "; "), true
	case len(v.limited) > 0:
		return events.UnmatchedRateLimited, strings.Join(v.limited, "; "), true
	case len(v.filtered) > 0:
		return events.UnmatchedFiltered, strings.Join(v.filtered, "; "), true
	}
	return "", "", false
}

// Filters is selector.Env.Admit for a request decided offline (skillbus route
// --skills): each skill's filter over ev, with the router's verdicts. Rate limits
// are not counted; a rate limit's key is evaluated. A debounced or batched skill
// is shown folded wherever it stands, since the request is decided only once.
func Filters(skills []*skill.Skill, ev *flow.Event) func(*skill.Skill) (bool, string) {
	return NewAdmission(skills).Admit(ev)
}

// Admission is the flow control of a set of skills compiled once, as a router
// holds it between catalog changes, for deciding many requests offline (as
// Filters does for one): skillbus bench measures a filter's cost per trigger
// with it.
type Admission struct{ flows map[string]*compiledFlow }

// NewAdmission compiles the flow control of skills.
func NewAdmission(skills []*skill.Skill) *Admission {
	return &Admission{flows: compileFlows(skills, nil)}
}

// Admit is selector.Env.Admit for one request, as Filters.
func (a *Admission) Admit(ev *flow.Event) func(*skill.Skill) (bool, string) {
	return admit(&trigger{fev: ev, offline: true}, a.flows)
}
