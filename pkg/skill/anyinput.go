package skill

import (
	"fmt"
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
// "*"), or a required input without a default that data lacks or holds as null —
// or "" when it would not. A skill that is no workflow, or declares no inputs,
// refuses nothing. Types, enums, patterns and lengths are not looked at. A batch
// skill's run gets {"events": [...]}, not the trigger's data: that is what is
// checked for it. The field named is the first undeclared one in sorted order,
// so the answer is the same each time; data that is taken costs no allocation.
func (s *Skill) RefusesFields(data map[string]any) string {
	if s.Workflow == nil || len(s.Workflow.Inputs) == 0 {
		return ""
	}
	if s.Batch != nil {
		data = batchShape
	}
	ins := s.Workflow.Inputs
	declared := func(k string) bool {
		for i := range ins {
			if ins[i].Name == k || ins[i].Name == AnyInput {
				return true
			}
		}
		return false
	}
	first := ""
	for k := range data {
		if !declared(k) && (first == "" || k < first) {
			first = k
		}
	}
	if first != "" {
		names := make([]string, len(ins))
		for i := range ins {
			names[i] = ins[i].Name
		}
		return fmt.Sprintf("its inputs (%s) do not take the field %s", strings.Join(names, ", "), first)
	}
	for i := range ins {
		in := &ins[i]
		if v, ok := data[in.Name]; (!ok || v == nil) && in.Required && in.Default == nil && in.Name != AnyInput {
			return fmt.Sprintf("its required input %s is not in the data", in.Name)
		}
	}
	return ""
}

// batchShape is the fields of a batch run's inputs.
var batchShape = map[string]any{"events": []any{}}
