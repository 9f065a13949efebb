package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// A stop requested while a step runs lets that step finish and starts no other:
// the run ends at the step boundary with an error that wraps the stop's cause,
// and the log says why the rest did not run.
func TestStopEndsTheRunAtTheNextStep(t *testing.T) {
	t.Parallel()
	stop := &tool.Stop{}
	cause := errors.New("cancelled by ada")
	calls := map[string]int{}
	tools, err := tool.NewSet(
		tool.Func("first", func(context.Context, tool.Call) (any, error) {
			calls["first"]++
			stop.Request(cause)
			return "one", nil
		}),
		tool.Func("second", func(context.Context, tool.Call) (any, error) {
			calls["second"]++
			return "two", nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := workflow.New(workflow.Config{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	s := &skill.Skill{Name: "two", Description: "d", Kind: skill.KindWorkflow, Workflow: &skill.Workflow{Steps: []skill.Step{
		{ID: "a", Tool: "first"}, {ID: "b", Tool: "second", DependsOn: []string{"a"}},
	}}}
	_, l, err := eng.ExecuteLog(tool.WithStop(t.Context(), stop), workflow.Run{ExecutionID: "x", Skill: s})
	if !errors.Is(err, cause) {
		t.Fatalf("error %v, want one wrapping the stop's cause", err)
	}
	if calls["first"] != 1 || calls["second"] != 0 {
		t.Fatalf("calls %v: the running step finishes, the next does not start", calls)
	}
	if l.Steps[0].Status != workflow.StatusCompleted || l.Steps[1].Status != workflow.StatusNotRun || l.Steps[1].Reason != "the run was stopped: cancelled by ada" {
		t.Fatalf("log steps %+v", l.Steps)
	}
}
