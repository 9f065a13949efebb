package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// checkpoints keeps a job's step checkpoints as its step.completed and step.skipped
// events: the event that reports a step is the step's durable record (not a record
// in KV runs: the events carry exactly the same data, so writing both would be a
// second persisted hop per step for nothing). A redelivered or resumed job reads them
// back from EVENTS. That stream keeps them for EventsMaxAge (7 days), longer than any
// execution stays unfinished: retries back off for minutes and a confirmation's
// timeout is capped below it (see pause).
//
// Saves are queued on the job's batch — pipelined, not a round trip each — and, like
// everything else the job causes, acknowledged before the job is. A step that runs
// after a save was queued but before it was acknowledged gains nothing from the
// checkpoint if the worker dies in between; it runs again, with the same idempotency
// key, as it would after a synchronous save that died one instruction later.
type checkpoints struct {
	w *Worker
	j *job
	// fresh: this delivery is the execution's first, so there is nothing to load.
	fresh bool
}

// checkpoints returns the job's checkpoints, kept in the job.
func (j *job) checkpoints(w *Worker) *checkpoints {
	j.cps = checkpoints{w: w, j: j, fresh: j.fast}
	return &j.cps
}

func (c *checkpoints) Load(ctx context.Context, executionID string) (map[string]workflow.Checkpoint, error) {
	if c.fresh {
		return nil, nil // nothing saved yet
	}
	out := map[string]workflow.Checkpoint{}
	b := c.w.cfg.Bus
	// Each step's events, read message by message with the stream's next-by-subject
	// get (the server finds them through its index of subjects): no consumer to
	// create and delete per delivery, which cost a run on the claim path fifteen
	// times a fast one. Applied in the order stored: later events of a step win.
	var msgs []*jetstream.RawStreamMsg
	for _, typ := range [...]string{events.TypeStepCompleted, events.TypeStepSkipped} {
		subj := b.Subjects.Event(executionID, typ)
		for seq := uint64(1); ; {
			m, err := c.w.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, failure.Wrap(failure.Retryable, fmt.Errorf("load checkpoints: %w", err))
			}
			msgs = append(msgs, m)
			seq = m.Sequence + 1
		}
	}
	slices.SortFunc(msgs, func(a, b *jetstream.RawStreamMsg) int { return cmp.Compare(a.Sequence, b.Sequence) })
	for _, m := range msgs {
		e, err := bus.DecodeFast(bus.MsgOf(m.Subject, m.Header, m.Data))
		if err != nil {
			continue // a checkpoint we cannot read is a step we run again
		}
		if id, cp, ok := checkpointOf(e.Type, e.Data); ok {
			out[id] = cp
		}
	}
	return c.w.reuse(ctx, c.j, out), nil
}

func checkpointOf(typ string, data []byte) (string, workflow.Checkpoint, bool) {
	switch typ {
	case events.TypeStepCompleted:
		var d events.StepCompleted
		if json.Unmarshal(data, &d) != nil || d.Status == "" {
			return "", workflow.Checkpoint{}, false
		}
		cp := workflow.Checkpoint{Status: workflow.Status(d.Status), Result: d.Result, Error: d.Error, Class: failure.Class(d.Class),
			Cached: d.Cached, Calls: d.Calls, Skill: d.SkillRef, Attempt: d.Attempt, Started: d.Started, Finished: d.Finished}
		if cp.Status == workflow.StatusContinued {
			cp.Result = continuedResult(d.Error)
		}
		return d.StepID, cp, true
	case events.TypeStepSkipped:
		var d events.StepSkipped
		if json.Unmarshal(data, &d) != nil || d.SkillRef == "" {
			return "", workflow.Checkpoint{}, false
		}
		return d.StepID, workflow.Checkpoint{Status: workflow.StatusSkipped, Reason: d.Reason, Skill: d.SkillRef, Attempt: d.Attempt, Finished: d.Finished}, true
	}
	return "", workflow.Checkpoint{}, false
}

// continuedResult is what later steps see of a step that failed with on_error:
// continue: its error text, marked as the engine marks it.
func continuedResult(msg string) string {
	if strings.HasPrefix(msg, "❌") {
		return msg
	}
	return "❌ " + msg
}

// Save publishes the step's event, which is its checkpoint. Whether it is persisted
// depends on the events level: at "full" always; at "steps" only where it saves
// work a redelivery would otherwise repeat — a tool step (a side effect) that is not
// the run's last (the outcome follows a last step at once, and records it); at
// "terminal" never. Conditions and compute blocks are evaluated again on a
// redelivery instead: they are deterministic over the checkpointed results.
//
// A result larger than the server accepts fails the step once, fatally, with
// result_too_large: retrying would only hit the same limit.
func (c *checkpoints) Save(_ context.Context, executionID, stepID string, cp workflow.Checkpoint) error {
	var persist bool
	switch c.w.cfg.Events {
	case events.LevelFull:
		persist = true
	case events.LevelSteps:
		// Kept only where a redelivery must not do the step again: a step that
		// acted (a call that did not only read), with more of the run to come.
		persist = cp.Status != workflow.StatusSkipped && cp.Kind != "compute" && !cp.Final && !cp.ReadOnly
	}
	if !persist && !c.j.data.Live {
		return nil // neither kept nor followed: nothing to build
	}
	st := &skill.Step{ID: stepID}
	o := &observer{w: c.w, j: c.j}
	var err error
	if cp.Status == workflow.StatusSkipped {
		err = c.w.publish(c.j, o.id(st, "skipped"), events.TypeStepSkipped, events.StepSkipped{
			ExecutionID: executionID, StepID: stepID, Reason: cp.Reason, SkillRef: cp.Skill, Attempt: cp.Attempt, Finished: cp.Finished,
		}, persist)
	} else {
		err = c.w.publish(c.j, o.id(st, "completed"), events.TypeStepCompleted, stepCompleted(executionID, stepID, cp, false), persist)
	}
	var tl *bus.TooLargeError
	if errors.As(err, &tl) {
		return failure.Fatalf("step %s: %v", stepID, err)
	}
	return err
}

func stepCompleted(executionID, stepID string, cp workflow.Checkpoint, resumed bool) events.StepCompleted {
	ev := events.StepCompleted{
		ExecutionID: executionID, StepID: stepID, Success: cp.Status == workflow.StatusCompleted, Status: string(cp.Status),
		Result: cp.Result, Error: cp.Error, Class: string(cp.Class), DurationMS: ms(cp.Finished.Sub(cp.Started)),
		Resumed: resumed, Cached: cp.Cached, Calls: cp.Calls, SkillRef: cp.Skill, Attempt: cp.Attempt, Started: cp.Started, Finished: cp.Finished,
	}
	if cp.Status == workflow.StatusContinued {
		ev.Result = nil
	}
	return ev
}

// cache keeps step results in KV cache with a TTL per key.
type cache struct {
	kv jetstream.KeyValue
}

func (c *cache) Get(ctx context.Context, key string) (any, bool, error) {
	e, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var v any
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return nil, false, nil
	}
	return v, true, nil
}

func (c *cache) Put(ctx context.Context, key string, v any, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.kv.Create(ctx, key, b, jetstream.KeyTTL(max(ttl, time.Second)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil // another execution cached it first
	}
	return err
}
