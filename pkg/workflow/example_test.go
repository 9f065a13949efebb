package workflow_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func Example() {
	upper := tool.Func("upper", func(_ context.Context, c tool.Call) (any, error) {
		return strings.ToUpper(c.Args["text"].(string)), nil
	})
	tools, _ := tool.NewSet(upper)
	eng, _ := workflow.New(workflow.Config{Tools: tools})

	s := &skill.Skill{Name: "greet", Kind: skill.KindWorkflow, Workflow: &skill.Workflow{
		Inputs: []skill.Input{{Name: "name", Type: "string", Required: true}},
		Steps: []skill.Step{
			// a and b run together; join waits for both.
			{ID: "a", Tool: "upper", Args: map[string]any{"text": "hello"}, ParallelGroup: "1"},
			{ID: "b", Tool: "upper", Args: map[string]any{"text": "{{ inputs.name }}"}, ParallelGroup: "1"},
			{ID: "join", Compute: "result = a + ', ' + b + '!'"},
		},
		Outputs: []skill.Output{{Name: "greeting", Value: "{{ join }}"}},
	}}
	out, err := eng.Execute(context.Background(), workflow.Run{ExecutionID: "ex1", Skill: s, Inputs: map[string]any{"name": "Ada"}})
	fmt.Println(out["greeting"], err)
	// Output: HELLO, ADA! <nil>
}

func ExampleFormat() {
	l := &workflow.Log{
		ExecutionID: "7f3a", Skill: "start_work", Version: "1.0", Attempt: 2, Status: workflow.RunCompleted, DurationMS: 12.5,
		Steps: []workflow.StepLog{
			{ID: "get_issue", Kind: "tool", Tool: "jira_view_issue", Status: workflow.StatusCompleted, DurationMS: 1.2, Resumed: true, Attempt: 1, Result: `{"key":"AAP-1"}`},
			{ID: "create_branch", Kind: "tool", Tool: "git_create_branch", Status: workflow.StatusContinued, DurationMS: 0.4, Class: "retryable", Error: "❌ no route to host"},
			{ID: "fix_vpn", Kind: "tool", Tool: "vpn_connect", Status: workflow.StatusCompleted, DurationMS: 0.3, HealOf: "create_branch", FailureType: "needs_vpn"},
			{ID: "fix_auth", Kind: "tool", Tool: "kube_login", Status: workflow.StatusSkipped, Reason: "condition is false: failure_info.get('needs_auth')"},
		},
	}
	_ = workflow.Format(os.Stdout, l)
	// Output:
	// start_work 1.0 · execution 7f3a · attempt 2 · completed · steps 12.5ms
	//   get_issue      tool jira_view_issue    completed  1.2ms  resumed from attempt 1 · → {"key":"AAP-1"}
	//   create_branch  tool git_create_branch  continued  400µs  retryable: ❌ no route to host
	//   fix_vpn        tool vpn_connect        completed  300µs  auto-heal of create_branch (needs_vpn)
	//   fix_auth       tool kube_login         skipped           condition is false: failure_info.get('needs_auth')
}
