package repair_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/repair"
)

// What a patch changes besides the workflow's inputs, steps and outputs is named:
// an automatic repair may not apply it by itself.
func TestGuarded(t *testing.T) {
	const workflow = `name: issue-title
description: reads an issue's title
inputs:
  - name: repo
    default: skillbus/skillbus
steps:
  - id: fetch
    tool: http
    args:
      url: "https://api.example.com/issue"
  - id: post
    tool: echo
    args:
      text: "{{ fetch.titel }}"
      body: "{{ fetch.body }}"
outputs:
  title: "{{ fetch.titel }}"
`
	before := repair.Files{"skill.yaml": workflow}
	edit := func(old, new string) repair.Files {
		if !strings.Contains(workflow, old) {
			t.Fatalf("%q is not in the workflow", old)
		}
		return repair.Files{"skill.yaml": strings.Replace(workflow, old, new, 1)}
	}
	const top = "description: reads an issue's title\n"
	for _, tc := range []struct {
		name  string
		after repair.Files
		want  []string
	}{
		{"a step's template", edit("text: \"{{ fetch.titel }}\"", "text: \"{{ fetch.title }}\""), nil},
		{"an input's default", edit("default: skillbus/skillbus", "default: skillbus/other"), nil},
		{"an output", edit("title: \"{{ fetch.titel }}\"", "title: \"{{ fetch.title }}\""), nil},
		{"a step's argument name", edit("body: \"{{ fetch.body }}\"", "content: \"{{ fetch.body }}\""), nil},
		// Which steps run is not: a confirmed step conditioned out and an
		// unconfirmed one added to do its work would get round the confirmation.
		{"a condition", edit("  - id: post\n    tool: echo\n", "  - id: post\n    tool: echo\n    condition: \"1 == 2\"\n"), []string{repair.StepsShape}},
		{"a new step", edit("outputs:\n", "  - id: post_now\n    tool: echo\n    args:\n      text: hi\noutputs:\n"), []string{repair.StepsShape}},
		{"a step's tool", edit("    tool: echo\n", "    tool: notify\n"), []string{repair.StepsShape}},
		{"network", edit(top, top+"permissions:\n  network:\n    outbound: true\n"), []string{"permissions"}},
		{"environment", edit(top, top+"permissions:\n  environment:\n    allow: [GITHUB_TOKEN]\n"), []string{"permissions"}},
		{"allowed tools", edit(top, top+"allowed-tools: [http, exec]\n"), []string{"allowed_tools"}},
		{"repair mode", edit(top, top+"repair: auto\n"), []string{"repair"}},
		{"approval", edit(top, top+"execution:\n  approval: ask\n"), []string{"execution"}},
		{"confirmation", edit(top, top+"confirmations:\n  - step: post\n    message: post it?\n"), []string{"workflow.confirmations"}},
		{"triggers", edit(top, top+"triggers: [com.example.any]\n"), []string{"triggers"}},
		{"does not load", edit(top, top+"steps: 3\n"), []string{"the skill's definition (it does not load)"}},
	} {
		if got := repair.Guarded("issue-title", before, tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// With confirmations, a step's arguments are a person's too: an unconfirmed
	// step's made to do the confirmed step's work would get round the confirmation.
	confirmed := strings.Replace(workflow, "outputs:\n", "confirmations:\n  - step: post\n    message: post it?\noutputs:\n", 1)
	cbefore := repair.Files{"skill.yaml": confirmed}
	cafter := repair.Files{"skill.yaml": strings.Replace(confirmed, `url: "https://api.example.com/issue"`, `url: "https://api.example.com/post"`, 1)}
	if got := repair.Guarded("issue-title", cbefore, cafter); !slices.Equal(got, []string{repair.StepsShape}) {
		t.Errorf("an argument of a workflow with confirmations: %v", got)
	}
	// A subagent's file, and a script (whatever it does is bounded by the permissions).
	files := repair.Files{"skill.yaml": workflow, "subagents/helper.md": "---\nname: helper\n---\nhelps\n", "scripts/run.sh": "echo hi\n"}
	after := files.Clone()
	after["subagents/helper.md"] = "---\nname: helper\nallowed-tools: [exec]\n---\nhelps\n"
	after["scripts/run.sh"] = "echo hello\n"
	if got := repair.Guarded("issue-title", files, after); !slices.Equal(got, []string{"subagent subagents/helper.md"}) {
		t.Errorf("subagent and script: %v", got)
	}
}
