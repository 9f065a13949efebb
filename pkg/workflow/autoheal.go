package workflow

import (
	"github.com/skillbus/skillbus/pkg/expr"
)

// AutoHeal reports that a step of the auto-heal pattern is about to run: a
// step failed and on_error: continue let the run go on, a later step detected what
// went wrong, and a healing tool runs before the failed call is retried.
//
// The rule (see doc.go, "Auto-heal"): a tool step whose condition is true, and whose
// condition reads a step that failed with on_error: continue — directly or through
// the result of compute steps that read it — heals that failed step, unless it calls
// the same tool as the failed step: then it is the retry (StepLog.RetryOf), not a
// heal.
type AutoHeal struct {
	// Step is the failed step being healed (create_branch).
	Step string `json:"step_id"`
	// HealStep is the healing step (fix_vpn) and Action its tool (vpn_connect).
	HealStep string `json:"heal_step"`
	Action   string `json:"action"`
	// FailureType is what was detected: the first key that the healing step's
	// condition reads from a detecting step's result (failure_info.get('needs_vpn'),
	// failure_info['needs_vpn'] or failure_info.needs_vpn) whose value is true —
	// needs_vpn. When there is none, it is the failed step's failure class
	// (retryable, fatal, repairable).
	FailureType string `json:"failure_type"`
	// Error is the failed step's error.
	Error string `json:"error"`
}

// healFor applies the auto-heal rule to step i, about to start with env. It returns
// the heal to report, or the failed step it retries, or neither.
func (x *execution) healFor(i int, env expr.Env) (heal *AutoHeal, retryOf string) {
	cs := &x.c.steps[i]
	if cs.kind != "tool" || cs.condition == nil {
		return nil, ""
	}
	failed := -1
	for _, k := range cs.condRefs {
		for _, f := range x.state[k].taint {
			if failed < 0 || f < failed {
				failed = f
			}
		}
	}
	if failed < 0 {
		return nil, ""
	}
	fs := &x.c.steps[failed]
	if fs.step.Tool == cs.step.Tool {
		return nil, fs.step.ID
	}
	h := &AutoHeal{Step: fs.step.ID, HealStep: cs.step.ID, Action: cs.step.Tool, Error: x.state[failed].errText}
	for _, kr := range cs.keys {
		m, ok := env[kr.name].(map[string]any)
		if !ok || !x.tainted(kr.name, cs) {
			continue
		}
		if v, ok := m[kr.key]; ok && expr.Truthy(v) {
			h.FailureType = kr.key
			break
		}
	}
	if h.FailureType == "" {
		h.FailureType = string(x.state[failed].class)
	}
	return h, ""
}

// tainted reports whether the name, as step cs reads it, is bound by a step tainted
// by a failure.
func (x *execution) tainted(name string, cs *cstep) bool {
	for _, k := range cs.condRefs {
		st := x.c.steps[k].step
		if (st.ID == name || st.Output == name) && len(x.state[k].taint) > 0 {
			return true
		}
	}
	return false
}
