package workflow

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
)

// A compiled workflow knows whether any expression reads `trigger` or `execution`,
// so that a run of one that reads neither builds neither.
func TestCompiledKnowsWhatItsExpressionsRead(t *testing.T) {
	t.Parallel()
	echo := func(args map[string]any) skill.Step { return skill.Step{ID: "s", Tool: "echo", Args: args} }
	for name, tc := range map[string]struct {
		wf                 skill.Workflow
		trigger, execution bool
	}{
		"neither": {wf: skill.Workflow{Steps: []skill.Step{echo(map[string]any{"x": "{{ inputs.x }}"})},
			Outputs: []skill.Output{{Name: "o", Value: "{{ s.x }}"}}}},
		"args":      {wf: skill.Workflow{Steps: []skill.Step{echo(map[string]any{"x": "{{ trigger.id }}"})}}, trigger: true},
		"condition": {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Tool: "noop", Condition: "execution.attempt > 1"}}}, execution: true},
		"loop":      {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Tool: "noop", Loop: "{{ trigger.items }}"}}}, trigger: true},
		"output": {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Tool: "noop"}},
			Outputs: []skill.Output{{Name: "o", Value: "{{ execution.id }}"}}}, execution: true},
		"confirmation": {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Tool: "noop"}},
			Confirmations: []skill.Confirmation{{Step: "s", Message: "run for {{ trigger.source }}?"}}}, trigger: true},
		"compute":         {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Compute: "result = inputs"}}}},
		"compute reads":   {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Compute: "result = trigger['id']"}}}, trigger: true},
		"compute assigns": {wf: skill.Workflow{Steps: []skill.Step{{ID: "s", Compute: "execution = 1\nresult = execution"}}}, execution: true},
	} {
		c, err := compile(&tc.wf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.readsTrigger != tc.trigger || c.readsExecution != tc.execution {
			t.Errorf("%s: reads trigger %v, execution %v; want %v, %v", name, c.readsTrigger, c.readsExecution, tc.trigger, tc.execution)
		}
	}
}
