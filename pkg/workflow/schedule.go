package workflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// execution is one Run in progress. The goroutine that called Execute coordinates:
// it alone reads and writes state, starts steps when what they wait for
// has finished, and takes their outcomes from a channel. Steps that run together run
// in goroutines of their own; each step has its own Env and writes only its own
// entry of the log.
type execution struct {
	held        atomic.Int64 // bytes of step results held (see Config.MaxResultBytes)
	e           *Engine
	tools       *tool.Set
	c           *compiled
	r           Run
	ctx         context.Context
	log         *Log
	obs         *syncObserver // &sync
	sync        syncObserver
	checkpoints Checkpoints
	cache       Cache
	// stop, when the caller put one on the context (tool.WithStop), ends the run
	// at its next step boundary: no step starts once it is requested.
	stop *tool.Stop
	ref  string // skill version, for checkpoints
	// final is the step running alone with no other step left to run, or -1;
	// written by the coordinator only while no step runs in a goroutine.
	final int
	base  expr.Env
	saved map[string]Checkpoint

	state []stepState
	one   [1]stepState // state of a workflow of one step, the usual case
	spare []stepState  // states kept from an earlier run of this execution, cleared
	// done carries the outcomes of steps run on goroutines of their own; kept,
	// empty, from an earlier run, or made when a step first runs so.
	done chan outcome
}

type stepState struct {
	status  Status // "" while pending
	running bool
	bound   bool // value is what later steps see under the step's names
	value   any
	err     error // StatusFailed: the *StepError; StatusContinued: the step's error
	errText string
	class   failure.Class
	pause   *PausedError // StatusWaiting
	// taint lists the steps that failed with on_error: continue whose failure the
	// step's result carries: the step itself if it failed so, or what the steps a
	// compute step read carry. See AutoHeal. Set by settle.
	taint []int
}

type outcome struct {
	i  int
	st stepState
}

// finish runs the workflow from its checkpoints, if any, and returns its result.
func (x *execution) finish() (map[string]any, error) {
	if err := x.load(); err != nil {
		return nil, err
	}
	x.run()
	return x.result()
}

// load reads the run's checkpoints, if it has a store and an id.
func (x *execution) load() error {
	if x.checkpoints == nil || x.r.ExecutionID == "" {
		x.checkpoints = nil
		return nil
	}
	saved, err := x.checkpoints.Load(x.ctx, x.r.ExecutionID)
	if err != nil {
		return failure.Wrap(classOr(err, failure.Retryable), fmt.Errorf("load checkpoints: %w", err))
	}
	for id, ck := range saved {
		if ck.Skill != "" && ck.Skill != x.ref {
			x.e.log.Warn("workflow: checkpoints of another skill version ignored; the run starts over",
				"execution", x.r.ExecutionID, "step", id, "checkpoint", ck.Skill, "skill", x.ref)
			return nil
		}
	}
	x.saved = saved
	return nil
}

// run starts every step whose dependencies have finished, lowest index first and at
// most maxParallel at a time, until nothing runs and nothing can start. Steps done
// in an earlier attempt are settled from their checkpoints before any step starts,
// so they are reported first, in list order. A step that would run alone runs on
// this goroutine: a sequential workflow needs no other, and its expressions do not
// pay for growing a fresh goroutine's stack.
func (x *execution) run() {
	n := len(x.c.steps)
	var done chan outcome // made when a step first runs on a goroutine of its own
	running := 0
	var buf [8]int
	startable := buf[:0]
	for {
		if x.saved != nil {
			for i := range n {
				if x.pending(i) {
					if ready, _ := x.readiness(i); ready {
						x.resume(i)
					}
				}
			}
		}
		startable = startable[:0]
		for i := range n {
			if !x.pending(i) {
				continue
			}
			ready, blocker := x.readiness(i)
			switch {
			case blocker >= 0:
				x.notRun(i, blocker)
			case !ready:
				// waits
			case x.ctx.Err() != nil:
				x.state[i].status = StatusNotRun
				x.log.Steps[i].Reason = "the run was stopped: " + x.ctx.Err().Error()
				if te := timeoutOf(x.ctx); te != nil {
					x.log.Steps[i].Reason = "the run was stopped by " + te.Error()
				}
			case x.stop.Err() != nil:
				x.state[i].status = StatusNotRun
				x.log.Steps[i].Reason = "the run was stopped: " + x.stop.Err().Error()
			case running+len(startable) < x.e.maxParallel:
				startable = append(startable, i)
			}
		}
		if running == 0 && len(startable) == 1 {
			i := startable[0]
			x.final = i
			for k := range n {
				if k != i && x.pending(k) {
					x.final = -1
					break
				}
			}
			env, heal, retryOf := x.prepare(i)
			s := x.step(i, env, heal, retryOf)
			x.final = -1
			x.settle(i, s)
			continue
		}
		if done == nil && len(startable) > 0 {
			if cap(x.done) < n {
				x.done = make(chan outcome, n)
			}
			done = x.done
		}
		for _, i := range startable {
			x.start(i, done)
			running++
		}
		if running == 0 {
			return
		}
		o := <-done
		running--
		x.settle(o.i, o.st)
	}
}

func (x *execution) pending(i int) bool { return x.state[i].status == "" && !x.state[i].running }

// readiness reports whether every step i waits for has finished, and if so whether
// one of them (the first in list order: blocker ≥ 0) failed, waits for a
// confirmation or did not run, so that i will not run either. Waiting for all of
// them before deciding keeps the reason independent of timing.
func (x *execution) readiness(i int) (ready bool, blocker int) {
	blocker = -1
	for _, d := range x.c.steps[i].deps {
		switch x.state[d].status {
		case "":
			return false, -1
		case StatusFailed, StatusWaiting, StatusNotRun:
			if blocker < 0 {
				blocker = d
			}
		}
	}
	return blocker < 0, blocker
}

func (x *execution) notRun(i, blocker int) {
	x.state[i].status = StatusNotRun
	b := x.c.steps[blocker].step.ID
	var why string
	switch x.state[blocker].status {
	case StatusFailed:
		why = "step " + b + " failed"
	case StatusWaiting:
		why = "step " + b + " " + waitsFor(x.state[blocker].pause)
	default:
		why = "step " + b + " did not run"
	}
	x.log.Steps[i].Reason = why
}

// waitsFor says what a step that parked its run with p waits for: "sleeps until
// T", "waits for a T event" or "waits for a confirmation".
func waitsFor(p *PausedError) string {
	switch {
	case p == nil:
		return "waits"
	case p.Wait != nil:
		return "waits for a " + p.Wait.Type + " event"
	case !p.Until.IsZero():
		return "sleeps until " + p.Until.UTC().Format(time.RFC3339)
	}
	return "waits for a confirmation"
}

// resume settles step i from its checkpoint, if it has one.
func (x *execution) resume(i int) bool {
	st := x.c.steps[i].step
	ck, ok := x.saved[st.ID]
	if !ok {
		return false
	}
	s := stepState{status: ck.Status}
	switch ck.Status {
	case StatusCompleted:
		s.bound, s.value = true, ck.Result
	case StatusContinued:
		s.bound, s.value = true, ck.Result
		s.errText, s.class = ck.Error, ck.Class
	case StatusSkipped:
	default:
		return false // not a status Save is given; run the step
	}
	x.log.Steps[i].fromCheckpoint(ck)
	x.obs.resumed(st, ck)
	x.settle(i, s)
	return true
}

// prepare gives step i, about to start, its Env and its part in an auto-heal.
func (x *execution) prepare(i int) (expr.Env, *AutoHeal, string) {
	env := x.base // read, never written, by a step that follows none and loops over nothing
	if len(x.c.steps[i].anc) > 0 || x.c.steps[i].step.Loop != "" {
		env = x.envFor(x.c.steps[i].anc)
	}
	heal, retryOf := x.healFor(i, env)
	return env, heal, retryOf
}

func (x *execution) start(i int, done chan<- outcome) {
	env, heal, retryOf := x.prepare(i)
	x.state[i].running = true
	go func() {
		done <- outcome{i: i, st: x.step(i, env, heal, retryOf)}
	}()
}

// settle records a finished step and what its failure taints.
func (x *execution) settle(i int, s stepState) {
	x.state[i] = s
	cs := &x.c.steps[i]
	switch {
	case s.status == StatusContinued:
		x.state[i].taint = []int{i}
	case s.status == StatusCompleted && cs.kind == "compute":
		var t []int
		for _, k := range cs.refs {
			t = union(t, x.state[k].taint)
		}
		x.state[i].taint = t
	}
}

// envFor is the Env of a step that sees the given steps: the run's names, then each
// step's result under its id and output name, in list order, so that of two steps
// writing one output name the later one wins whatever finished first.
func (x *execution) envFor(steps []int) expr.Env {
	env := make(expr.Env, len(x.base)+2*len(steps)+1)
	maps.Copy(env, x.base)
	for _, j := range steps {
		s := &x.state[j]
		if !s.bound {
			continue
		}
		st := x.c.steps[j].step
		env[st.ID] = s.value
		if st.Output != "" {
			env[st.Output] = s.value
		}
	}
	return env
}

// result is the run's outcome once nothing more can run: the failure of the first
// failed step in list order, else the first waiting step's question, else the
// outputs.
func (x *execution) result() (map[string]any, error) {
	for i := range x.state {
		if x.state[i].status == StatusFailed {
			return nil, x.state[i].err
		}
	}
	for i := range x.state {
		if x.state[i].status == StatusWaiting {
			x.log.Waiting = x.c.steps[i].step.ID
			return nil, x.state[i].pause
		}
	}
	for i := range x.state {
		if x.state[i].status == StatusNotRun {
			// Only a stopped context or a requested stop leaves a step unrun without
			// a failed or waiting step before it.
			why := stopped(x.ctx)
			if why == nil {
				why = x.stop.Err()
			}
			return nil, &StepError{Step: x.c.steps[i].step.ID, Err: fmt.Errorf("not started: %w", why)}
		}
	}
	if len(x.c.outputs) == 0 {
		out := make(map[string]any, len(x.state))
		for i := range x.state {
			if x.state[i].bound {
				out[resultName(x.c.steps[i].step.ID, x.c.steps[i].step.Output)] = x.state[i].value
			}
		}
		return out, nil
	}
	env := x.base // read, never written, by outputs that read no step
	if len(x.c.outSteps) > 0 {
		env = x.envFor(x.c.outSteps)
	}
	out := make(map[string]any, len(x.c.outputs))
	for _, o := range x.c.outputs {
		v, err := o.value.Eval(x.ctx, env)
		if err != nil {
			return nil, failure.Wrap(failure.ClassOf(err), fmt.Errorf("output %s: %w", o.name, err))
		}
		out[o.name] = v
	}
	return out, nil
}

func resultName(id, output string) string {
	if output != "" {
		return output
	}
	return id
}

func classOr(err error, def failure.Class) failure.Class {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return fe.Class
	}
	return def
}
