package workflow_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func TestMeasureOverhead(t *testing.T) {
	t.Parallel()
	o, err := workflow.MeasureOverhead(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if o.PerStep <= 0 || o.Runs != 50 || o.Steps != 3 {
		t.Fatalf("%+v", o)
	}
	if !regexp.MustCompile(`^engine: per-step overhead \d+\.\dµs \(template \+ condition \+ checkpoint, in-memory store\)$`).MatchString(o.String()) {
		t.Errorf("%q", o.String())
	}
}

// BenchmarkThreeSteps runs tool → compute → tool with conditions, templates and an
// in-memory checkpoint store; µs/step is the engine's per-step overhead.
func BenchmarkThreeSteps(b *testing.B) {
	store := &workflow.MemStore{}
	e := newEngine(b, workflow.Config{Checkpoints: store})
	s := &skill.Skill{Name: "bench", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: &skill.Workflow{
		Steps: []skill.Step{
			{ID: "fetch", Tool: "echo", Condition: "inputs.n >= 0", Args: map[string]any{"n": "{{ inputs.n }}", "key": "item-{{ inputs.n }}"}, Output: "item"},
			{ID: "double", Condition: "item.key", Compute: "result = item.n * 2"},
			{ID: "store", Tool: "noop", Condition: "double >= 0", Args: map[string]any{"value": "{{ double }}"}},
		},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := fmt.Sprint("b", i)
		if _, err := e.Execute(ctx, workflow.Run{ExecutionID: id, Skill: s, Inputs: map[string]any{"n": int64(i)}}); err != nil {
			b.Fatal(err)
		}
		store.Forget(id)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*3), "µs/step")
}

// BenchmarkParallelGroup runs eight no-op steps of one parallel group.
func BenchmarkParallelGroup(b *testing.B) {
	e := newEngine(b, workflow.Config{})
	var steps []skill.Step
	for i := range 8 {
		steps = append(steps, skill.Step{ID: fmt.Sprint("s", i), Tool: "noop", ParallelGroup: "g"})
	}
	s := &skill.Skill{Name: "par", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: &skill.Workflow{Steps: steps}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Execute(ctx, workflow.Run{Skill: s}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOneStep is the run `skillbus bench` measures: one no-op tool step with
// a templated argument, a required integer input and one output, logged as a
// worker runs it.
func BenchmarkOneStep(b *testing.B) {
	// As a worker with no exporter configured: tracing off.
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	e := newEngine(b, workflow.Config{})
	s := &skill.Skill{Name: "noop", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: &skill.Workflow{
		Inputs:  []skill.Input{{Name: "n", Type: "integer", Required: true}},
		Steps:   []skill.Step{{ID: "nothing", Tool: "noop", Args: map[string]any{"n": "{{ inputs.n }}"}}},
		Outputs: []skill.Output{{Name: "n", Value: "{{ inputs.n }}"}},
	}}
	ctx := context.Background()
	inputs := map[string]any{"n": float64(1)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.ExecuteLog(ctx, workflow.Run{ExecutionID: "x", Skill: s, Inputs: inputs}); err != nil {
			b.Fatal(err)
		}
	}
}

// A run converts an integer input given as a JSON number to int64 and fills in
// defaults: in a copy of the caller's inputs, unless the run owns them.
func TestOwnInputsAreConvertedInPlace(t *testing.T) {
	t.Parallel()
	e := newEngine(t, workflow.Config{})
	s := &skill.Skill{Name: "own", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: &skill.Workflow{
		Inputs:  []skill.Input{{Name: "n", Type: "integer", Required: true}, {Name: "greeting", Default: "hi"}},
		Steps:   []skill.Step{{ID: "echo", Tool: "echo", Args: map[string]any{"n": "{{ inputs.n }}"}}},
		Outputs: []skill.Output{{Name: "n", Value: "{{ inputs.n }}"}, {Name: "greeting", Value: "{{ inputs.greeting }}"}},
	}}
	for _, own := range []bool{false, true} {
		inputs := map[string]any{"n": float64(7)}
		out, err := e.Execute(context.Background(), workflow.Run{ExecutionID: "x", Skill: s, Inputs: inputs, OwnInputs: own})
		if err != nil {
			t.Fatal(err)
		}
		if out["n"] != int64(7) || out["greeting"] != "hi" {
			t.Errorf("own %v: outputs %v, want n 7 (int64) and greeting hi", own, out)
		}
		want := map[string]any{"n": float64(7)}
		if own {
			want = map[string]any{"n": int64(7), "greeting": "hi"}
		}
		if fmt.Sprint(inputs) != fmt.Sprint(want) || inputs["n"] != want["n"] {
			t.Errorf("own %v: the caller's inputs are %v (%T), want %v", own, inputs, inputs["n"], want)
		}
	}
}

// A run's tool calls act under its own skill's permissions, also when another
// skill of the same name and digest, and so of the same compiled workflow, ran
// before it with others.
func TestRunsActUnderTheirSkillsPermissions(t *testing.T) {
	t.Parallel()
	perms := tool.Func("perms", func(ctx context.Context, _ tool.Call) (any, error) {
		return tool.PermissionsFrom(ctx).Network, nil
	})
	e := newEngine(t, workflow.Config{}, perms)
	wf := &skill.Workflow{
		Steps:   []skill.Step{{ID: "p", Tool: "perms"}},
		Outputs: []skill.Output{{Name: "network", Value: "{{ p }}"}},
	}
	open := &skill.Skill{Name: "same", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: wf}
	open.Permissions.Network.Outbound = true
	closed := &skill.Skill{Name: "same", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: wf}
	for _, s := range []*skill.Skill{open, closed, open, closed} {
		out, err := e.Execute(context.Background(), workflow.Run{ExecutionID: "x", Skill: s})
		if err != nil {
			t.Fatal(err)
		}
		if want := s == open; out["network"] != want {
			t.Errorf("the call acted with network %v, want %v", out["network"], want)
		}
	}
}

// A run reuses the memory of finished runs: what a run returned (its outputs and
// its log) stays as it was while other runs, one after another and side by side,
// go on.
func TestRunsShareNothingTheyReturn(t *testing.T) {
	t.Parallel()
	e := newEngine(t, workflow.Config{})
	s := &skill.Skill{Name: "reuse", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "0123456789abcdef", Workflow: &skill.Workflow{
		Inputs:  []skill.Input{{Name: "n", Type: "integer", Required: true}},
		Steps:   []skill.Step{{ID: "echo", Tool: "echo", Args: map[string]any{"n": "{{ inputs.n }}"}}},
		Outputs: []skill.Output{{Name: "n", Value: "{{ inputs.n }}"}},
	}}
	// Odd runs take the path of parallel steps: a state slice and a channel.
	par := &skill.Skill{Name: "reuse-par", Version: "1.0.0", Kind: skill.KindWorkflow, Digest: "fedcba9876543210", Workflow: &skill.Workflow{
		Inputs: []skill.Input{{Name: "n", Type: "integer", Required: true}},
		Steps: []skill.Step{
			{ID: "a", Tool: "echo", Args: map[string]any{"n": "{{ inputs.n }}"}, ParallelGroup: "g"},
			{ID: "echo", Tool: "echo", Args: map[string]any{"n": "{{ inputs.n }}"}, ParallelGroup: "g"},
		},
		Outputs: []skill.Output{{Name: "n", Value: "{{ echo.n }}"}},
	}}
	type kept struct {
		out map[string]any
		log *workflow.Log
	}
	run := func(n int) kept {
		sk := s
		if n%2 == 1 {
			sk = par
		}
		out, log, err := e.ExecuteLog(context.Background(), workflow.Run{ExecutionID: fmt.Sprint("x", n), Skill: sk, Inputs: map[string]any{"n": int64(n)}})
		if err != nil {
			t.Error(err)
		}
		return kept{out, log}
	}
	check := func(n int, k kept) {
		if k.out["n"] != int64(n) || len(k.out) != 1 {
			t.Errorf("run %d: outputs became %v", n, k.out)
		}
		last := len(k.log.Steps) - 1
		if k.log.ExecutionID != fmt.Sprint("x", n) || last != n%2 || k.log.Steps[last].ID != "echo" || k.log.Steps[last].Status != workflow.StatusCompleted {
			t.Errorf("run %d: log became %+v", n, k.log)
		}
	}
	first, second := run(0), run(1)
	done := make(chan kept)
	for g := 1; g <= 4; g++ {
		go func() {
			var last kept
			for i := range 50 {
				last = run(g*1000 + i)
			}
			done <- last
		}()
	}
	for g := 1; g <= 4; g++ {
		check(0, first)
		check(1, second)
		k := <-done
		n, ok := k.out["n"].(int64)
		if !ok {
			t.Fatalf("outputs %v", k.out)
		}
		check(int(n), k)
	}
	check(0, first)
	check(1, second)
}
