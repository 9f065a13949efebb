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

// sleep parks an execution at a sleep step as pause parks one at a confirmation,
// so a sleeping run holds no worker slot: the job is kept in a paused record of
// kind sleep, a message scheduled for the wake-up time will end the sleep
// (io.skillbus.wait.ended), and the job is acked. A router publishes the job again
// when that message fires (package router), and the run resumes from its
// checkpoints with the sleep step done.
func (w *Worker) sleep(ctx context.Context, j *job, p *workflow.PausedError) error {
	// Scheduled messages fire at whole seconds; never wake early.
	until := p.Until.Truncate(time.Second)
	if until.Before(p.Until) {
		until = until.Add(time.Second)
	}
	jobData, err := json.Marshal(j.data)
	if err != nil {
		return err
	}
	b, subj := w.cfg.Bus, w.cfg.Bus.Subjects
	rec, err := json.Marshal(run.Paused{
		ExecutionID: j.data.ExecutionID, Step: p.Step, Kind: run.PausedSleep, Subject: j.msg.Subject(), Job: jobData,
		Meta:      map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		TimeoutAt: until, Message: p.Message, Log: j.logJSON(),
	})
	if err != nil {
		return err
	}
	j.batch.Put(b.BucketRuns(), events.RunPausedKey(j.data.ExecutionID), rec)
	wake, err := bus.Event{
		ID: j.data.ExecutionID + ".wait.woke." + p.Step, Source: w.cfg.Source, Type: events.TypeWaitEnded,
		Meta: bus.Meta{CorrelationID: j.meta.CorrelationID, ExecutionID: j.data.ExecutionID},
		Data: events.WaitEnded{ExecutionID: j.data.ExecutionID, StepID: p.Step, Answer: events.Answer{Approved: true, By: run.PausedSleep}},
		// Published by the server at until: that is when the sleep ends.
		Time: until,
	}.Msg(subj.WaitTimer(j.data.ExecutionID, p.Step))
	if err != nil {
		return err
	}
	j.batch.Publish(wake, jetstream.WithScheduleAt(until), jetstream.WithScheduleTarget(subj.Event(j.data.ExecutionID, events.TypeWaitEnded)))
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	w.cfg.Log.Info("worker: execution sleeping", "execution", j.data.ExecutionID, "step", p.Step, "until", until)
	return j.msg.Ack()
}
