package selector_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// workflow gives a skill a workflow with these inputs.
func workflow(ins ...skill.Input) func(*skill.Skill) {
	return func(s *skill.Skill) { s.Workflow = &skill.Workflow{Inputs: ins} }
}

// A skill that only the request's words recall, and whose inputs would refuse
// the request's data, joins no plan: its run would fail at once. One the request
// is for by type, or by name, keeps its place, and so does one whose inputs take
// the data.
func TestTextRequestSkipsASkillWhoseInputsRefuseItsData(t *testing.T) {
	t.Parallel()
	greet := sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name", Default: "world"}))
	text := selector.Request{Type: selector.RequestType, Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}
	d := decide(t, newSel(t, selector.Config{}, greet), text, selector.Env{})
	if d.Primary != "" || d.KeptOut() == nil || !strings.Contains(d.KeptOut().Reason, "its inputs (name) do not take the field query") {
		t.Fatalf("primary %q, kept out %+v", d.Primary, d.KeptOut())
	}

	for _, c := range []struct {
		what string
		s    *skill.Skill
		req  selector.Request
	}{
		{"declares query", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "query"})), text},
		{"declares *", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name"}, skill.Input{Name: skill.AnyInput})), text},
		{"declares no inputs", sk("greet", "Greets a person by name."), text},
		{"subscribed to the type", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name"}), func(s *skill.Skill) { s.Triggers = []string{"com.example.greet"} }),
			selector.Request{Type: "com.example.greet", Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}},
		{"named", greet, selector.Request{Skill: "greet", Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}},
		{"no data", greet, selector.Request{Text: "greet Ada"}},
	} {
		if d := decide(t, newSel(t, selector.Config{}, c.s), c.req, selector.Env{}); d.Primary != "greet" {
			t.Errorf("%s: primary %q, candidates %+v", c.what, d.Primary, d.Candidates)
		}
	}

	// A required input the data lacks refuses it too, where its score would not.
	need := sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "query"}, skill.Input{Name: "name", Required: true}),
		func(s *skill.Skill) { s.Triggers = []string{"greet ada"} }) // scores above the threshold all the same
	d = decide(t, newSel(t, selector.Config{}, need), text, selector.Env{})
	if d.Primary != "" || d.KeptOut() == nil || !strings.Contains(d.KeptOut().Reason, "its required input name is not in the data") {
		t.Errorf("primary %q, candidates %+v", d.Primary, d.Candidates)
	}
}
