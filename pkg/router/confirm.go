package router

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Confirmations: a worker that reaches a step needing a human's approval checkpoints,
// stores the job in KV runs as a paused record, publishes confirmation.requested and
// acks — no worker waits. An answer is a confirmation.recorded event on the
// execution's events subject (from `skillbus runs confirm`, any client, or the
// scheduled denial at the deadline). The router consumes those, publishes the paused
// job again with the answer, and removes the paused record and the pending timeout.
// An answer for a step the execution is not paused at (a late timeout, a second
// click) is acknowledged and ignored.

// ConfirmationsConsumerConfig is the durable consumer every router shares for answers.
func (r *Router) ConfirmationsConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     r.cfg.Durable + "-confirmations",
		Description: "skillbus routers: answers to confirmations, ends of sleeps",
		FilterSubjects: []string{
			r.cfg.Bus.Subjects.Event("*", events.TypeConfirmationRecorded),
			r.cfg.Bus.Subjects.Event("*", events.TypeWaitEnded),
		},
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   r.cfg.AckWait,
		// No delivery limit: an answer whose writes fail (a full store) comes
		// back with backoff until the run is resumed, as a trigger does.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

func (r *Router) startConfirmations(ctx context.Context) error {
	b := r.cfg.Bus
	var err error
	if r.runs, err = b.KV(ctx, b.BucketRuns()); err != nil {
		return err
	}
	if r.events, err = b.Stream(ctx, b.StreamEvents()); err != nil {
		return err
	}
	c, err := b.EnsureConsumer(ctx, b.StreamEvents(), r.ConfirmationsConsumerConfig())
	if err != nil {
		return fmt.Errorf("router: confirmations consumer: %w", err)
	}
	r.answers, err = bus.Consume(c, 4, r.handleAnswer, r.cfg.Log)
	return err
}

func (r *Router) handleAnswer(ctx context.Context, msg jetstream.Msg) {
	// The answer's CONSUMER span continues the answerer's trace (or starts one); it
	// links to the paused execution's span rather than continuing it, since that
	// ended when the execution paused, maybe hours ago.
	ctx, span := bustrace.StartConsume(ctx, msg,
		r.ConfirmationsConsumerConfig().Durable, nil)
	typ := events.TypeConfirmationRecorded
	if strings.HasSuffix(msg.Subject(), "."+events.Kind(events.TypeWaitEnded)) {
		typ = events.TypeWaitEnded
	}
	err := r.answer(ctx, bustrace.Settling(ctx, msg, r.cfg.Bus.Subjects.EventTemplate(typ)))
	telemetry.End(span, err)
	if err != nil {
		var n uint64 = 1
		if md, _ := msg.Metadata(); md != nil {
			n = md.NumDelivered
		}
		delay := r.retryDelay(n)
		lvl := slog.LevelWarn
		if n >= 3 {
			lvl = slog.LevelError
		}
		r.cfg.Log.Log(ctx, lvl, "router: confirmation answer not applied; will retry", "subject", msg.Subject(), "deliveries", n, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
	}
}

func (r *Router) answer(ctx context.Context, msg jetstream.Msg) error {
	e, err := bus.Decode(msg)
	// A wait.ended (see events.WaitEnded) has the shape of an answer.
	var d events.ConfirmationRecorded
	if err == nil {
		err = json.Unmarshal(e.Data(), &d)
	}
	if err == nil && (d.ExecutionID == "" || d.StepID == "") {
		err = fmt.Errorf("no execution_id or step_id")
	}
	if err != nil {
		r.cfg.Log.Error("router: unreadable confirmation answer terminated", "subject", msg.Subject(), "err", err)
		return msg.TermWithReason("unreadable confirmation answer")
	}
	p, rev, err := run.LoadPaused(ctx, r.runs, d.ExecutionID)
	if err != nil {
		return err
	}
	// A sleep or a wait for an event is ended by a wait.ended only, a
	// confirmation by an answer only.
	sleep := e.Type() == events.TypeWaitEnded
	if p == nil || p.Step != d.StepID || (p.Kind == run.PausedSleep || p.Kind == run.PausedWait) != sleep {
		if p == nil && sleep {
			// A cancel of a waiting run may have left its wait record.
			r.dropWait(ctx, d.ExecutionID, d.StepID)
		}
		r.cfg.Log.Info("router: answer for an execution not paused at that step; ignored", "execution", d.ExecutionID, "step", d.StepID, "by", d.By, "type", e.Type())
		return msg.Ack()
	}
	var job events.Job
	if err := json.Unmarshal(p.Job, &job); err != nil {
		return msg.TermWithReason("paused job unreadable: " + err.Error())
	}
	if job.Answers == nil {
		job.Answers = map[string]events.Answer{}
	}
	job.Answers[d.StepID] = d.Answer
	meta := bus.Meta{
		CorrelationID: p.Meta[events.ExtCorrelationID], ExecutionID: d.ExecutionID, CausationID: e.ID(),
		TraceParent: p.Meta[events.ExtTraceParent], TraceState: p.Meta[events.ExtTraceState],
	}
	span := trace.SpanFromContext(ctx)
	if l, ok := telemetry.Link(meta.TraceParent, meta.TraceState, telemetry.LinkResumed, telemetry.AttrStepID.String(d.StepID)); ok && span.IsRecording() {
		span.AddLink(l)
		span.SetAttributes(telemetry.AttrExecutionID.String(d.ExecutionID), telemetry.AttrStepID.String(d.StepID), telemetry.AttrSkillName.String(job.Skill.Name))
	}
	id, subject := d.ExecutionID+".job.answered."+d.StepID, r.cfg.Bus.Subjects.Exec(job.Skill.LanePool(), job.Skill.Name, job.ActivationID, events.StageAnswered(d.StepID))
	// The resumed job's PRODUCER span, a child of this answer's span (when tracing):
	// the resumed execution continues from it.
	_, pub := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: subject, Template: r.cfg.Bus.Subjects.JobTemplate(), ID: id},
		&meta.TraceParent, &meta.TraceState, telemetry.Job{
			Skill: job.Skill.Name, Version: job.Skill.Version, ActivationID: job.ActivationID, ExecutionID: d.ExecutionID, Pool: job.Skill.Pool,
		}.Attributes()...)
	jm, err := bus.Event{ID: id, Source: r.cfg.Source, Type: events.TypeJob, Meta: meta, Data: job}.JobMsg(subject)
	if err != nil {
		telemetry.End(pub, err)
		return msg.TermWithReason("resumed job unencodable: " + err.Error())
	}
	b := r.cfg.Bus.Batch()
	b.Publish(jm)
	err = b.Wait(ctx)
	telemetry.End(pub, err)
	if err != nil {
		return err
	}
	if err := r.runs.Delete(ctx, events.RunPausedKey(d.ExecutionID), jetstream.LastRevision(rev)); err != nil {
		r.cfg.Log.Warn("router: paused record changed meanwhile", "execution", d.ExecutionID, "err", err)
	}
	if p.Kind == run.PausedWait {
		r.endWait(ctx, d.ExecutionID, d.StepID, !d.Approved)
		r.cfg.Log.Info("router: wait for an event ended; job resumed", "execution", d.ExecutionID, "step", d.StepID, "matched", d.Approved)
		return msg.Ack()
	}
	if sleep {
		r.cfg.Log.Info("router: sleep ended; job resumed", "execution", d.ExecutionID, "step", d.StepID)
		return msg.Ack()
	}
	if err := r.events.Purge(ctx, jetstream.WithPurgeSubject(r.cfg.Bus.Subjects.ConfirmationTimeout(d.ExecutionID, d.StepID))); err != nil {
		r.cfg.Log.Warn("router: could not cancel the confirmation timeout", "execution", d.ExecutionID, "err", err)
	}
	r.cfg.Log.Info("router: confirmation answered; job resumed", "execution", d.ExecutionID, "step", d.StepID, "approved", d.Approved, "by", d.By)
	return msg.Ack()
}
