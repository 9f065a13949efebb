package workflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Overhead is the engine's own cost per step, measured by MeasureOverhead.
type Overhead struct {
	PerStep time.Duration // wall time per step
	Runs    int           // runs measured
	Steps   int           // steps per run
}

// String reads like "engine: per-step overhead 12.3µs (template + condition +
// checkpoint, in-memory store)".
func (o Overhead) String() string {
	return fmt.Sprintf("engine: per-step overhead %.1fµs (template + condition + checkpoint, in-memory store)",
		float64(o.PerStep.Nanoseconds())/1000)
}

// overheadSkill is the three-step workflow of MeasureOverhead: tool → compute → tool,
// every step with a condition and templates, the tools doing nothing.
var overheadSkill = &skill.Skill{
	Name: "overhead", Kind: skill.KindWorkflow, Version: "1",
	Digest: "0000000000000000000000000000000000000000000000000000000000000001",
	Workflow: &skill.Workflow{
		Inputs: []skill.Input{{Name: "n", Type: "integer", Required: true}},
		Steps: []skill.Step{
			{ID: "fetch", Tool: "echo", Condition: "inputs.n >= 0",
				Args: map[string]any{"n": "{{ inputs.n }}", "key": "item-{{ inputs.n }}"}, Output: "item"},
			{ID: "double", Condition: "item.key", Compute: "result = item.n * 2"},
			{ID: "store", Tool: "noop", Condition: "double >= 0",
				Args: map[string]any{"value": "{{ double }}", "key": "{{ item.key | upper }}"}},
		},
		Outputs: []skill.Output{{Name: "double", Value: "{{ double }}"}},
	},
}

// MeasureOverhead measures what the engine adds to each step — rendering templates,
// evaluating the condition, saving the checkpoint (in a MemStore), scheduling and
// reporting — by running a three-step workflow (echo tool → compute → noop tool)
// runs times in a row (10,000 if runs ≤ 0) and dividing the time by the steps run.
// The tools do nothing, so what it measures is the engine.
func MeasureOverhead(ctx context.Context, runs int) (Overhead, error) {
	if runs <= 0 {
		runs = 10_000
	}
	set, err := tool.NewSet(tool.Echo(), tool.Noop())
	if err != nil {
		return Overhead{}, err
	}
	store := &MemStore{}
	e, err := New(Config{Tools: set, Checkpoints: store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return Overhead{}, err
	}
	steps := len(overheadSkill.Workflow.Steps)
	one := func(i int) error {
		id := "overhead-" + strconv.Itoa(i)
		out, err := e.Execute(ctx, Run{ExecutionID: id, Skill: overheadSkill, Inputs: map[string]any{"n": int64(i)}, Attempt: 1})
		store.Forget(id)
		if err != nil {
			return err
		}
		if out["double"] != int64(2*i) {
			return fmt.Errorf("overhead workflow returned %v, want double %d", out, 2*i)
		}
		return nil
	}
	for i := range min(runs, 100) { // warm up: compile, allocate
		if err := one(i); err != nil {
			return Overhead{}, err
		}
	}
	start := time.Now()
	for i := range runs {
		if err := one(i); err != nil {
			return Overhead{}, err
		}
	}
	el := time.Since(start)
	return Overhead{PerStep: el / time.Duration(runs*steps), Runs: runs, Steps: steps}, nil
}
