package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func confirmSkill() *skill.Skill {
	s := wf([]skill.Step{
		{ID: "name", Compute: "result = 'feature/' + inputs.key", Output: "branch_name"},
		{ID: "create", Tool: "count", Args: map[string]any{"branch": "{{ branch_name }}"}},
		{ID: "after", Compute: "result = 'created: ' + str(create)"},
		{ID: "side", Tool: "count", DependsOn: []string{"name"}},
	})
	s.Workflow.Confirmations = []skill.Confirmation{{Step: "create", Message: "Create branch {{ branch_name }}?", Default: true, Timeout: skill.Duration(5 * time.Minute)}}
	return s
}

// A confirmation does not hold a worker: the run stops at the step with a
// PausedError, everything that could run has run and is saved, and a later run with
// the answer resumes.
func TestConfirmationPausesAndResumes(t *testing.T) {
	t.Parallel()
	var cnt counter
	store := &workflow.MemStore{}
	e := newEngine(t, workflow.Config{Checkpoints: store}, cnt.tool("count"))
	run := workflow.Run{ExecutionID: "ex", Skill: confirmSkill(), Inputs: map[string]any{"key": "A-1"}, Attempt: 1}

	j := &journal{}
	run.Observer = j
	_, l, err := e.ExecuteLog(deadline(t), run)
	var p *workflow.PausedError
	if !errors.As(err, &p) {
		t.Fatalf("err = %v, want a PausedError", err)
	}
	want := workflow.PausedError{Step: "create", Message: "Create branch feature/A-1?", Default: true, Timeout: 5 * time.Minute}
	if d := cmp.Diff(want, *p); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if cnt.n("create") != 0 || cnt.n("side") != 1 || j.of("create") != nil || j.of("after") != nil {
		t.Errorf("calls %v, events %v", cnt.calls, j.lines)
	}
	if l.Status != workflow.RunPaused || l.Waiting != "create" || l.Steps[1].Status != workflow.StatusWaiting ||
		l.Steps[2].Reason != "step create waits for a confirmation" {
		t.Errorf("log %+v", l)
	}
	saved, _ := store.Load(context.Background(), "ex")
	if d := cmp.Diff([]string{"name", "side"}, keys(saved)); d != "" {
		t.Errorf("checkpoints (-want +got)\n%s", d)
	}

	// Asking again without an answer asks the same question and runs nothing.
	if _, err := e.Execute(deadline(t), run); !errors.As(err, &p) || p.Step != "create" || cnt.n("side") != 1 {
		t.Fatalf("second pause: %v, calls %v", err, cnt.calls)
	}

	j = &journal{}
	run.Attempt, run.Observer = 2, j
	run.Confirmations = map[string]workflow.Answer{"create": {Approved: true, By: "alice"}}
	out, err := e.Execute(deadline(t), run)
	if err != nil {
		t.Fatal(err)
	}
	if out["after"] != `created: {"branch": "feature/A-1"}` || cnt.n("create") != 1 || cnt.n("side") != 1 {
		t.Errorf("out %v calls %v", out, cnt.calls)
	}
	wantLines := []string{"resumed name completed", "resumed side completed", "start create tool", "done create", "start after compute", "done after"}
	if d := cmp.Diff(wantLines, j.lines); d != "" {
		t.Errorf("events (-want +got)\n%s", d)
	}
}

// A denied step is skipped, like a step whose condition is false: what comes after
// runs and sees None.
func TestConfirmationDenied(t *testing.T) {
	t.Parallel()
	var cnt counter
	j := &journal{}
	out, err := newEngine(t, workflow.Config{}, cnt.tool("count")).Execute(deadline(t), workflow.Run{
		Skill: confirmSkill(), Inputs: map[string]any{"key": "A-1"}, Observer: j,
		Confirmations: map[string]workflow.Answer{"create": {Approved: false, By: "bob", Reason: "not today"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out["after"] != "created: None" || cnt.n("create") != 0 {
		t.Errorf("out %v calls %v", out, cnt.calls)
	}
	if j.index("skip create: denied by bob: not today") < 0 {
		t.Errorf("events %v", j.lines)
	}
}

// execution.approval: ask confirms the whole skill before anything runs.
func TestSkillApproval(t *testing.T) {
	t.Parallel()
	var cnt counter
	e := newEngine(t, workflow.Config{}, cnt.tool("count"))
	s := wf([]skill.Step{{ID: "a", Tool: "count"}})
	s.Description = "does a"
	s.Execution.Approval = skill.ApprovalAsk

	_, err := e.Execute(deadline(t), workflow.Run{Skill: s})
	var p *workflow.PausedError
	if !errors.As(err, &p) || p.Step != workflow.SkillApproval || p.Message != "Run skill t (does a)?" || cnt.n("a") != 0 {
		t.Fatalf("err = %v", err)
	}
	_, err = e.Execute(deadline(t), workflow.Run{Skill: s, Confirmations: map[string]workflow.Answer{"*": {By: "timeout"}}})
	if !errors.Is(err, workflow.ErrDenied) || failure.ClassOf(err) != failure.Fatal || err.Error() != "skill t was denied by timeout" {
		t.Fatalf("denied: %v", err)
	}
	out, err := e.Execute(deadline(t), workflow.Run{Skill: s, Confirmations: map[string]workflow.Answer{"*": {Approved: true}}})
	if err != nil || cnt.n("a") != 1 || out == nil {
		t.Fatalf("approved: %v %v", out, err)
	}
}

// A step held back by a step that sleeps or waits for an event says so, not that
// a confirmation is awaited.
func TestStepBlockedByASleepOrAWaitSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		nap  skill.Step
		want string
	}{
		{"sleep", skill.Step{Sleep: skill.Duration(time.Hour)}, "step nap sleeps until "},
		{"wait", skill.Step{WaitForEvent: &skill.WaitForEvent{Type: "com.example.paid", Timeout: skill.Duration(time.Hour)}}, "step nap waits for a com.example.paid event"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.nap.ID = "nap"
			e := newEngine(t, workflow.Config{Checkpoints: &workflow.MemStore{}})
			s := wf([]skill.Step{tt.nap, {ID: "after", Compute: "result = 1"}})
			_, l, err := e.ExecuteLog(deadline(t), workflow.Run{ExecutionID: "ex", Skill: s, Attempt: 1})
			var p *workflow.PausedError
			if !errors.As(err, &p) {
				t.Fatalf("err = %v, want a PausedError", err)
			}
			if got := l.Steps[1].Reason; !strings.HasPrefix(got, tt.want) {
				t.Fatalf("after: reason %q, want %q...", got, tt.want)
			}
		})
	}
}
