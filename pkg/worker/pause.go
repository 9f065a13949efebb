package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// pause parks an execution that waits for a confirmation, because a human may take
// hours and must not hold a worker: the job is
// kept in a paused record, confirmation.requested tells people, a scheduled message
// will deny it at the deadline, and the job is acked — no worker waits. A router
// publishes the job again when the answer arrives (package router).
func (w *Worker) pause(ctx context.Context, j *job, p *workflow.PausedError) error {
	if p.Wait != nil {
		return w.waitForEvent(ctx, j, p)
	}
	if !p.Until.IsZero() {
		return w.sleep(ctx, j, p)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = w.cfg.ConfirmTimeout
	}
	// The denial is a message in EVENTS; it must fire before EVENTS would expire it.
	if limit := w.cfg.Bus.Config().EventsMaxAge - time.Minute; timeout > limit {
		w.cfg.Log.Warn("worker: confirmation timeout capped at the events retention", "execution", j.data.ExecutionID, "asked", timeout, "capped", limit)
		timeout = limit
	}
	deadline := time.Now().Add(timeout).Truncate(time.Second).Add(time.Second)
	jobData, err := json.Marshal(j.data)
	if err != nil {
		return err
	}
	b, subj := w.cfg.Bus, w.cfg.Bus.Subjects
	rec, err := json.Marshal(run.Paused{
		ExecutionID: j.data.ExecutionID, Step: p.Step, Subject: j.msg.Subject(), Job: jobData,
		Meta:      map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		TimeoutAt: deadline, Message: p.Message, Log: j.logJSON(),
	})
	if err != nil {
		return err
	}
	j.batch.Put(b.BucketRuns(), events.RunPausedKey(j.data.ExecutionID), rec)
	w.emit(j, events.TypeConfirmationRequested, "", events.ConfirmationRequested{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID, Skill: j.data.Skill.Name,
		StepID: p.Step, Message: p.Message, Default: p.Default, TimeoutAt: deadline,
	})
	denial, err := bus.Event{
		ID: j.data.ExecutionID + ".confirmation.timeout." + p.Step, Source: w.cfg.Source, Type: events.TypeConfirmationRecorded,
		Meta: bus.Meta{CorrelationID: j.meta.CorrelationID, ExecutionID: j.data.ExecutionID},
		Data: events.ConfirmationRecorded{ExecutionID: j.data.ExecutionID, StepID: p.Step,
			Answer: events.Answer{By: "timeout", Reason: "no answer within " + timeout.String()}},
		// Published by the server at the deadline: that is when it is denied.
		Time: deadline,
	}.Msg(subj.ConfirmationTimeout(j.data.ExecutionID, p.Step))
	if err != nil {
		return err
	}
	j.batch.Publish(denial, jetstream.WithScheduleAt(deadline), jetstream.WithScheduleTarget(subj.Event(j.data.ExecutionID, events.TypeConfirmationRecorded)))
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	w.cfg.Log.Info("worker: execution paused for confirmation", "execution", j.data.ExecutionID, "step", p.Step, "until", deadline)
	return j.msg.Ack()
}
