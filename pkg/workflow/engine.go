package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Observer is told about each step as it happens. Calls come from the goroutine that
// runs Execute.
type Observer interface {
	StepStarted(st *skill.Step, kind string)
	// StepCompleted reports a step that finished; err is set when the step failed and
	// on_error: continue let the run go on.
	StepCompleted(st *skill.Step, result any, err error, d time.Duration)
	StepSkipped(st *skill.Step, reason string)
	StepFailed(st *skill.Step, err error, d time.Duration)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) StepStarted(*skill.Step, string)                      {}
func (NopObserver) StepCompleted(*skill.Step, any, error, time.Duration) {}
func (NopObserver) StepSkipped(*skill.Step, string)                      {}
func (NopObserver) StepFailed(*skill.Step, error, time.Duration)         {}

// Config configures an Engine.
type Config struct {
	// Tools are the tools steps may call; required.
	Tools *tool.Set
	// Log receives debug logs; default slog.Default().
	Log *slog.Logger
}

// Engine runs workflows. It is safe for concurrent use and caches each skill
// version's compiled expressions.
type Engine struct {
	tools *tool.Set
	log   *slog.Logger

	mu    sync.Mutex
	cache map[string]*compiled
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Tools == nil {
		return nil, errors.New("workflow: Tools is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Engine{tools: cfg.Tools, log: cfg.Log, cache: map[string]*compiled{}}, nil
}

// Run is one execution of a skill.
type Run struct {
	ExecutionID string
	Skill       *skill.Skill
	Inputs      map[string]any
	// Trigger describes the triggering event to expressions as `trigger` (id,
	// source, type, subject, ...).
	Trigger map[string]any
	// Attempt is the delivery count of the job, from 1; expressions see it as
	// execution.attempt.
	Attempt  uint64
	Observer Observer
}

// StepError is a failure of one step; its class is the class of Err.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Execute runs the workflow and returns its outputs. Its error is a *StepError for a
// step that failed, or a classed error for invalid inputs or skill definitions.
func (e *Engine) Execute(ctx context.Context, r Run) (map[string]any, error) {
	s := r.Skill
	if s.Workflow == nil {
		switch s.Kind {
		case skill.KindInstruction:
			return nil, failure.Fatalf("skill %s is an instruction skill and this worker has no chat model configured", s.Name)
		default:
			return nil, failure.Fatalf("skill %s has no workflow steps and kind %q cannot run on this worker", s.Name, s.Kind)
		}
	}
	// A human must approve before these run. Until this worker can pause for an
	// approval, refusing is the only safe answer: running the step unconfirmed would
	// do exactly what the author asked to be asked about.
	if len(s.Workflow.Confirmations) > 0 || s.Execution.Approval == skill.ApprovalAsk {
		return nil, failure.Fatalf("skill %s asks for human confirmation, which this worker cannot collect yet; it is not run unconfirmed", s.Name)
	}
	if err := e.checkTools(s); err != nil {
		return nil, err
	}
	c, err := e.compiled(s)
	if err != nil {
		return nil, err
	}
	obs := r.Observer
	if obs == nil {
		obs = NopObserver{}
	}
	inputs, err := validateInputs(c.inputs, r.Inputs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.ExecTimeout())
	defer cancel()

	env := expr.Env{
		"inputs":  inputs,
		"trigger": r.Trigger,
		"execution": map[string]any{
			"id":      r.ExecutionID,
			"skill":   s.Name,
			"version": s.Version,
			"attempt": int64(r.Attempt),
		},
	}
	results := make(map[string]any, len(c.steps))
	for i := range c.steps {
		cs := &c.steps[i]
		st := cs.step
		if cs.condition != nil {
			v, err := cs.condition.Eval(ctx, env)
			if err != nil {
				err = &StepError{Step: st.ID, Err: fmt.Errorf("condition: %w", err)}
				obs.StepFailed(st, err, 0)
				return nil, err
			}
			if !expr.Truthy(v) {
				obs.StepSkipped(st, "condition is false: "+st.Condition)
				continue
			}
		}
		kind := "tool"
		if cs.compute != nil {
			kind = "compute"
		}
		obs.StepStarted(st, kind)
		start := time.Now()
		res, err := e.runStep(ctx, r.ExecutionID, cs, env)
		d := time.Since(start)
		if err != nil {
			if cs.onError == "continue" && ctx.Err() == nil {
				obs.StepCompleted(st, nil, err, d)
				continue
			}
			err = &StepError{Step: st.ID, Err: err}
			obs.StepFailed(st, err, d)
			return nil, err
		}
		obs.StepCompleted(st, res, nil, d)
		env[st.ID] = res
		if st.Output != "" {
			env[st.Output] = res
		}
		results[resultName(st)] = res
	}
	if len(c.outputs) == 0 {
		return results, nil
	}
	out := make(map[string]any, len(c.outputs))
	for _, o := range c.outputs {
		v, err := o.value.Eval(ctx, env)
		if err != nil {
			return nil, failure.Wrap(failure.ClassOf(err), fmt.Errorf("output %s: %w", o.name, err))
		}
		out[o.name] = v
	}
	return out, nil
}

func resultName(st *skill.Step) string {
	if st.Output != "" {
		return st.Output
	}
	return st.ID
}

// runStep runs one step, its loop and its on_error retries.
func (e *Engine) runStep(ctx context.Context, execID string, cs *cstep, env expr.Env) (any, error) {
	st := cs.step
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(st.Timeout))
		defer cancel()
	}
	if cs.loop == nil {
		return e.attempt(ctx, execID+"/"+st.ID, cs, env)
	}
	lv, err := cs.loop.Eval(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("loop: %w", err)
	}
	items, ok := lv.([]any)
	if !ok && lv != nil {
		return nil, failure.Repair("loop: %q gives %T, not a list", st.Loop, lv)
	}
	name := st.LoopVar
	if name == "" {
		name = "item"
	}
	saved, had := env[name]
	defer func() {
		if had {
			env[name] = saved
		} else {
			delete(env, name)
		}
	}()
	out := make([]any, 0, len(items))
	for i, it := range items {
		env[name] = it
		v, err := e.attempt(ctx, fmt.Sprintf("%s/%s/%d", execID, st.ID, i), cs, env)
		if err != nil {
			return nil, fmt.Errorf("loop item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// attempt runs the step's body once, and again on retryable failures when on_error
// is retry:N.
func (e *Engine) attempt(ctx context.Context, key string, cs *cstep, env expr.Env) (any, error) {
	for try := 0; ; try++ {
		v, err := e.body(ctx, key, cs, env)
		if err == nil || cs.onError != "retry" || try >= cs.retries || ctx.Err() != nil || failure.ClassOf(err) != failure.Retryable {
			return v, err
		}
	}
}

func (e *Engine) body(ctx context.Context, key string, cs *cstep, env expr.Env) (any, error) {
	st := cs.step
	if cs.compute != nil {
		return cs.compute.Run(ctx, env)
	}
	t, ok := e.tools.Lookup(st.Tool)
	if !ok {
		return nil, failure.Fatalf("tool %q is not available on this worker (it has: %s)", st.Tool, strings.Join(e.tools.Names(), ", "))
	}
	var args map[string]any
	if cs.args != nil {
		v, err := cs.args.Eval(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("args: %w", err)
		}
		args, _ = v.(map[string]any)
	}
	idx := strings.IndexByte(key, '/')
	return t.Call(ctx, tool.Call{Args: args, ExecutionID: key[:idx], Step: st.ID, IdempotencyKey: key})
}

// checkTools enforces required_tools, disallowed_tools and allowed-tools before
// anything runs.
func (e *Engine) checkTools(s *skill.Skill) error {
	var missing []string
	for _, t := range s.RequiredTools {
		if _, ok := e.tools.Lookup(t); !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return failure.Fatalf("missing required tools: %s", strings.Join(missing, ", "))
	}
	for _, st := range s.Workflow.Steps {
		if st.Tool == "" {
			continue
		}
		for _, d := range s.DisallowedTools {
			if d == st.Tool {
				return failure.Fatalf("step %s: tool %s is in the skill's disallowed_tools", st.ID, st.Tool)
			}
		}
		if len(s.AllowedTools) > 0 && !contains(s.AllowedTools, st.Tool) {
			return failure.Fatalf("step %s: tool %s is not in the skill's allowed-tools (%s)", st.ID, st.Tool, strings.Join(s.AllowedTools, ", "))
		}
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (e *Engine) compiled(s *skill.Skill) (*compiled, error) {
	if s.Digest == "" {
		return compile(s.Workflow)
	}
	key := s.Name + "@" + s.Digest
	e.mu.Lock()
	c, ok := e.cache[key]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := compile(s.Workflow)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.cache) >= 4096 {
		clear(e.cache) // skills change rarely; a full cache means many old versions
	}
	e.cache[key] = c
	e.mu.Unlock()
	return c, nil
}
