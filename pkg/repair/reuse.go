package repair

import (
	"reflect"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Reusable returns the ids of the steps of the repaired version whose results from
// a run of the broken version still hold, so that an execution released on the
// repaired version resumes from them instead of starting over: the steps before the
// step that failed (failed; "" when the failure was in no step, such as an output)
// that are defined alike in both versions, up to the first step that differs. A
// step whose definition changed, and every step after it, runs again: a later step
// may read what the changed one returns.
//
// Steps are compared by everything that decides their result — id, tool or compute
// block, arguments, condition, loop, output name, error policy, timeout, group,
// dependencies, cache — but not by their description or line. Changed workflow
// inputs (types, defaults) may change what any step sees: nothing is reusable then,
// nor when either version has no workflow or the failed step is not one of the
// broken version's.
func Reusable(broken, repaired *skill.Skill, failed string) map[string]bool {
	if broken == nil || repaired == nil || broken.Workflow == nil || repaired.Workflow == nil {
		return nil
	}
	if !reflect.DeepEqual(broken.Workflow.Inputs, repaired.Workflow.Inputs) {
		return nil
	}
	old, now := broken.Workflow.Steps, repaired.Workflow.Steps
	limit := len(old)
	if failed != "" {
		limit = -1
		for i, st := range old {
			if st.ID == failed {
				limit = i
				break
			}
		}
		if limit < 0 {
			return nil
		}
	}
	out := map[string]bool{}
	for i := 0; i < limit && i < len(now); i++ {
		if !sameStep(old[i], now[i]) {
			break
		}
		out[now[i].ID] = true
	}
	return out
}

func sameStep(a, b skill.Step) bool {
	a.Description, b.Description = "", ""
	a.Line, b.Line = 0, 0
	a.ComputeLine, b.ComputeLine = 0, 0
	return reflect.DeepEqual(a, b)
}
