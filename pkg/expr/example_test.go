package expr_test

import (
	"context"
	"fmt"

	"github.com/skillbus/skillbus/pkg/expr"
)

// The start_work skill of seed 004: a compute block builds the branch name, a
// condition decides whether to create it, templates fill in the tool's args.
func Example() {
	ctx := context.Background()
	env := expr.Env{
		"inputs":     map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"},
		"issue_data": map[string]any{"summary": "Add billing/export", "type": "Story"},
	}

	build, err := expr.ParseProgram(`
summary = issue_data.get("summary", "work")[:40]
slug = summary.lower().replace(" ", "-").replace("/", "-")
result = f"{inputs.branch_prefix}/{inputs.issue_key}-{slug}"
`)
	if err != nil {
		panic(err)
	}
	env["branch_name"], _ = build.Run(ctx, env)

	cond, _ := expr.ParseExpr("not check_existing_branch or '✅' not in str(check_existing_branch)")
	fmt.Println(cond.EvalBool(ctx, env)) // check_existing_branch was skipped: it is None

	args, _ := expr.CompileValue(map[string]any{
		"branch":      "{{ branch_name }}",
		"from_branch": "main",
		"labels":      "{{ [issue_data.type | lower] }}",
		"title":       "{{ inputs.issue_key }}: {{ issue_data.summary | truncate(12) }}",
	}, expr.WithName("steps.create_branch.args"))
	fmt.Println(args.Eval(ctx, env))
	// Output:
	// true <nil>
	// map[branch:feature/AAP-12345-add-billing-export from_branch:main labels:[story] title:AAP-12345: Add...] <nil>
}

// A template that is a single expression keeps the expression's type; any other
// template is a string.
func ExampleTemplate_Eval() {
	env := expr.Env{"pods": []any{map[string]any{"name": "web-1"}, map[string]any{"name": "web-2"}}}
	for _, src := range []string{
		"{{ pods | map(attribute='name') | list }}",
		"Restarting {{ pods | length }} pods: {{ pods | map(attribute='name') | join(', ') }}",
		"{{ pods | length }}",
	} {
		t, _ := expr.ParseTemplate(src)
		v, _ := t.Eval(context.Background(), env)
		fmt.Printf("%#v\n", v)
	}
	// Output:
	// []interface {}{"web-1", "web-2"}
	// "Restarting 2 pods: web-1, web-2"
	// 2
}

// Errors say where the problem is in what the skill's author wrote.
func ExampleParseTemplate_error() {
	env := expr.Env{"inputs": map[string]any{"issue_key": "AAP-1", "branch_prefix": "fix"}}
	t, _ := expr.ParseTemplate("{{ inputs.isue_key }}", expr.WithName("args.issue_key"))
	_, err := t.Eval(context.Background(), env)
	fmt.Println(err)
	// Output:
	// args.issue_key:1:11: inputs has no key "isue_key" (did you mean "issue_key"?); its keys are: branch_prefix, issue_key
	// 	{{ inputs.isue_key }}
	// 	          ^
}
