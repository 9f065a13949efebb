package workflow

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
)

// saveTimeout bounds a checkpoint Save made after the run's context ended: a step
// that finished as the worker was stopping is worth keeping, so the next attempt
// does not repeat it.
const saveTimeout = 10 * time.Second

// calls counts a step's tool calls and cache hits.
type calls struct {
	made, hits int
	// writes counts the calls made that did not only read (tool.IsReadOnly).
	writes int
}

// step runs step i in env: condition, confirmation, body, checkpoint, and the
// Observer calls. It may run beside other steps, so it touches only the step's log
// entry besides calling out.
func (x *execution) step(i int, env expr.Env, heal *AutoHeal, retryOf string) (s stepState) {
	cs := &x.c.steps[i]
	st := cs.step
	start := time.Now()
	ran := false
	x.log.Steps[i].Attempt = x.r.Attempt
	defer func() {
		if p := recover(); p != nil {
			x.e.log.Error("workflow: step panicked", "execution", x.r.ExecutionID, "step", st.ID, "panic", p, "stack", string(debug.Stack()))
			s = x.fail(i, failure.Fatalf("panic: %v", p), start, ran)
		}
	}()
	if cs.condition != nil {
		ok, err := cs.condition.EvalBool(x.ctx, env)
		if err != nil {
			return x.fail(i, fmt.Errorf("condition: %w", err), start, false)
		}
		if !ok {
			return x.skip(i, "condition is false: "+st.Condition, start)
		}
	}
	if cs.confirm != nil {
		a, ok := x.r.Confirmations[st.ID]
		if !ok {
			msg, err := cs.confirm.message.Eval(x.ctx, env)
			if err != nil {
				return x.fail(i, fmt.Errorf("confirmation message: %w", err), start, false)
			}
			p := &PausedError{Step: st.ID, Message: text(msg), Default: cs.confirm.def, Timeout: time.Duration(cs.confirm.timeout)}
			x.log.Steps[i].Status = StatusWaiting
			x.log.Steps[i].Reason = "waiting for confirmation: " + p.Message
			return stepState{status: StatusWaiting, pause: p}
		}
		if !a.Approved {
			return x.skip(i, a.denial(), start)
		}
	}
	if cs.kind == "sleep" {
		if _, woke := x.r.Confirmations[st.ID]; !woke {
			until, err := x.wakeTime(cs, env)
			if err != nil {
				return x.fail(i, err, start, false)
			}
			if until.After(start) {
				x.log.Steps[i].Status = StatusWaiting
				x.log.Steps[i].Reason = "sleeping until " + until.UTC().Format(time.RFC3339)
				return stepState{status: StatusWaiting, pause: &PausedError{Step: st.ID, Message: x.log.Steps[i].Reason, Until: until}}
			}
		}
	}
	if cs.kind == "wait" {
		if _, ended := x.r.Confirmations[st.ID]; !ended {
			return x.park(i, cs, env, start)
		}
	}
	sl := &x.log.Steps[i]
	sl.RetryOf = retryOf
	if heal != nil {
		sl.HealOf, sl.FailureType = heal.Step, heal.FailureType
		x.obs.autoHeal(*heal)
	}
	x.obs.started(st, cs.kind)
	ran = true
	var n calls
	// The step's span parents its tool calls (an HTTP request, a bus tool, a
	// sub-skill): one trace shows each step and what it did.
	sctx, span := telemetry.StartStep(x.ctx, st.ID, cs.kind, telemetry.AttrTool.String(st.Tool))
	res, err := x.body(sctx, cs, env, &n)
	telemetry.End(span, err)
	fin := time.Now()
	sl.Calls, sl.CacheHits, sl.Cached = n.made, n.hits, n.hits > 0 && n.made == 0
	if err != nil {
		if cs.onError != "continue" || x.ctx.Err() != nil || x.stop.Err() != nil {
			return x.fail(i, err, start, true)
		}
		txt := errorText(err)
		cl := failure.ClassOf(err)
		ck := Checkpoint{Status: StatusContinued, Result: txt, Error: err.Error(), Class: cl, Calls: n.made,
			Skill: x.ref, Attempt: x.r.Attempt, Started: start, Finished: fin, Kind: cs.kind, Final: x.final == i, ReadOnly: n.writes == 0}
		if serr := x.save(st.ID, ck); serr != nil {
			return x.fail(i, serr, start, true)
		}
		sl.set(StatusContinued, start, fin)
		sl.Error, sl.Class = err.Error(), cl
		x.obs.completed(st, nil, err, fin.Sub(start))
		return stepState{status: StatusContinued, bound: true, value: txt, err: err, errText: err.Error(), class: cl}
	}
	ck := Checkpoint{Status: StatusCompleted, Result: res, Cached: sl.Cached, Calls: n.made,
		Skill: x.ref, Attempt: x.r.Attempt, Started: start, Finished: fin, Kind: cs.kind, Final: x.final == i, ReadOnly: n.writes == 0}
	if serr := x.save(st.ID, ck); serr != nil {
		return x.fail(i, serr, start, true)
	}
	sl.set(StatusCompleted, start, fin)
	sl.Result = excerpt(res)
	if n.hits > 0 {
		x.obs.cached(st, n.hits)
	}
	x.obs.completed(st, res, nil, fin.Sub(start))
	return stepState{status: StatusCompleted, bound: true, value: res}
}

// fail ends step i with err: the run fails with it.
func (x *execution) fail(i int, err error, start time.Time, ran bool) stepState {
	st := x.c.steps[i].step
	fin := time.Now()
	var d time.Duration
	if ran {
		d = fin.Sub(start)
	}
	se := &StepError{Step: st.ID, Err: err}
	if f := failure.FaultOf(err); f != nil && f.Step == "" {
		f.Step = st.ID
	}
	cl := failure.ClassOf(err)
	sl := &x.log.Steps[i]
	sl.set(StatusFailed, start, fin)
	if !ran {
		sl.DurationMS = 0
	}
	sl.Error, sl.Class = err.Error(), cl
	x.obs.failed(st, se, d)
	return stepState{status: StatusFailed, err: se, errText: err.Error(), class: cl}
}

func (x *execution) skip(i int, reason string, start time.Time) stepState {
	st := x.c.steps[i].step
	fin := time.Now()
	ck := Checkpoint{Status: StatusSkipped, Reason: reason, Skill: x.ref, Attempt: x.r.Attempt, Started: start, Finished: fin,
		Kind: x.c.steps[i].kind, Final: x.final == i}
	if err := x.save(st.ID, ck); err != nil {
		return x.fail(i, err, start, false)
	}
	sl := &x.log.Steps[i]
	sl.set(StatusSkipped, start, fin)
	sl.Reason = reason
	x.obs.skipped(st, reason)
	return stepState{status: StatusSkipped}
}

func (x *execution) save(stepID string, ck Checkpoint) error {
	if x.checkpoints == nil {
		return nil
	}
	ctx := x.ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
	}
	if err := x.checkpoints.Save(ctx, x.r.ExecutionID, stepID, ck); err != nil {
		return failure.Wrap(classOr(err, failure.Retryable), fmt.Errorf("checkpoint: %w", err))
	}
	return nil
}

// body runs the step's tool call or compute block, once per loop item, with its
// on_error retries, within the step's timeout.
func (x *execution) body(ctx context.Context, cs *cstep, env expr.Env, n *calls) (v any, err error) {
	st := cs.step
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(st.Timeout), &TimeoutError{Step: st.ID, Limit: time.Duration(st.Timeout)})
		defer cancel()
	}
	// A failure under a context a timeout ended says which timeout, and how
	// long it was: the step's or the skill's.
	defer func() { err = timedOut(ctx, err) }()
	key := x.r.ExecutionID + "/" + st.ID
	if cs.loop == nil {
		return x.attempt(ctx, key, cs, env, n)
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
	out := make([]any, 0, len(items))
	for i, it := range items {
		if err := x.stop.Err(); err != nil && i > 0 {
			return nil, fmt.Errorf("loop item %d not started: %w", i, err)
		}
		env[name] = it // env is this step's own
		v, err := x.attempt(ctx, key+"/"+strconv.Itoa(i), cs, env, n)
		if err != nil {
			return nil, fmt.Errorf("loop item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// attempt runs the step's body once, and again at once on retryable failures when
// on_error is retry:N.
func (x *execution) attempt(ctx context.Context, key string, cs *cstep, env expr.Env, n *calls) (any, error) {
	for try := 0; ; try++ {
		v, err := x.once(ctx, key, cs, env, n)
		if err == nil {
			if held := x.held.Add(sizeOf(v)); held > x.e.maxResult {
				return nil, failure.Fatalf("result_too_large: step %s: the run's results reach %d bytes; a run holds at most %d bytes of results", cs.step.ID, held, x.e.maxResult)
			}
		}
		if err == nil || cs.onError != "retry" || try >= cs.retries || ctx.Err() != nil || x.stop.Err() != nil || failure.ClassOf(err) != failure.Retryable {
			return v, err
		}
	}
}

// sizeOf estimates the bytes a result holds: its strings and byte slices, and a
// few bytes for every other value. It walks what tools and compute blocks return
// (JSON-shaped values) without copying them.
func sizeOf(v any) int64 {
	switch v := v.(type) {
	case string:
		return int64(len(v)) + 16
	case []byte:
		return int64(len(v)) + 24
	case map[string]any:
		n := int64(48)
		for k, e := range v {
			n += int64(len(k)) + 16 + sizeOf(e)
		}
		return n
	case []any:
		n := int64(24)
		for _, e := range v {
			n += sizeOf(e)
		}
		return n
	default:
		return 16
	}
}

func (x *execution) once(ctx context.Context, key string, cs *cstep, env expr.Env, n *calls) (any, error) {
	st := cs.step
	if cs.compute != nil {
		v, err := cs.compute.Run(ctx, env)
		var xe *expr.Error
		if err != nil && st.ComputeLine > 0 && x.r.Skill != nil && x.r.Skill.Workflow != nil && x.r.Skill.Workflow.Source != "" && errors.As(err, &xe) {
			xe.File, xe.FileLine = x.r.Skill.Workflow.Source, st.ComputeLine
		}
		return v, err
	}
	if cs.kind == "sleep" {
		return nil, nil // woken: a sleep's result is null
	}
	if cs.kind == "wait" {
		return x.waited(st)
	}
	t, ok := x.tools.Lookup(st.Tool)
	if !ok {
		return nil, failure.Fatalf("tool %q is not available on this worker (it has: %s)", st.Tool, strings.Join(x.tools.Names(), ", "))
	}
	var args map[string]any
	if cs.args != nil {
		v, err := cs.args.Eval(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("args: %w", err)
		}
		args, _ = v.(map[string]any)
	}
	var ckey string
	if st.Cache > 0 && x.cache != nil {
		if ckey = CacheKey(x.r.Skill.Name, st.ID, st.Tool, args); ckey != "" {
			v, ok, err := x.cache.Get(ctx, ckey)
			switch {
			case err != nil:
				x.e.log.Warn("workflow: cache get failed; calling the tool", "step", st.ID, "key", ckey, "err", err)
			case ok:
				n.hits++
				return v, nil
			}
		}
	}
	n.made++
	call := tool.Call{Args: args, ExecutionID: x.r.ExecutionID, Step: st.ID, IdempotencyKey: key}
	if !tool.IsReadOnly(t, call) {
		n.writes++
	}
	v, err := t.Call(ctx, call)
	if err == nil && ckey != "" {
		if perr := x.cache.Put(ctx, ckey, v, time.Duration(st.Cache)); perr != nil {
			x.e.log.Warn("workflow: cache put failed", "step", st.ID, "key", ckey, "err", perr)
		}
	}
	return v, err
}

// wakeTime is when a sleep step ends: now plus sleep, or sleep_until rendered.
func (x *execution) wakeTime(cs *cstep, env expr.Env) (time.Time, error) {
	now := time.Now()
	until := now.Add(time.Duration(cs.step.Sleep))
	if cs.until != nil {
		v, err := cs.until.Eval(x.ctx, env)
		if err != nil {
			return time.Time{}, fmt.Errorf("sleep_until: %w", err)
		}
		s := text(v)
		if until, err = time.Parse(time.RFC3339, s); err != nil {
			return time.Time{}, failure.Fatalf("sleep_until: %q is not an RFC 3339 time (2026-01-02T15:04:05Z)", s)
		}
	}
	if max := x.r.MaxSleep; max > 0 && until.Sub(now) > max {
		return time.Time{}, failure.Fatalf("sleep until %s is too far ahead: a run can sleep at most %s (the events stream's retention)", until.UTC().Format(time.RFC3339), max.Round(time.Minute))
	}
	return until, nil
}

// errorText is what later steps see of a step that failed with on_error: continue:
// its error, marked as MCP-style tools mark failures, so that the auto-heal
// pattern's `'❌' in str(create_branch)` detects it.
func errorText(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "❌") {
		return msg
	}
	return "❌ " + msg
}

// text renders a template's value as a string: a single {{ expr }} gives the native
// value.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
