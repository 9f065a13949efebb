package skill_test

import (
	"fmt"

	"github.com/skillbus/skillbus/pkg/skill"
)

func ExampleParseSkillMD() {
	s, ds := skill.ParseSkillMD("skills/hello/SKILL.md", []byte(`---
name: hello
description: Greets people by name.
triggers: [io.skillbus.greet]
---
Greet the person named in the event warmly, by name, in one sentence.
`))
	fmt.Println(s.Name, s.Kind, s.Triggers, s.Retries(), s.ExecTimeout(), len(ds))
	// Output: hello instruction [io.skillbus.greet] 3 30s 0
}

func ExampleParseSkillMD_diagnostics() {
	_, ds := skill.ParseSkillMD("skills/hello/SKILL.md", []byte(`---
name: Hello World
description: Greets people by name.
trigers: [io.skillbus.greet]
max_retries: "three"
---
Greet the person named in the event warmly, by name, in one sentence.
`))
	for _, d := range ds {
		fmt.Println(d)
	}
	fmt.Println(ds.HasErrors())
	// Output:
	// skills/hello/SKILL.md:2:7: error: name "Hello World" has uppercase letters (hint: write hello-world)
	// skills/hello/SKILL.md:4:1: warning: unknown field trigers in front matter; it is ignored (hint: did you mean triggers? As written, the skill has no triggers)
	// skills/hello/SKILL.md:5:14: error: max_retries must be an integer, not the string "three" (hint: write a whole number, e.g. 3)
	// true
}

func ExampleParseWorkflow() {
	s, ds := skill.ParseWorkflow("skills/branch/skill.yaml", []byte(`name: branch
description: Creates a branch for an issue.
inputs:
  - name: issue_key
    required: true
steps:
  - id: get_issue
    tool: jira_view_issue
    args: {issue_key: "{{ inputs.issue_key }}"}
  - id: create_branch
    tool: git_create_branch
    args: {branch: "{{ get_isue.branch }}"}
`))
	fmt.Println(s == nil)
	fmt.Println(ds)
	// Output:
	// true
	// skills/branch/skill.yaml:12:24: error: unknown step or name get_isue; did you mean get_issue? (hint: names available here: inputs, trigger, execution, get_issue)
}
