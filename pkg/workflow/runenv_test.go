package workflow_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// A run's `trigger` and `execution` are there for every expression that reads them
// — arguments, conditions, outputs, compute blocks — whether the run names its
// trigger as a map or as a TriggerRef.
func TestTriggerAndExecutionAreSeenWhereverRead(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, workflow.Config{})
	ref := workflow.TriggerRef{ID: "t-1", Source: "/src", Type: "com.example.x", Subject: "skillbus.trigger.com.example.x"}
	cases := map[string]struct {
		wf   skill.Workflow
		want map[string]any
	}{
		"args": {wf: skill.Workflow{
			Steps:   []skill.Step{{ID: "s", Tool: "echo", Args: map[string]any{"id": "{{ trigger.id }}", "n": "{{ execution.attempt }}"}}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ s.id }}/{{ s.n }}"}},
		}, want: map[string]any{"o": "t-1/2"}},
		"condition": {wf: skill.Workflow{
			Steps:   []skill.Step{{ID: "s", Tool: "echo", Condition: "trigger.type == 'com.example.x'", Args: map[string]any{"x": "y"}}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ s.x }}"}},
		}, want: map[string]any{"o": "y"}},
		"output only": {wf: skill.Workflow{
			Steps:   []skill.Step{{ID: "s", Tool: "noop"}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ execution.skill }} {{ trigger.source }}"}},
		}, want: map[string]any{"o": "env /src"}},
		"compute": {wf: skill.Workflow{
			Steps:   []skill.Step{{ID: "s", Compute: "result = trigger['subject'] + ' ' + execution['id']"}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ s }}"}},
		}, want: map[string]any{"o": "skillbus.trigger.com.example.x e-1"}},
		"neither": {wf: skill.Workflow{
			Steps:   []skill.Step{{ID: "s", Tool: "echo", Args: map[string]any{"x": "{{ inputs.x }}"}}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ s.x }}"}},
		}, want: map[string]any{"o": "in"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wf := tc.wf
			wf.Inputs = []skill.Input{{Name: "x", Type: "string"}}
			s := &skill.Skill{Name: "env", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: strings.Repeat(digestFor(name), 1), Workflow: &wf}
			for _, r := range []workflow.Run{
				{ExecutionID: "e-1", Skill: s, Attempt: 2, Inputs: map[string]any{"x": "in"}, TriggerRef: ref},
				{ExecutionID: "e-1", Skill: s, Attempt: 2, Inputs: map[string]any{"x": "in"}, Trigger: map[string]any{
					"id": ref.ID, "source": ref.Source, "type": ref.Type, "subject": ref.Subject}},
			} {
				out, err := eng.Execute(deadline(t), r)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, out); d != "" {
					t.Fatalf("outputs (-want +got)\n%s", d)
				}
			}
		})
	}
}

// digestFor is a 64-character digest that differs by case name, so that each case
// compiles its own workflow.
func digestFor(name string) string {
	d := []byte(strings.Repeat("0", 64))
	copy(d, strings.ReplaceAll(name, " ", "-"))
	return string(d)
}

// A compute block that reads `trigger` before assigning it is told that its
// variable hides the workflow's trigger: the run built `trigger` because the block
// names it, though no expression reads the workflow's.
func TestComputeHidingTriggerIsExplained(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, workflow.Config{})
	s := &skill.Skill{Name: "hide", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: digestFor("hide"), Workflow: &skill.Workflow{
		Steps: []skill.Step{{ID: "s", Compute: "def f():\n    return trigger\nresult = f()\ntrigger = 1"}},
	}}
	_, err := eng.Execute(deadline(t), workflow.Run{ExecutionID: "e", Skill: s, Attempt: 1, TriggerRef: workflow.TriggerRef{ID: "t"}})
	if err == nil || !strings.Contains(err.Error(), "hiding the workflow's trigger") {
		t.Fatalf("err = %v, want the hint that the block's trigger hides the workflow's", err)
	}
}
