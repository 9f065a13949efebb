package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	execctl "github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// Execution control: cancelled executions and paused skills.
//
// Both are records in KV runs that anyone may write (package control does, for
// the CLI and the console): a run.Cancel under <execution>.cancel, a run.Hold
// under skill.<name>.hold. Every worker watches them and keeps them in memory, so
// a job pays one atomic load when nothing is cancelled or paused, and a map
// lookup otherwise: no I/O on the fast path. Start reads every record before the
// first job is taken, so a worker started after a cancel honours it.
//
// Cancel. A job whose execution is cancelled is not run: its outcome is
// execution.cancelled, published like any outcome (under run.OutcomeID, so an
// execution that completes at the same moment still has exactly one outcome).
// A cancel that arrives while the execution runs in this worker stops it at its
// next step boundary (tool.Stop): no further step starts, and the processes of a
// running exec step get SIGTERM, then SIGKILL after CancelGrace. A run that
// completes all the same stays completed. The watch may lag a write by a moment,
// so the claim path, which does I/O anyway, also reads the execution's record.
//
// Pause. A job of a paused skill is set aside: its job is kept whole in a
// run.Held record and the message is acked, so it holds no worker slot, no
// MaxAckPending place and burns no retry; resuming the skill (package control)
// publishes each held job again. The held record and the skill's hold are exempt
// from KV runs' TTL (control.PutKept): a pause lasts as long as it must. A worker
// that finds, after writing the held record, that the skill was resumed meanwhile
// takes its record back and runs the job through the claim path, since resume
// may have published a copy.

// control is this worker's copy of the cancel and hold records.
type control struct {
	n       atomic.Int64 // records held: zero means nothing to look up
	mu      sync.RWMutex
	cancels map[string]*run.Cancel
	holds   map[string]*run.Hold
}

// cancelled returns the cancel request of an execution, or nil.
func (c *control) cancelled(executionID string) *run.Cancel {
	if c.n.Load() == 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cancels[executionID]
}

// held returns the hold of a paused skill, or nil.
func (c *control) held(skill string) *run.Hold {
	if c.n.Load() == 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.holds[skill]
}

// watchControl reads every cancel and hold record, then keeps following them
// until ctx ends.
// Start's ctx bounds only the first read.
func (w *Worker) watchControl(ctx context.Context) error {
	w.ctl.cancels, w.ctl.holds = map[string]*run.Cancel{}, map[string]*run.Hold{}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	kw, err := w.runs.WatchFiltered(wctx, []string{events.RunsCancelFilter, events.SkillsHoldFilter})
	if err != nil {
		cancel()
		return fmt.Errorf("worker: watch cancels and paused skills: %w", err)
	}
initial:
	for {
		select {
		case <-ctx.Done():
			_ = kw.Stop()
			cancel()
			return fmt.Errorf("worker: read cancels and paused skills: %w", ctx.Err())
		case e, ok := <-kw.Updates():
			if !ok || e == nil {
				break initial // the records as they are now, all read
			}
			w.applyControl(e)
		}
	}
	w.stopCtl = cancel
	ctx = wctx
	w.ctlWatch.Go(func() {
		defer kw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-kw.Updates():
				if !ok {
					return
				}
				if e != nil {
					w.applyControl(e)
				}
			}
		}
	})
	return nil
}

// cancelWatchHook, set by tests, holds back from the worker's copy the cancel
// records it returns true for: a watch that is behind.
var cancelWatchHook atomic.Pointer[func(executionID string) bool]

func (w *Worker) applyControl(e jetstream.KeyValueEntry) {
	del := e.Operation() != jetstream.KeyValuePut
	c := &w.ctl
	if id, ok := events.CancelledExecution(e.Key()); ok {
		if h := cancelWatchHook.Load(); h != nil && (*h)(id) {
			return
		}
		var rec run.Cancel
		if !del && json.Unmarshal(e.Value(), &rec) != nil {
			w.cfg.Log.Warn("worker: unreadable cancel record ignored", "key", e.Key())
			return
		}
		c.mu.Lock()
		_, had := c.cancels[id]
		if del {
			delete(c.cancels, id)
		} else {
			rec.ExecutionID = id
			c.cancels[id] = &rec
		}
		c.n.Store(int64(len(c.cancels) + len(c.holds)))
		c.mu.Unlock()
		// After the record is in the map: a delivery that reserved the execution
		// before this point is found here, one that reserves it after finds the
		// record (process checks after reserving).
		if !del && !had {
			if j := w.inflight.get(id); j != nil {
				if j.stop.Request(&rec) {
					w.cfg.Log.Info("worker: stopping a cancelled execution at its next step", "execution", id, "by", rec.By)
				}
			}
		}
		return
	}
	if name, ok := events.HeldSkill(e.Key()); ok {
		var rec run.Hold
		if !del && json.Unmarshal(e.Value(), &rec) != nil {
			w.cfg.Log.Warn("worker: unreadable paused-skill record ignored", "key", e.Key())
			return
		}
		c.mu.Lock()
		if del {
			delete(c.holds, name)
		} else {
			rec.Skill = name
			c.holds[name] = &rec
		}
		c.n.Store(int64(len(c.cancels) + len(c.holds)))
		c.mu.Unlock()
	}
}

// cancelOf returns the cancel request of j's execution: from memory, and on the
// claim path also from KV runs (the watch may be a moment behind a write).
func (w *Worker) cancelOf(ctx context.Context, j *job) (*run.Cancel, error) {
	if c := w.ctl.cancelled(j.data.ExecutionID); c != nil || j.fast {
		return c, nil
	}
	return run.LoadCancel(ctx, w.runs, j.data.ExecutionID)
}

// Cancelled: someone cancelled the execution; it ends with execution.cancelled.
type Cancelled struct {
	*run.Cancel
	// Started: the run had begun (false: cancelled before it ran).
	Started bool
}

func (Cancelled) decision() {}

// cancelledOf is the decision of a run that was stopped by a cancel, unless it
// completed all the same.
func (j *job) cancelledOf(d Decision) Decision {
	if _, done := d.(Complete); done {
		return d
	}
	var c *run.Cancel
	if errors.As(j.stop.Err(), &c) {
		return Cancelled{Cancel: c, Started: true}
	}
	return d
}

// cancelRun ends the execution as cancelled: its outcome, then the activation's end
// when it was the last of several jobs, then the ack.
func (w *Worker) cancelRun(ctx context.Context, j *job, d Cancelled) error {
	if err := w.ensureClaim(ctx, j); err != nil {
		return err
	}
	version := j.data.Skill.Version
	dur := time.Since(j.start)
	if j.log != nil {
		j.log.Cancel(d.Error()) // its step failed because of the cancel: not a failure of the run
	}
	ev := events.ExecutionCancelled{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID, Skill: j.data.Skill.Name, Version: version,
		By: d.By, Reason: d.Reason, Requested: d.At, Started: d.Started, StepID: stoppedStep(j.log),
		Attempt: j.attempt, DurationMS: ms(dur), Worker: w.cfg.Name, Log: j.logJSON(),
	}
	span, meta := w.outcomeSpan(ctx, j, events.TypeExecutionCancelled)
	m, err := w.outcomeMsg(j, meta, events.TypeExecutionCancelled, ev)
	if err != nil {
		ev.Log = nil // the log is what can grow
		m, err = w.outcomeMsg(j, meta, events.TypeExecutionCancelled, ev)
	}
	if err != nil {
		span.End()
		return err
	}
	lost, err := w.publishOutcome(ctx, j, span, m)
	if err != nil || lost {
		return err
	}
	w.dropCancelOn(ctx, j)
	w.cfg.Metrics.Execution(ctx, j.data.Skill.Name, version, run.StatusCancelled, dur)
	rec := &run.Record{ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID, Skill: j.data.Skill.Name,
		Version: version, Status: run.StatusCancelled, Error: d.Error()}
	if err := w.endActivation(ctx, j, rec); err != nil {
		return err
	}
	w.cfg.Log.Info("worker: execution cancelled", "execution", j.data.ExecutionID, "skill", j.data.Skill.Name, "by", d.By, "reason", d.Reason, "started", d.Started)
	return j.msg.Ack()
}

// stoppedStep is the step a stop cut short: the one that failed (an exec step
// signalled), if any.
func stoppedStep(l *workflow.Log) string {
	if l == nil {
		return ""
	}
	for _, s := range l.Steps {
		if s.Status == workflow.StatusFailed {
			return s.ID
		}
	}
	return ""
}

// hold sets j aside because its skill is paused: the job is kept in a run.Held
// record and acked. held is false when the skill turned out to be resumed
// meanwhile; j has then been claimed (resume may have published a copy of it)
// and runs.
func (w *Worker) hold(ctx context.Context, j *job, h *run.Hold) (held bool, err error) {
	data, err := json.Marshal(j.data)
	if err != nil {
		return false, err
	}
	rec, err := json.Marshal(run.Held{
		ExecutionID: j.data.ExecutionID, Skill: j.data.Skill.Name, Subject: j.msg.Subject(), Job: data,
		Meta: map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		At:   time.Now().UTC(),
	})
	if err != nil {
		return false, err
	}
	// Acked below, the job has no other copy: its record must outlive KV runs' TTL.
	key := events.RunHeldKey(j.data.ExecutionID)
	rev, err := execctl.PutKept(ctx, w.cfg.Bus, key, rec)
	if err != nil {
		return false, fmt.Errorf("hold the job of a paused skill: %w", err)
	}
	_, err = w.runs.Get(ctx, events.SkillHoldKey(j.data.Skill.Name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		// Resumed between the watch and the record: run it after all.
		if err := w.runs.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil && !isWrongLastSequence(err) {
			return false, err
		}
		if j.fast {
			j.fast = false
			if handled, err := w.claim(ctx, j); handled || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, claimed := j.claimRev(); claimed {
		// Handed back on purpose: whoever runs it after the resume claims it at
		// once, with the retries it had.
		if err := w.release(ctx, j, j.retries); err != nil {
			return false, err
		}
	}
	w.cfg.Log.Info("worker: job of a paused skill held until the skill is resumed", "execution", j.data.ExecutionID, "skill", j.data.Skill.Name)
	w.waiting(j, "pause", pauseDetail(h))
	return true, j.msg.Ack()
}

// pauseDetail says who paused the skill and why: "paused by ops: deploy".
func pauseDetail(h *run.Hold) string {
	d := "paused"
	if h.By != "" {
		d += " by " + h.By
	}
	if h.Reason != "" {
		d += ": " + h.Reason
	}
	return d + "; runs when the skill is resumed"
}
