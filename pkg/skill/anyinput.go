package skill

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AnyInput is the name of a workflow input that accepts every field the skill does not
// declare: `- name: "*"`. Without it, a skill that declares inputs rejects a trigger
// whose data has a field it does not declare, naming the field and the declared name
// it most resembles, so a typo in a publisher fails loudly instead of being ignored.
const AnyInput = "*"

// Closest returns the candidate most like s, or "" when none is close enough to be a
// plausible typo.
func Closest(s string, candidates []string) string { return closest(s, candidates) }

// RefusesFields says why a workflow that declares inputs would refuse data by its
// fields alone, as a run checks them first — a field it does not declare (without
// "*"), or a required input without a default that data lacks — or "" when it
// would not. A skill that is no workflow, or declares no inputs, refuses nothing.
// The sorted order of data's fields makes the answer the same each time.
func (s *Skill) RefusesFields(data map[string]any) string {
	if s.Workflow == nil || len(s.Workflow.Inputs) == 0 {
		return ""
	}
	var names []string
	anyInput := false
	for _, in := range s.Workflow.Inputs {
		names = append(names, in.Name)
		anyInput = anyInput || in.Name == AnyInput
	}
	if !anyInput {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if !slices.Contains(names, k) {
				return fmt.Sprintf("its inputs (%s) do not take the field %s", strings.Join(names, ", "), k)
			}
		}
	}
	for _, in := range s.Workflow.Inputs {
		if _, ok := data[in.Name]; !ok && in.Required && in.Default == nil && in.Name != AnyInput {
			return fmt.Sprintf("its required input %s is not in the data", in.Name)
		}
	}
	return ""
}
