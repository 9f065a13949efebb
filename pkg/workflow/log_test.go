package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func TestLog(t *testing.T) {
	t.Parallel()
	fail := tool.Func("fail", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("forbidden") })
	big := strings.Repeat("é", 300)
	for _, tt := range []struct {
		name   string
		skill  *skill.Skill
		inputs map[string]any
		status string
		head   string
		check  func(t *testing.T, l *workflow.Log)
	}{
		{
			name:   "completed, with a long result cut short",
			skill:  wf([]skill.Step{{ID: "a", Tool: "echo", Args: map[string]any{"s": big}}, {ID: "b", Tool: "noop", Loop: "{{ [1, 2, 3] }}", LoopVar: "i"}}),
			status: workflow.RunCompleted,
			head:   "t · execution ex · attempt 3 · completed · steps ",
			check: func(t *testing.T, l *workflow.Log) {
				if r := l.Steps[0].Result; len(r) > workflow.ExcerptBytes+len("…") || !strings.HasSuffix(r, "…") {
					t.Errorf("excerpt %q", r)
				}
				if l.Steps[1].Calls != 3 || l.Steps[0].Attempt != 3 {
					t.Errorf("steps %+v", l.Steps)
				}
			},
		},
		{
			name:   "failed at a step",
			skill:  wf([]skill.Step{{ID: "a", Tool: "fail"}, {ID: "b", Tool: "noop"}}),
			status: workflow.RunFailed,
			head:   "failed at step a (fatal): step a: forbidden",
			check: func(t *testing.T, l *workflow.Log) {
				if l.FailedStep != "a" || l.Class != failure.Fatal || l.Steps[1].Reason != "step a failed" {
					t.Errorf("%+v", l)
				}
			},
		},
		{
			name: "failed before any step",
			skill: func() *skill.Skill {
				s := wf([]skill.Step{{ID: "a", Tool: "noop"}})
				s.Workflow.Inputs = []skill.Input{{Name: "x", Required: true}}
				return s
			}(),
			status: workflow.RunFailed,
			head:   "failed (fatal): input x is required",
		},
		{
			name: "paused",
			skill: func() *skill.Skill {
				s := wf([]skill.Step{{ID: "a", Tool: "noop"}, {ID: "b", Tool: "noop"}})
				s.Workflow.Confirmations = []skill.Confirmation{{Step: "b", Message: "b?"}}
				return s
			}(),
			status: workflow.RunPaused,
			head:   "paused at b, waiting for a confirmation",
			check: func(t *testing.T, l *workflow.Log) {
				if l.Steps[1].Status != workflow.StatusWaiting || l.Steps[1].Reason != "waiting for confirmation: b?" {
					t.Errorf("%+v", l.Steps[1])
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, l, _ := newEngine(t, workflow.Config{}, fail).ExecuteLog(deadline(t), workflow.Run{ExecutionID: "ex", Skill: tt.skill, Inputs: tt.inputs, Attempt: 3})
			if l.Status != tt.status || l.Finished.Before(l.Started) {
				t.Errorf("status %s, want %s", l.Status, tt.status)
			}
			var buf bytes.Buffer
			if err := workflow.Format(&buf, l); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), tt.head) {
				t.Errorf("Format:\n%s\nwant it to contain %q", buf.String(), tt.head)
			}
			if tt.check != nil {
				tt.check(t, l)
			}
			// The log is stored as JSON.
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var back workflow.Log
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(l, &back); d != "" {
				t.Errorf("JSON round trip (-want +got)\n%s", d)
			}
		})
	}
}

// A run someone cancelled reads as cancelled, by whom and at which step, not as
// a fatal failure of that step.
func TestLogOfACancelledRun(t *testing.T) {
	t.Parallel()
	fail := tool.Func("fail", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("stopped") })
	_, l, _ := newEngine(t, workflow.Config{}, fail).ExecuteLog(deadline(t), workflow.Run{ExecutionID: "ex", Skill: wf([]skill.Step{{ID: "a", Tool: "fail"}, {ID: "b", Tool: "noop"}})})
	l.Cancel("cancelled by ada: wrong customer")
	var buf bytes.Buffer
	if err := workflow.Format(&buf, l); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(buf.String(), "\n")
	if !strings.Contains(head, "· cancelled by ada: wrong customer (at step a) · steps ") || strings.Contains(head, "failed") || strings.Contains(head, "fatal") {
		t.Errorf("head %q", head)
	}
	if l.Status != workflow.RunCancelled || l.Class != "" {
		t.Errorf("status %s, class %q", l.Status, l.Class)
	}
}

// A compute block's run-time error names the line of the skill's file it is on,
// so that an editor can jump there, besides its line in the block.
func TestComputeErrorNamesItsLineInTheFile(t *testing.T) {
	t.Parallel()
	src := "name: t\ndescription: d\nversion: 1.0.0\nsteps:\n  - id: a\n    compute: |\n      x = \"n\"\n      result = x + 1\n"
	s, ds := skill.ParseWorkflow("skills/t/skill.yaml", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	_, _, err := newEngine(t, workflow.Config{}).ExecuteLog(deadline(t), workflow.Run{ExecutionID: "ex", Skill: s})
	if err == nil || !strings.Contains(err.Error(), "skills/t/skill.yaml:8: compute:2:") {
		t.Errorf("error %v, want it placed at skills/t/skill.yaml:8", err)
	}
}
