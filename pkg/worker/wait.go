package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// waitForEvent parks an execution at a wait_for_event step as sleep parks one at
// a sleep, so a waiting run holds no worker slot. Besides the paused record (of
// kind wait) it writes the wait record routers watch (run.Wait) and schedules
// the timeout: an io.skillbus.wait.ended, not approved, at the deadline. A router
// that routes a matching trigger publishes a wait.ended with the event's data;
// whichever of the two a router handles first resumes the job (package router).
func (w *Worker) waitForEvent(ctx context.Context, j *job, p *workflow.PausedError) error {
	wt := p.Wait
	timeout := wt.Timeout
	// The timeout is a message in EVENTS; it must fire before EVENTS would expire it.
	if limit := w.cfg.Bus.Config().EventsMaxAge - time.Minute; timeout > limit {
		w.cfg.Log.Warn("worker: wait_for_event timeout capped at the events retention", "execution", j.data.ExecutionID, "asked", timeout, "capped", limit)
		timeout = limit
	}
	deadline := time.Now().Add(timeout).Truncate(time.Second).Add(time.Second)
	rec, err := waitRecord(j.data.ExecutionID, p.Step, wt, deadline, j.meta.CorrelationID)
	if err != nil {
		// A step result that does not encode cannot be matched against.
		return fmt.Errorf("wait_for_event %s: %w", p.Step, err)
	}
	jobData, err := json.Marshal(j.data)
	if err != nil {
		return err
	}
	b, subj := w.cfg.Bus, w.cfg.Bus.Subjects
	paused, err := json.Marshal(run.Paused{
		ExecutionID: j.data.ExecutionID, Step: p.Step, Kind: run.PausedWait, Subject: j.msg.Subject(), Job: jobData,
		Meta:      map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		TimeoutAt: deadline, Message: "waiting for event " + wt.Type, Log: j.logJSON(),
	})
	if err != nil {
		return err
	}
	j.batch.Put(b.BucketRuns(), events.RunPausedKey(j.data.ExecutionID), paused)
	j.batch.Put(b.BucketRuns(), events.RunWaitKey(j.data.ExecutionID), rec)
	expire, err := bus.Event{
		ID: j.data.ExecutionID + ".wait.timeout." + p.Step, Source: w.cfg.Source, Type: events.TypeWaitEnded,
		Meta: bus.Meta{CorrelationID: j.meta.CorrelationID, ExecutionID: j.data.ExecutionID},
		Data: events.WaitEnded{ExecutionID: j.data.ExecutionID, StepID: p.Step, Answer: events.Answer{
			By: "timeout", Reason: fmt.Sprintf("no %s event matched within %s", wt.Type, timeout)}, EventType: wt.Type},
		// Published by the server at the deadline: that is when the wait ends.
		Time: deadline,
	}.Msg(subj.WaitTimer(j.data.ExecutionID, p.Step))
	if err != nil {
		return err
	}
	j.batch.Publish(expire, jetstream.WithScheduleAt(deadline), jetstream.WithScheduleTarget(subj.Event(j.data.ExecutionID, events.TypeWaitEnded)))
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	w.cfg.Log.Info("worker: execution waiting for an event", "execution", j.data.ExecutionID, "step", p.Step, "type", wt.Type, "until", deadline)
	return j.msg.Ack()
}

// waitRecord encodes the run.Wait of a parked wait_for_event.
func waitRecord(executionID, step string, wt *workflow.EventWait, deadline time.Time, correlation string) ([]byte, error) {
	rec := run.Wait{ExecutionID: executionID, Step: step, Type: wt.Type, Match: wt.Match, TimeoutAt: deadline, CorrelationID: correlation}
	var err error
	if wt.Inputs != nil {
		if rec.Inputs, err = json.Marshal(wt.Inputs); err != nil {
			return nil, fmt.Errorf("inputs: %w", err)
		}
	}
	for name, v := range wt.Steps {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("result of %s: %w", name, err)
		}
		if rec.Steps == nil {
			rec.Steps = make(map[string]json.RawMessage, len(wt.Steps))
		}
		rec.Steps[name] = raw
	}
	return json.Marshal(rec)
}
