package repair_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/repair"
)

const workflow = `name: issue-title
description: reads an issue's title
inputs:
  - name: repo
    type: string
    default: skillbus/skillbus
steps:
  - id: fetch
    tool: http
    args:
      url: "https://api.example.com/issue"
  - id: post
    tool: http
    args:
      url: "https://api.example.com/post"
      json:
        titel: "{{ steps.fetch.result.titel }}"
        body: "{{ steps.fetch.result.body | lowr }}"
outputs:
  - name: title
    value: "{{ steps.fetch.result.titel }}"
`

func propose(t *testing.T, r repair.Repairer, f failure.Fault, files repair.Files) (repair.Files, string) {
	t.Helper()
	diff, _, err := r.Propose(context.Background(), &repair.Diagnosis{Skill: "issue-title", Fault: f}, files)
	if err != nil {
		t.Fatalf("%s: %v", r.Name(), err)
	}
	out, _, err := repair.Apply(files, diff)
	if err != nil {
		t.Fatalf("%s: its own diff does not apply: %v\n%s", r.Name(), err, diff)
	}
	return out, diff
}

func TestReferenceRepairer(t *testing.T) {
	files := repair.Files{"skill.yaml": workflow}
	out, diff := propose(t, repair.ReferenceRepairer{}, failure.Fault{Kind: failure.FaultReference, Name: "titel", Have: []string{"body", "title"}, Value: "steps.fetch.result", Step: "post"}, files)
	if !strings.Contains(out["skill.yaml"], `titel: "{{ steps.fetch.result.title }}"`) {
		t.Fatalf("not fixed:\n%s", out["skill.yaml"])
	}
	// Only the failing step is touched: the output still reads titel (it fails on its own).
	if !strings.Contains(out["skill.yaml"], `value: "{{ steps.fetch.result.titel }}"`) {
		t.Fatalf("outside the step changed:\n%s", diff)
	}
	if strings.Count(diff, "\n-") != 1 || strings.Count(diff, "\n+") != 2 { // the +++ line and one change each way
		t.Fatalf("want a one-line diff:\n%s", diff)
	}
	// Not close enough: no proposal.
	_, _, err := repair.ReferenceRepairer{}.Propose(context.Background(), &repair.Diagnosis{Fault: failure.Fault{Kind: failure.FaultReference, Name: "headline", Have: []string{"body", "title"}}}, files)
	if !errors.Is(err, repair.ErrNoProposal) {
		t.Fatalf("err %v, want ErrNoProposal", err)
	}
}

func TestFilterRepairer(t *testing.T) {
	out, _ := propose(t, repair.FilterRepairer{}, failure.Fault{Kind: failure.FaultUnknownFilter, Name: "lowr", Have: []string{"default", "lower", "upper"}, Step: "post"}, repair.Files{"skill.yaml": workflow})
	if !strings.Contains(out["skill.yaml"], "| lower }}") {
		t.Fatalf("not fixed:\n%s", out["skill.yaml"])
	}
}

func TestPathRepairer(t *testing.T) {
	files := repair.Files{
		"SKILL.md":            "---\nname: s\ndescription: d\nentrypoints:\n  - name: default\n    command: [sh, scripts/run.sh, references/gide.md]\n---\nbody\n",
		"scripts/run.sh":      "cat \"$1\"\n",
		"references/guide.md": "hi\n",
	}
	out, _ := propose(t, repair.PathRepairer{}, failure.Fault{Kind: failure.FaultPath, Name: "references/gide.md"}, files)
	if !strings.Contains(out["SKILL.md"], "references/guide.md]") {
		t.Fatalf("not fixed:\n%s", out["SKILL.md"])
	}
	out, _ = propose(t, repair.PathRepairer{}, failure.Fault{Kind: failure.FaultPath, Name: "guide.md"}, repair.Files{"SKILL.md": "see guide.md\n", "references/guide.md": "x"})
	if out["SKILL.md"] != "see references/guide.md\n" {
		t.Fatalf("moved file not found: %q", out["SKILL.md"])
	}
}

func TestParameterRepairer(t *testing.T) {
	files := repair.Files{"skill.yaml": workflow}
	out, _ := propose(t, repair.ParameterRepairer{}, failure.Fault{Kind: failure.FaultParameter, Name: "title", Have: []string{"body", "titel"}, Step: "post"}, files)
	if !strings.Contains(out["skill.yaml"], `        title: "{{ steps.fetch.result.titel }}"`) {
		t.Fatalf("argument not renamed:\n%s", out["skill.yaml"])
	}
	out, _ = propose(t, repair.ParameterRepairer{}, failure.Fault{Kind: failure.FaultParameter, Name: "repo", Have: []string{"body", "titel"}, Step: "post"}, files)
	if !strings.Contains(out["skill.yaml"], "        repo: \"{{ inputs.repo }}\"\n") {
		t.Fatalf("defaulted input not passed:\n%s", out["skill.yaml"])
	}
	_, _, err := repair.ParameterRepairer{}.Propose(context.Background(), &repair.Diagnosis{Fault: failure.Fault{Kind: failure.FaultParameter, Name: "owner", Have: []string{"body"}, Step: "post"}}, files)
	if !errors.Is(err, repair.ErrNoProposal) {
		t.Fatalf("err %v, want ErrNoProposal", err)
	}
}
