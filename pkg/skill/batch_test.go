package skill

import (
	"strings"
	"testing"
)

// A batched workflow declares the input a batch's run gives, {"events": [...]},
// as an array, and requires no other: otherwise every batch would fail.
func TestBatchWorkflowInputs(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n- id: a\n  tool: log\n  args: {message: hi}\n"
	tests := []struct {
		name, inputs string
		want         []string
	}{
		{"no inputs", "", nil},
		{"declared", "inputs:\n- name: events\n  type: array\n- name: depth\n  type: integer\n  default: 2\n", nil},
		{"any", "inputs:\n- name: \"*\"\n", nil},
		{"optional other", "inputs:\n- name: events\n  type: array\n- name: shop\n", nil},
		{"undeclared", "inputs:\n- name: shop\n  type: string\n", []string{
			`skills/x/skill.yaml:4:1: error: each batch's run has the data {"events": [...]}, an input the workflow does not declare; every batch would fail (hint: add an input events (type: array), or one named "*"`}},
		{"required other", "inputs:\n- {name: shop, type: string, required: true}\n", []string{
			"skills/x/skill.yaml:4:1: error: input shop is required, but a batch's run gives only events; every batch would fail",
			`skills/x/skill.yaml:4:1: error: each batch's run has the data {"events": [...]}`}},
		{"required other with events", "inputs:\n- name: events\n  type: array\n- {name: shop, required: true}\n", []string{
			"skills/x/skill.yaml:4:1: error: input shop is required, but a batch's run gives only events"}},
		{"untyped events", "inputs:\n- name: events\n", []string{
			"skills/x/skill.yaml:4:1: error: each batch's run gives input events as an array of events, but it is declared as string (the type of an input without type:)"}},
		{"object events", "inputs:\n- name: events\n  type: object\n", []string{
			"skills/x/skill.yaml:4:1: error: each batch's run gives input events as an array of events, but it is declared as object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\nbatch: {max_size: 5, timeout: 5s}\n"+tt.inputs+steps))
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("diagnostic %q, want it to start %q", got[i], tt.want[i])
				}
			}
		})
	}
}

// A debounced run has the last trigger's data, as any trigger's run: its inputs
// are not checked against a shape of their own.
func TestDebounceWorkflowInputsUnchecked(t *testing.T) {
	t.Parallel()
	_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\ndebounce: {period: 2s}\n"+
		"inputs:\n- {name: shop, type: string, required: true}\nsteps:\n- id: a\n  tool: log\n  args: {message: hi}\n"))
	if len(ds) != 0 {
		t.Fatalf("diagnostics %v", ds)
	}
}
