package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// recorder is an Observer that writes one line per event.
type recorder struct{ lines []string }

func (r *recorder) StepStarted(st *skill.Step, kind string) {
	r.lines = append(r.lines, "start "+st.ID+" "+kind)
}
func (r *recorder) StepCompleted(st *skill.Step, _ any, err error, _ time.Duration) {
	if err != nil {
		r.lines = append(r.lines, "done "+st.ID+" (continued: "+err.Error()+")")
		return
	}
	r.lines = append(r.lines, "done "+st.ID)
}
func (r *recorder) StepSkipped(st *skill.Step, reason string) {
	r.lines = append(r.lines, "skip "+st.ID)
}
func (r *recorder) StepFailed(st *skill.Step, err error, _ time.Duration) {
	r.lines = append(r.lines, "fail "+st.ID)
}

func engine(t *testing.T, extra ...tool.Tool) *workflow.Engine {
	t.Helper()
	set, err := tool.NewSet(append([]tool.Tool{tool.Echo(), tool.Noop()}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Tools: set, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wf(steps []skill.Step, outputs ...skill.Output) *skill.Skill {
	return &skill.Skill{Name: "t", Kind: skill.KindWorkflow, Workflow: &skill.Workflow{Steps: steps, Outputs: outputs}}
}

func TestStepsBindResultsForLaterSteps(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{
		{ID: "get_issue", Tool: "echo", Args: map[string]any{"branch": "feature/{{ inputs.key }}", "n": 3}, Output: "issue"},
		{ID: "slug", Compute: "result = issue.branch.replace('/', '-')"},
		{ID: "skipped", Condition: "issue.n > 5", Tool: "noop"},
		{ID: "shout", Condition: "slug", Tool: "echo", Args: map[string]any{"s": "{{ slug | upper }}", "items": "{{ [issue.n, get_issue.n] }}"}},
	}, skill.Output{Name: "branch", Value: "{{ get_issue.branch }}"}, skill.Output{Name: "shout", Value: "{{ shout.s }}"}, skill.Output{Name: "items", Value: "{{ shout['items'] }}"})
	rec := &recorder{}
	out, err := engine(t).Execute(context.Background(), workflow.Run{ExecutionID: "x", Skill: s, Inputs: map[string]any{"key": "AAP-1"}, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"branch": "feature/AAP-1", "shout": "FEATURE-AAP-1", "items": []any{int64(3), int64(3)}}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("outputs (-want +got)\n%s", d)
	}
	wantLines := []string{"start get_issue tool", "done get_issue", "start slug compute", "done slug", "skip skipped", "start shout tool", "done shout"}
	if d := cmp.Diff(wantLines, rec.lines); d != "" {
		t.Errorf("events (-want +got)\n%s", d)
	}
}

func TestNoOutputsReturnsStepResults(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "a", Tool: "echo", Args: map[string]any{"x": 1}}, {ID: "b", Compute: "result = 2", Output: "two"}})
	out, err := engine(t).Execute(context.Background(), workflow.Run{Skill: s})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{"a": map[string]any{"x": int64(1)}, "two": int64(2)}, out); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestOnError(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	flaky := tool.Func("flaky", func(context.Context, tool.Call) (any, error) {
		if calls.Add(1) < 3 {
			return nil, failure.Retry("timeout")
		}
		return "ok", nil
	})
	fatal := tool.Func("fatal", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("forbidden") })
	e := engine(t, flaky, fatal)

	// retry:N retries retryable failures at once.
	out, err := e.Execute(context.Background(), workflow.Run{Skill: wf([]skill.Step{{ID: "f", Tool: "flaky", OnError: "retry:2"}})})
	if err != nil || out["f"] != "ok" || calls.Load() != 3 {
		t.Fatalf("retry:2: out %v err %v calls %d", out, err, calls.Load())
	}
	// ... but not fatal ones.
	_, err = e.Execute(context.Background(), workflow.Run{Skill: wf([]skill.Step{{ID: "g", Tool: "fatal", OnError: "retry:5"}})})
	if failure.ClassOf(err) != failure.Fatal {
		t.Fatalf("retry of a fatal failure: %v", err)
	}
	// continue goes on, binding the step to its error text marked as MCP-style tools
	// mark failures ("❌ ...").
	rec := &recorder{}
	out, err = e.Execute(context.Background(), workflow.Run{Observer: rec, Skill: wf([]skill.Step{
		{ID: "g", Tool: "fatal", OnError: "continue"},
		{ID: "h", Compute: "result = 'g was ' + str(g)"},
	})})
	if err != nil || out["h"] != "g was ❌ forbidden" {
		t.Fatalf("continue: out %v err %v", out, err)
	}
	if rec.lines[1] != "done g (continued: forbidden)" {
		t.Fatalf("events %v", rec.lines)
	}
	// fail (the default) stops, and the error names the step and keeps its class.
	rec = &recorder{}
	_, err = e.Execute(context.Background(), workflow.Run{Observer: rec, Skill: wf([]skill.Step{{ID: "g", Tool: "fatal"}, {ID: "never", Tool: "noop"}})})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "g" || failure.ClassOf(err) != failure.Fatal {
		t.Fatalf("fail: %v", err)
	}
	if d := cmp.Diff([]string{"start g tool", "fail g"}, rec.lines); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
}

func TestLoop(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "each", Loop: "{{ inputs.issues }}", LoopVar: "issue", Tool: "echo", Args: map[string]any{"key": "{{ issue.key }}"}}})
	out, err := engine(t).Execute(context.Background(), workflow.Run{Skill: s, Inputs: map[string]any{"issues": []any{map[string]any{"key": "A-1"}, map[string]any{"key": "A-2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"key": "A-1"}, map[string]any{"key": "A-2"}}
	if d := cmp.Diff(want, out["each"]); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestInputs(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "x", Tool: "echo", Args: map[string]any{"key": "{{ inputs.issue_key }}", "prefix": "{{ inputs.branch_prefix }}", "n": "{{ inputs.n }}"}}})
	s.Workflow.Inputs = []skill.Input{
		{Name: "issue_key", Type: "string", Required: true, Pattern: `^[A-Z]+-\d+$`},
		{Name: "branch_prefix", Type: "string", Default: "feature", Enum: []any{"feature", "fix"}},
		{Name: "n", Type: "integer", Default: 1},
		{Name: "note", Type: "string", MaxLength: 5},
	}
	e := engine(t)
	given := map[string]any{"issue_key": "AAP-12345", "n": float64(7)}
	out, err := e.Execute(context.Background(), workflow.Run{Skill: s, Inputs: given})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{"key": "AAP-12345", "prefix": "feature", "n": int64(7)}, out["x"]); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	// Defaults and conversions go into a copy: the caller's inputs are as given.
	if d := cmp.Diff(map[string]any{"issue_key": "AAP-12345", "n": float64(7)}, given); d != "" {
		t.Errorf("the caller's inputs changed (-want +got)\n%s", d)
	}
	// Inputs needing neither are read as they are; none at all read as empty.
	for _, in := range []map[string]any{{"issue_key": "A-1", "branch_prefix": "fix", "n": int64(2)}, nil} {
		s := wf([]skill.Step{{ID: "x", Tool: "echo", Args: map[string]any{"all": "{{ inputs }}"}}})
		out, err := e.Execute(context.Background(), workflow.Run{Skill: s, Inputs: in})
		want := in
		if want == nil {
			want = map[string]any{}
		}
		if err != nil || !cmp.Equal(map[string]any{"all": want}, out["x"]) {
			t.Errorf("inputs %v: %v %v", in, out, err)
		}
	}
	for _, tt := range []struct {
		inputs map[string]any
		want   string
	}{
		{map[string]any{}, "input issue_key is required"},
		{map[string]any{"issue_key": "aap"}, `"aap" does not match pattern`},
		{map[string]any{"issue_key": 5.0}, "input issue_key: want string, got number 5"},
		{map[string]any{"issue_key": "A-1", "branch_prefix": "chore"}, "chore is not one of [feature fix]"},
		{map[string]any{"issue_key": "A-1", "n": 1.5}, "input n: want integer"},
		{map[string]any{"issue_key": "A-1", "note": "toolong"}, "more than max_length 5"},
		{map[string]any{"issue_key": "A-1", "isue_key": "A-2"}, "input isue_key is not declared by the skill; did you mean issue_key?"},
		{map[string]any{"data": []any{1.0, 2.0}}, "input data is not declared by the skill: the trigger's data is not a JSON object, and such data comes as one input named data (declared: "},
	} {
		_, err := e.Execute(context.Background(), workflow.Run{Skill: s, Inputs: tt.inputs})
		if err == nil || !strings.Contains(err.Error(), tt.want) || failure.ClassOf(err) != failure.Fatal {
			t.Errorf("inputs %v: err %v, want a fatal error containing %q", tt.inputs, err, tt.want)
		}
	}
}

// An undeclared input is suggested the closest declared input that was not
// given: a and b are both one edit from c, and a was given, so c stands for b.
func TestUndeclaredSuggestsAnInputNotGiven(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "x", Tool: "echo", Args: map[string]any{"a": "{{ inputs.a }}"}}})
	s.Workflow.Inputs = []skill.Input{{Name: "a"}, {Name: "b"}}
	_, err := engine(t).Execute(context.Background(), workflow.Run{Skill: s, Inputs: map[string]any{"a": "1", "c": "2"}})
	if err == nil || !strings.Contains(err.Error(), "input c is not declared by the skill; did you mean b?") {
		t.Fatalf("err %v", err)
	}
}

// A skill that declares the input "*" takes fields it does not declare.
func TestAnyInput(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "x", Tool: "echo", Args: map[string]any{"extra": "{{ inputs.extra }}"}}})
	s.Workflow.Inputs = []skill.Input{{Name: "key"}, {Name: skill.AnyInput}}
	out, err := engine(t).Execute(context.Background(), workflow.Run{Skill: s, Inputs: map[string]any{"key": "k", "extra": "e"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{"extra": "e"}, out["x"]); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	e := engine(t)
	for _, tt := range []struct {
		mod  func(*skill.Skill)
		want string
	}{
		{func(s *skill.Skill) { s.RequiredTools = []string{"echo", "jira", "git"} }, "missing required tools: jira, git"},
		{func(s *skill.Skill) { s.DisallowedTools = []string{"echo"} }, "disallowed_tools"},
		{func(s *skill.Skill) { s.AllowedTools = []string{"noop"} }, "not in the skill's allowed-tools"},
		{func(s *skill.Skill) { s.Workflow.Steps[0].Tool = "nosuch" }, `tool "nosuch" is not available`},
		{func(s *skill.Skill) { s.Workflow = nil; s.Kind = skill.KindInstruction }, "no chat model configured"},
	} {
		s := wf([]skill.Step{{ID: "x", Tool: "echo"}})
		tt.mod(s)
		_, err := e.Execute(context.Background(), workflow.Run{Skill: s})
		if err == nil || !strings.Contains(err.Error(), tt.want) || failure.ClassOf(err) != failure.Fatal {
			t.Errorf("err %v, want a fatal error containing %q", err, tt.want)
		}
	}
}

func TestTemplateErrorsAreRepairable(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "get_issue", Tool: "echo", Args: map[string]any{"a": 1}}, {ID: "x", Tool: "echo", Args: map[string]any{"b": "{{ get_issue.branch }}"}}})
	_, err := engine(t).Execute(context.Background(), workflow.Run{Skill: s})
	if failure.ClassOf(err) != failure.Repairable || !strings.Contains(err.Error(), "branch") {
		t.Fatalf("err = %v (%s)", err, failure.ClassOf(err))
	}
}

func TestStepTimeout(t *testing.T) {
	t.Parallel()
	slow := tool.Func("slow", func(ctx context.Context, _ tool.Call) (any, error) {
		<-ctx.Done()
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("slow: %w", ctx.Err()))
	})
	s := wf([]skill.Step{{ID: "s", Tool: "slow", Timeout: skill.Duration(20 * time.Millisecond)}})
	start := time.Now()
	_, err := engine(t, slow).Execute(context.Background(), workflow.Run{Skill: s})
	if !errors.Is(err, context.DeadlineExceeded) || failure.ClassOf(err) != failure.Retryable {
		t.Fatalf("err = %v", err)
	}
	if want := "step s: stopped by the step's timeout of 20ms: slow: context deadline exceeded"; err.Error() != want {
		t.Errorf("err %q, want %q", err, want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

// A failure a timeout caused says which timeout fired, the step's or the
// skill's, and how long it was; its class stays the tool's.
func TestTimeoutSaysWhich(t *testing.T) {
	t.Parallel()
	slow := tool.Func("slow", func(ctx context.Context, _ tool.Call) (any, error) {
		<-ctx.Done()
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("slow: %w", ctx.Err()))
	})
	tests := []struct {
		name        string
		skill, step time.Duration
		want        string
	}{
		{"step's", time.Hour, 20 * time.Millisecond, "step s: stopped by the step's timeout of 20ms: slow: context deadline exceeded"},
		{"skill's before the step's", 30 * time.Millisecond, time.Hour, "step s: stopped by the skill's timeout of 30ms: slow: context deadline exceeded"},
		{"skill's", 30 * time.Millisecond, 0, "step s: stopped by the skill's timeout of 30ms: slow: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := wf([]skill.Step{{ID: "s", Tool: "slow", Timeout: skill.Duration(tt.step)}, {ID: "after", Tool: "noop", DependsOn: []string{"s"}}})
			s.Timeout = skill.Duration(tt.skill)
			_, err := engine(t, slow).Execute(context.Background(), workflow.Run{Skill: s})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if !errors.Is(err, context.DeadlineExceeded) || failure.ClassOf(err) != failure.Retryable {
				t.Errorf("err %v (%s): want a retryable deadline", err, failure.ClassOf(err))
			}
		})
	}
	// A step left unstarted by the skill's timeout says so too.
	done := tool.Func("done", func(ctx context.Context, _ tool.Call) (any, error) {
		<-ctx.Done()
		return "finished anyway", nil
	})
	s := wf([]skill.Step{{ID: "s", Tool: "done"}, {ID: "after", Tool: "noop"}})
	s.Timeout = skill.Duration(30 * time.Millisecond)
	_, l, err := engine(t, done).ExecuteLog(context.Background(), workflow.Run{Skill: s})
	if want := "step after: not started: stopped by the skill's timeout of 30ms: context deadline exceeded"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
	if want := "the run was stopped by the skill's timeout of 30ms"; len(l.Steps) != 2 || l.Steps[1].Reason != want {
		t.Errorf("log %+v, want the reason %q", l.Steps, want)
	}
	// The default names itself as the default.
	if got := (&workflow.TimeoutError{Limit: 30 * time.Second, Default: true}).Error(); got != "the skill's timeout of 30s (the default; a skill sets its own with timeout:)" {
		t.Errorf("default: %q", got)
	}
	if got := (&workflow.TimeoutError{Step: "x", Limit: 5 * time.Minute}).Error(); got != "the step's timeout of 5m" {
		t.Errorf("5m: %q", got)
	}
}

// A skill's time limit stops its run whatever the caller's context: one that ends
// later, or none, gets the skill's; one that ends sooner stops it sooner.
func TestSkillTimeLimit(t *testing.T) {
	t.Parallel()
	slow := tool.Func("slow", func(ctx context.Context, _ tool.Call) (any, error) {
		<-ctx.Done()
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("slow: %w", ctx.Err()))
	})
	s := wf([]skill.Step{{ID: "s", Tool: "slow"}})
	s.Timeout = skill.Duration(30 * time.Millisecond)
	later, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sooner, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	for name, ctx := range map[string]context.Context{"none": context.Background(), "later": later, "sooner": sooner} {
		start := time.Now()
		_, err := engine(t, slow).Execute(ctx, workflow.Run{Skill: s})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v", name, err)
		}
		// The caller's deadline is no timeout of the skill's: it is not named as one.
		if skills := strings.Contains(err.Error(), "the skill's timeout of 30ms"); skills != (name != "sooner") {
			t.Errorf("%s: err %v", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: stopping took %v", name, d)
		}
	}
}

// A compute block that never ends is stopped by the interpreter's step limit, and
// the failure is fatal: running it again would loop again.
func TestComputeEndlessLoop(t *testing.T) {
	t.Parallel()
	s := wf([]skill.Step{{ID: "spin", Compute: "n = 0\nwhile True:\n  n += 1\nresult = n"}, {ID: "never", Tool: "noop"}})
	rec := &recorder{}
	start := time.Now()
	_, l, err := engine(t).ExecuteLog(context.Background(), workflow.Run{Skill: s, Observer: rec})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "spin" || failure.ClassOf(err) != failure.Fatal || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v (%s)", err, failure.ClassOf(err))
	}
	if d := time.Since(start); d > 20*time.Second { // the step limit, not a clock, stops it
		t.Errorf("stopping took %v", d)
	}
	if d := cmp.Diff([]string{"start spin compute", "fail spin"}, rec.lines); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if l.Status != workflow.RunFailed || l.FailedStep != "spin" || l.Class != failure.Fatal || l.Steps[1].Status != workflow.StatusNotRun {
		t.Errorf("log %+v", l)
	}
}

// A panicking tool fails its step, fatally, instead of the worker.
func TestToolPanic(t *testing.T) {
	t.Parallel()
	boom := tool.Func("boom", func(context.Context, tool.Call) (any, error) { panic("nil map") })
	_, err := engine(t, boom).Execute(context.Background(), workflow.Run{Skill: wf([]skill.Step{{ID: "b", Tool: "boom"}})})
	if failure.ClassOf(err) != failure.Fatal || !strings.Contains(err.Error(), "panic: nil map") {
		t.Fatalf("err = %v", err)
	}
}

// The run's context ending between steps stops the run with its error.
func TestCancelledBetweenSteps(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	stop := tool.Func("stop", func(context.Context, tool.Call) (any, error) { cancel(); return "ok", nil })
	store := &workflow.MemStore{}
	_, err := engine(t, stop).Execute(ctx, workflow.Run{ExecutionID: "ex", Checkpoints: store,
		Skill: wf([]skill.Step{{ID: "a", Tool: "stop"}, {ID: "b", Tool: "noop"}})})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "b" || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// a finished as the context ended: it is saved all the same.
	if saved, _ := store.Load(context.Background(), "ex"); saved["a"].Result != "ok" {
		t.Errorf("checkpoints %v", saved)
	}
}

// A run's results held in memory are bounded: a loop whose items each return a
// large output fails fatally with result_too_large once they add up past the limit,
// without running the rest of the loop.
func TestRunResultsAreBounded(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	big := tool.Func("big", func(context.Context, tool.Call) (any, error) {
		calls.Add(1)
		return map[string]any{"stdout": strings.Repeat("x", 1<<20)}, nil
	})
	set, err := tool.NewSet(big)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Tools: set, Log: slog.New(slog.DiscardHandler), MaxResultBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s := wf([]skill.Step{{ID: "many", Tool: "big", Loop: "{{ range(400) }}"}})
	_, err = e.Execute(context.Background(), workflow.Run{ExecutionID: "x", Skill: s})
	if err == nil || !strings.Contains(err.Error(), "result_too_large") || failure.ClassOf(err) != failure.Fatal {
		t.Fatalf("err = %v (class %s)", err, failure.ClassOf(err))
	}
	if n := calls.Load(); n > 5 {
		t.Fatalf("the loop ran %d items past the limit", n)
	}
}
