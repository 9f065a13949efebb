package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// meeting is a tool that returns only when args.n calls with the same args.key are
// in it at once: steps that call it with n: 2 finish only if they run together.
func meeting() tool.Tool {
	var mu sync.Mutex
	rooms := map[string]*struct {
		n    int
		full chan struct{}
	}{}
	return tool.Func("meet", func(ctx context.Context, c tool.Call) (any, error) {
		key, _ := c.Args["key"].(string)
		want, _ := c.Args["n"].(int64)
		mu.Lock()
		r := rooms[key]
		if r == nil {
			r = &struct {
				n    int
				full chan struct{}
			}{full: make(chan struct{})}
			rooms[key] = r
		}
		r.n++
		if int64(r.n) == want {
			close(r.full)
		}
		mu.Unlock()
		select {
		case <-r.full:
			return c.Step, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%s never met the others in %s: %w", c.Step, key, ctx.Err())
		}
	})
}

func meet(key string, n int) map[string]any { return map[string]any{"key": key, "n": int64(n)} }

func TestOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		steps []skill.Step
		// after lists pairs (a, b): b starts only after a is done.
		after [][2]string
	}{
		{
			name: "steps run in the listed order by default",
			steps: []skill.Step{
				{ID: "a", Tool: "echo"}, {ID: "b", Tool: "echo"}, {ID: "c", Compute: "result = 1"},
			},
			after: [][2]string{{"a", "b"}, {"b", "c"}},
		},
		{
			name: "a parallel group runs together, the next step waits for all of it",
			steps: []skill.Step{
				{ID: "first", Tool: "echo"},
				{ID: "a", Tool: "meet", Args: meet("g", 3), ParallelGroup: "1"},
				{ID: "b", Tool: "meet", Args: meet("g", 3), ParallelGroup: "1"},
				{ID: "c", Tool: "meet", Args: meet("g", 3), ParallelGroup: "1"},
				{ID: "last", Tool: "echo"},
			},
			after: [][2]string{{"first", "a"}, {"first", "b"}, {"first", "c"}, {"a", "last"}, {"b", "last"}, {"c", "last"}},
		},
		{
			name: "depends_on waits for the named steps only",
			steps: []skill.Step{
				{ID: "w", Tool: "echo"},
				{ID: "x", Tool: "meet", Args: meet("k", 2)},
				{ID: "y", Tool: "meet", Args: meet("k", 2), DependsOn: []string{"w"}},
				{ID: "z", Tool: "echo"},
			},
			after: [][2]string{{"w", "x"}, {"w", "y"}, {"x", "z"}, {"y", "z"}},
		},
		{
			name: "seed 004: step_c depends on a parallel group",
			steps: []skill.Step{
				{ID: "step_a", Tool: "meet", Args: meet("p", 2), ParallelGroup: "1"},
				{ID: "step_b", Tool: "meet", Args: meet("p", 2), ParallelGroup: "1"},
				{ID: "step_c", Tool: "echo", DependsOn: []string{"step_a", "step_b"}},
			},
			after: [][2]string{{"step_a", "step_c"}, {"step_b", "step_c"}},
		},
		{
			name: "reading a step is waiting for it, even inside a group",
			steps: []skill.Step{
				{ID: "a", Tool: "echo", Args: map[string]any{"v": 1}, ParallelGroup: "1"},
				{ID: "b", Compute: "result = a.v + 1", ParallelGroup: "1"},
				{ID: "c", Tool: "meet", Args: meet("r", 2), ParallelGroup: "2"},
				{ID: "d", Tool: "meet", Args: meet("r", 2), ParallelGroup: "2", Condition: "b == 2"},
			},
			after: [][2]string{{"a", "b"}, {"b", "c"}, {"b", "d"}},
		},
		{
			name: "depends_on plus what the step reads",
			steps: []skill.Step{
				{ID: "a", Tool: "echo", Args: map[string]any{"v": 1}},
				{ID: "b", Tool: "meet", Args: meet("q", 2), DependsOn: []string{"a"}},
				{ID: "c", Tool: "meet", Args: meet("q", 2), DependsOn: []string{"a"}},
				{ID: "d", Tool: "echo", Args: map[string]any{"v": "{{ c }}"}, DependsOn: []string{"a"}},
			},
			after: [][2]string{{"a", "b"}, {"a", "c"}, {"c", "d"}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := &journal{}
			e := newEngine(t, workflow.Config{}, meeting())
			_, err := e.Execute(deadline(t), workflow.Run{ExecutionID: "x", Skill: wf(tt.steps), Observer: j})
			if err != nil {
				t.Fatalf("%v\n%s", err, strings.Join(j.lines, "\n"))
			}
			for _, p := range tt.after {
				if d, s := j.index("done "+p[0]), j.index("start "+p[1]+" "+kindOf(tt.steps, p[1])); d < 0 || s < 0 || d > s {
					t.Errorf("%s started before %s was done:\n%s", p[1], p[0], strings.Join(j.lines, "\n"))
				}
			}
			for _, st := range tt.steps {
				if got := j.of(st.ID); !cmp.Equal(got, []string{"start", "done"}) {
					t.Errorf("events of %s: %v, want [start done]", st.ID, got)
				}
			}
		})
	}
}

func kindOf(steps []skill.Step, id string) string {
	for _, s := range steps {
		if s.ID == id && s.Compute != "" {
			return "compute"
		}
	}
	return "tool"
}

// Of two steps writing one output name, the later one in the list wins, whichever
// finishes last.
func TestOutputNameLaterStepWins(t *testing.T) {
	t.Parallel()
	for _, lastToFinish := range []string{"a", "b"} {
		t.Run(lastToFinish+" finishes last", func(t *testing.T) {
			t.Parallel()
			first := map[string]string{"a": "b", "b": "a"}[lastToFinish]
			firstDone := make(chan struct{})
			j := &journal{on: func(l string) {
				if l == "done "+first {
					close(firstDone)
				}
			}}
			gate := tool.Func("gate", func(ctx context.Context, c tool.Call) (any, error) {
				if c.Step == lastToFinish {
					if _, err := wait(ctx, firstDone); err != nil {
						return nil, err
					}
				}
				return c.Step, nil
			})
			s := wf([]skill.Step{
				{ID: "a", Tool: "gate", Output: "o", ParallelGroup: "g"},
				{ID: "b", Tool: "gate", Output: "o", ParallelGroup: "g"},
				{ID: "c", Compute: "result = o"},
			})
			out, err := newEngine(t, workflow.Config{}, gate).Execute(deadline(t), workflow.Run{Skill: s, Observer: j})
			if err != nil {
				t.Fatal(err)
			}
			if out["c"] != "b" {
				t.Errorf("c = %v, want b (the later step's result)", out["c"])
			}
		})
	}
}

// When steps running together fail, the run's error is the failure of the first of
// them in list order, whatever failed first; the others finish and are saved, and
// what depends on a failed step does not run.
func TestFirstFailureInListOrder(t *testing.T) {
	t.Parallel()
	bFailed := make(chan struct{})
	j := &journal{on: func(l string) {
		if l == "fail b" {
			close(bFailed)
		}
	}}
	tools := []tool.Tool{
		tool.Func("slow_fail", func(ctx context.Context, c tool.Call) (any, error) {
			if _, err := wait(ctx, bFailed); err != nil {
				return nil, err
			}
			return nil, failure.Fatalf("a broke")
		}),
		tool.Func("fast_fail", func(context.Context, tool.Call) (any, error) { return nil, failure.Retry("b broke") }),
	}
	s := wf([]skill.Step{
		{ID: "a", Tool: "slow_fail", ParallelGroup: "1"},
		{ID: "b", Tool: "fast_fail", ParallelGroup: "1"},
		{ID: "c", Tool: "echo", Args: map[string]any{"ok": true}, ParallelGroup: "1"},
		{ID: "d", Tool: "echo"},
	})
	store := &workflow.MemStore{}
	_, l, err := newEngine(t, workflow.Config{Checkpoints: store}, tools...).ExecuteLog(deadline(t), workflow.Run{ExecutionID: "ex", Skill: s, Observer: j})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "a" || failure.ClassOf(err) != failure.Fatal {
		t.Fatalf("err = %v, want step a's fatal failure", err)
	}
	if j.index("fail b") > j.index("fail a") {
		t.Errorf("b should have failed first:\n%s", strings.Join(j.lines, "\n"))
	}
	if j.of("d") != nil {
		t.Errorf("d ran after a failure: %v", j.of("d"))
	}
	saved, _ := store.Load(context.Background(), "ex")
	if _, ok := saved["c"]; !ok || len(saved) != 1 {
		t.Errorf("checkpoints %v, want c's only", saved)
	}
	got := map[string]workflow.Status{}
	for _, s := range l.Steps {
		got[s.ID] = s.Status
	}
	want := map[string]workflow.Status{"a": workflow.StatusFailed, "b": workflow.StatusFailed, "c": workflow.StatusCompleted, "d": workflow.StatusNotRun}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("log statuses (-want +got)\n%s", d)
	}
	if l.Status != workflow.RunFailed || l.FailedStep != "a" || l.Steps[3].Reason != "step a failed" {
		t.Errorf("log %+v", l)
	}
}

// A failure stops what depends on it, not independent branches: so the set of steps
// that run, and the error, do not depend on timing.
func TestIndependentBranchRunsAfterFailure(t *testing.T) {
	t.Parallel()
	j := &journal{}
	fail := tool.Func("fail", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("x broke") })
	s := wf([]skill.Step{
		{ID: "w", Tool: "echo"},
		{ID: "x", Tool: "fail"},
		{ID: "y", Tool: "echo", DependsOn: []string{"w"}},
		{ID: "z", Tool: "echo"},
	})
	_, err := newEngine(t, workflow.Config{}, fail).Execute(deadline(t), workflow.Run{Skill: s, Observer: j})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "x" {
		t.Fatalf("err = %v", err)
	}
	if j.index("done y") < 0 || j.of("z") != nil {
		t.Errorf("want y run and z not:\n%s", strings.Join(j.lines, "\n"))
	}
}

func TestMaxParallel(t *testing.T) {
	t.Parallel()
	const limit, steps = 2, 7
	var active, peak atomic.Int64
	entered := make(chan string, steps)
	release := make(chan struct{})
	hold := tool.Func("hold", func(ctx context.Context, c tool.Call) (any, error) {
		n := active.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- c.Step
		defer active.Add(-1)
		_, err := wait(ctx, release)
		return nil, err
	})
	var ss []skill.Step
	for i := range steps {
		ss = append(ss, skill.Step{ID: fmt.Sprintf("s%d", i), Tool: "hold", ParallelGroup: "all"})
	}
	e := newEngine(t, workflow.Config{MaxParallel: limit}, hold)
	ctx := deadline(t)
	done := make(chan error, 1)
	go func() {
		_, err := e.Execute(ctx, workflow.Run{Skill: wf(ss)})
		done <- err
	}()
	// Fill both slots, then free one at a time: each release lets one more in.
	for range limit {
		if _, err := wait(ctx, entered); err != nil {
			t.Fatal(err)
		}
	}
	for range steps - limit {
		release <- struct{}{}
		if _, err := wait(ctx, entered); err != nil {
			t.Fatal(err)
		}
	}
	for range limit {
		release <- struct{}{}
	}
	if err, _ := wait(ctx, done); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != limit {
		t.Errorf("at most %d steps ran at once, want exactly %d", p, limit)
	}
}

func TestGraphErrors(t *testing.T) {
	t.Parallel()
	e := newEngine(t, workflow.Config{})
	for _, tt := range []struct {
		steps []skill.Step
		want  string
	}{
		{[]skill.Step{{ID: "a", Tool: "echo", DependsOn: []string{"nope"}}}, "depends on unknown step nope"},
		{[]skill.Step{{ID: "a", Tool: "echo", DependsOn: []string{"b"}}, {ID: "b", Tool: "echo"}}, "depends on b, which comes later"},
		{[]skill.Step{{ID: "a", Tool: "echo", DependsOn: []string{"a"}}}, "depends on itself"},
		{[]skill.Step{{ID: "a", Tool: "echo", ParallelGroup: "1"}, {ID: "b", Tool: "echo", ParallelGroup: "1", DependsOn: []string{"a"}}}, "both are in parallel group 1"},
		{[]skill.Step{{ID: "a", Tool: "echo"}, {ID: "a", Tool: "echo"}}, "used twice"},
	} {
		_, err := e.Execute(context.Background(), workflow.Run{Skill: wf(tt.steps)})
		if err == nil || !strings.Contains(err.Error(), tt.want) || failure.ClassOf(err) != failure.Repairable {
			t.Errorf("err %v, want a repairable error containing %q", err, tt.want)
		}
	}
	if _, err := workflow.New(workflow.Config{Tools: &tool.Set{}, MaxParallel: -1}); err == nil {
		t.Error("MaxParallel -1 accepted")
	}
}
