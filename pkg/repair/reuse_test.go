package repair_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/skill"
)

const threeSteps = `name: three
description: three steps
inputs:
  - name: who
    type: string
    default: ada
steps:
  - id: fetch
    tool: count
    args:
      who: "{{ inputs.who }}"
  - id: shape
    compute: |
      result = {"title": fetch.text}
  - id: post
    tool: echo
    args:
      text: "{{ shape.titel }}"
outputs:
  posted: "{{ post.text }}"
`

func parse(t *testing.T, text string) *skill.Skill {
	t.Helper()
	s, diags := skill.ParseWorkflow("skill.yaml", []byte(text))
	if s == nil || diags.HasErrors() {
		t.Fatalf("parse: %v", diags)
	}
	return s
}

func TestReusable(t *testing.T) {
	broken := parse(t, threeSteps)
	tests := []struct {
		name     string
		repaired string
		failed   string
		want     []string
	}{
		{"the failing step fixed", strings.Replace(threeSteps, "shape.titel", "shape.title", 1), "post", []string{"fetch", "shape"}},
		{"a comment and a blank line move every step down", strings.Replace(strings.Replace(threeSteps, "shape.titel", "shape.title", 1), "steps:\n", "# fixed\n\nsteps:\n", 1), "post", []string{"fetch", "shape"}},
		{"the first step changed", strings.Replace(threeSteps, `who: "{{ inputs.who }}"`, `who: "{{ inputs.who | lower }}"`, 1), "post", nil},
		{"the middle step changed", strings.Replace(threeSteps, `{"title": fetch.text}`, `{"title": fetch.text, "n": 1}`, 1), "post", []string{"fetch"}},
		{"an input default changed", strings.Replace(threeSteps, "default: ada", "default: bob", 1), "post", nil},
		{"the failure was in no step", strings.Replace(threeSteps, "post.text", "post.txt", 1), "", []string{"fetch", "post", "shape"}},
		{"a failed step the broken version does not have", threeSteps, "nope", nil},
		{"nothing before the failing step", threeSteps, "fetch", nil},
		{"a step inserted before the failing one", strings.Replace(threeSteps, "  - id: shape\n", "  - id: extra\n    compute: |\n      result = 1\n  - id: shape\n", 1), "post", []string{"fetch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := repair.Reusable(broken, parse(t, tt.repaired), tt.failed)
			var ids []string
			for id := range got {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Fatalf("reusable steps (-want +got):\n%s", diff)
			}
		})
	}
	if got := repair.Reusable(broken, &skill.Skill{Name: "three"}, "post"); len(got) != 0 {
		t.Fatalf("a version without a workflow: %v", got)
	}
}
