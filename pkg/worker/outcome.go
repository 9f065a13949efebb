package worker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// An execution ends with exactly one outcome event — execution.completed,
// execution.failed or execution.fallback — published under the message id
// run.OutcomeID, which the three share. The outcome is published and acknowledged
// before anything it causes (the next skill's job, the dead letter), and all of it
// before the job is acked. A delivery whose outcome JetStream reports as a duplicate
// lost to an earlier one: it looks that one up and finishes what it caused instead.

// completed is the data of execution.completed as the worker writes it: the log is
// encoded with the rest rather than encoded first and then checked and copied again
// as a json.RawMessage. (The field shadows the embedded one; readers decode
// events.ExecutionCompleted.)
type completed struct {
	events.ExecutionCompleted
	Log *workflow.Log `json:"log,omitempty"`
}

// AppendEventData appends c as json.Marshal encodes it (bus.DataAppender), without
// its reflection: the outcome, then the log, last, where json.Marshal puts a field
// that shadows one of an embedded struct's.
func (c completed) AppendEventData(b []byte) ([]byte, error) {
	n := len(b)
	e := c.ExecutionCompleted
	e.Log = nil
	b = slices.Grow(b, c.EventDataSize()) // one buffer for the outcome and its log
	b, err := e.AppendJSON(b)
	if err != nil {
		return b[:n], err
	}
	if c.Log == nil {
		return b, nil
	}
	b = append(b[:len(b)-1], `,"log":`...)
	if b, err = c.Log.AppendJSON(b); err != nil {
		return b[:n], err
	}
	return append(b, '}'), nil
}

// EventDataSize is about how long AppendEventData's JSON is (bus.DataSizer).
func (c completed) EventDataSize() int {
	e := c.ExecutionCompleted
	e.Log = nil
	n := e.JSONSize()
	if c.Log != nil {
		n += 8 + c.Log.JSONSize()
	}
	return n
}

// complete publishes the execution's completed outcome and acks the job.
func (w *Worker) complete(ctx context.Context, j *job, outputs map[string]any) error {
	if err := w.ensureClaim(ctx, j); err != nil {
		return err
	}
	// In the job, as the event's data a pointer to it costs no allocation.
	ev := &j.completed
	*ev = completed{ExecutionCompleted: events.ExecutionCompleted{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID, Skill: j.skill.Name,
		Version: j.data.Skill.Version, Outputs: outputs, DurationMS: ms(time.Since(j.start)), Attempt: j.attempt,
		Worker: w.cfg.Name,
	}, Log: j.log}
	ev.RepairID, ev.Digest = j.repaired()
	span, meta := w.outcomeSpan(ctx, j, events.TypeExecutionCompleted)
	m, err := w.outcomeMsg(j, meta, events.TypeExecutionCompleted, ev)
	if err != nil {
		telemetry.End(span, err)
		if tl := (*bus.TooLargeError)(nil); errors.As(err, &tl) {
			return w.fail(ctx, j, "", failure.Fatalf("%v", err))
		}
		return err
	}
	lost, err := w.publishOutcome(ctx, j, span, m)
	if err != nil || lost {
		return err
	}
	w.dropCancelOn(ctx, j)
	w.stats.Add(j.data.Skill.Name, j.data.Skill.Version, true)
	w.cfg.Metrics.Execution(ctx, j.skill.Name, j.data.Skill.Version, run.StatusCompleted, time.Since(j.start))
	if len(j.data.Together) > 1 { // the record only for an activation of several jobs
		if err := w.endActivation(ctx, j, &run.Record{ExecutionID: j.data.ExecutionID, Skill: j.data.Skill.Name, Status: run.StatusCompleted}); err != nil {
			return err
		}
	}
	return j.msg.Ack()
}

// fail ends the execution of this skill for good: fall back to the next skill of the
// chain, or dead-letter the job.
func (w *Worker) fail(ctx context.Context, j *job, stepID string, cause error) error {
	if err := w.ensureClaim(ctx, j); err != nil {
		return err
	}
	class := failure.ClassOf(cause)
	// The delivery's span says how the execution ended: error status, failure class.
	telemetry.RecordError(trace.SpanFromContext(ctx), cause)
	rec := &run.Record{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID,
		Skill: j.data.Skill.Name, Version: j.data.Skill.Version, Status: run.StatusFailed,
		StepID: stepID, Class: string(class), Error: cause.Error(),
		Attempt: j.attempt, Worker: w.cfg.Name,
		DurationMS: ms(time.Since(j.start)), FinishedAt: time.Now().UTC(), Log: j.logJSON(),
		// A human said no: another skill doing the same thing is not the answer.
		Denied: errors.Is(cause, workflow.ErrDenied),
	}
	if len(j.data.Fallback) > 0 && !rec.Denied {
		rec.Status, rec.Next = run.StatusFallback, j.data.Fallback[0].ExecutionID
	}
	span, meta := w.outcomeSpan(ctx, j, outcomeType(rec))
	m, err := w.outcomeMsg(j, meta, outcomeType(rec), w.outcomeData(j, rec))
	var tl *bus.TooLargeError
	if errors.As(err, &tl) {
		// The log is what can grow; the outcome without it still says everything.
		rec.Log = nil
		m, err = w.outcomeMsg(j, meta, outcomeType(rec), w.outcomeData(j, rec))
	}
	if err != nil {
		telemetry.End(span, err)
		return err
	}
	lost, err := w.publishOutcome(ctx, j, span, m)
	if err != nil || lost {
		return err
	}
	w.consequences(ctx, j, rec, false)
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	if rec.Status != run.StatusFallback {
		w.dropCancelOn(ctx, j)
	}
	w.stats.Add(rec.Skill, rec.Version, false)
	w.cfg.Metrics.Execution(ctx, rec.Skill, rec.Version, rec.Status, time.Since(j.start))
	if rec.Status == run.StatusFailed {
		if err := w.endActivation(ctx, j, rec); err != nil {
			return err
		}
	}
	switch {
	case rec.Status == run.StatusFallback:
		w.cfg.Metrics.Fallback(ctx, rec.Skill, rec.Class)
	case !rec.Denied:
		w.cfg.Metrics.DeadLetter(ctx, rec.Skill, rec.Class)
	}
	return j.msg.Ack()
}

// outcomeSpan starts the PRODUCER span of publishing j's outcome of type typ, which
// lasts until everything queued with the outcome is acknowledged (publishOutcome
// ends it), and returns the outcome's extensions: its trace context is the span's,
// so whoever consumes the outcome continues from it. The outcome, a structured-mode
// event, carries it in its JSON, which is why the span starts before it is encoded.
func (w *Worker) outcomeSpan(ctx context.Context, j *job, typ string) (trace.Span, bus.Meta) {
	m := j.meta
	m.ExecutionID, m.CausationID = j.data.ExecutionID, j.msgID()
	if telemetry.Off() {
		return trace.SpanFromContext(context.Background()), m // a no-op span
	}
	subj := w.cfg.Bus.Subjects
	_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{
		Destination: subj.Event(j.data.ExecutionID, typ), Template: subj.EventTemplate(typ),
		ID: run.OutcomeID(j.data.ExecutionID),
	}, &m.TraceParent, &m.TraceState, j.span().Attributes()...)
	return span, m
}

// publishOutcome publishes the outcome with everything already queued on the job's
// batch, waits for all of it and ends the outcome's span. lost reports that an
// earlier delivery's outcome stands instead; the job has then been settled by
// redrive.
func (w *Worker) publishOutcome(ctx context.Context, j *job, span trace.Span, m *nats.Msg) (lost bool, err error) {
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageBodySize(len(m.Data)))
	}
	// Given: the batch puts its buffer back once JetStream has it, and m's data
	// is not read again here (its id is the outcome's).
	j.batch.Give(m)
	err = j.batch.Wait(ctx)
	telemetry.End(span, err)
	if err != nil {
		return false, err
	}
	if !j.batch.Duplicates() || !j.batch.Duplicate(run.OutcomeID(j.data.ExecutionID)) {
		return false, nil
	}
	prev, err := run.Load(ctx, w.events, w.cfg.Bus.Subjects, j.data.ExecutionID)
	if err != nil {
		return true, err
	}
	if prev == nil {
		// Kept only in the duplicate window's memory, no longer in the stream: the
		// outcome was written and has expired since. Nothing is left to do.
		return true, j.msg.Ack()
	}
	w.cfg.Log.Info("worker: execution had an outcome already; finishing what it caused", "execution", j.data.ExecutionID, "outcome", prev.Status)
	return true, w.redrive(ctx, j, prev)
}

// consequences queues what a failed outcome causes: the next skill's job, or the dead
// letter and its event. recovered marks a republished next job, which workers then
// take through the claim path.
func (w *Worker) consequences(ctx context.Context, j *job, rec *run.Record, recovered bool) {
	subj := w.cfg.Bus.Subjects
	switch {
	case rec.Status == run.StatusFallback && len(j.data.Fallback) > 0:
		next := j.data.Fallback[0]
		attempt := events.Attempt{Skill: rec.Skill, ExecutionID: rec.ExecutionID, Class: rec.Class, Error: rec.Error, Deliveries: rec.Attempt}
		nj := events.Job{
			ExecutionID: next.ExecutionID, ActivationID: j.data.ActivationID, Skill: next,
			Inputs: j.data.Inputs, Trigger: j.data.Trigger, Fallback: j.data.Fallback[1:], Depth: j.data.Depth, Live: j.data.Live,
			Together: j.data.Together,
			History:  append(append([]events.Attempt(nil), j.data.History...), attempt),
		}
		m := j.meta
		m.ExecutionID, m.CausationID = next.ExecutionID, j.msgID()
		nextSubject := subj.Exec(next.LanePool(), next.Name, j.data.ActivationID, events.StageFallback)
		// The next job's PRODUCER span, a child of this execution's: the fallback
		// stays in the trace. It covers queueing the job; its caller waits for it.
		_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: nextSubject, Template: subj.JobTemplate(), ID: next.ExecutionID + ".job"},
			&m.TraceParent, &m.TraceState, telemetry.Job{
				Skill: next.Name, Version: next.Version, ActivationID: j.data.ActivationID, ExecutionID: next.ExecutionID, Pool: next.Pool,
			}.Attributes()...)
		msg, err := bus.Event{ID: next.ExecutionID + ".job", Source: w.cfg.Source, Type: events.TypeJob, Meta: m, Data: nj}.JobMsg(nextSubject)
		if err != nil {
			span.End()
			j.batch.Publish(&nats.Msg{Subject: nextSubject}) // reported by Wait as a bad message
			return
		}
		if recovered {
			msg.Header.Set(events.HeaderRecovered, "1")
		}
		// Create-only, like the plan's jobs: a redelivery that publishes it again
		// finds it there.
		j.batch.Create(msg)
		span.End()
	case rec.Status == run.StatusFailed && !rec.Denied:
		dead := subj.Dead(rec.Skill)
		dl := events.DeadLetter{Job: j.data, Class: rec.Class, Reason: rec.Error, StepID: rec.StepID, Deliveries: rec.Attempt, Worker: rec.Worker}
		dm := j.meta
		dm.ExecutionID, dm.CausationID = rec.ExecutionID, j.msgID()
		_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: dead, Template: subj.DeadTemplate(), ID: rec.ExecutionID + ".dead"},
			&dm.TraceParent, &dm.TraceState, telemetry.AttrSkillName.String(rec.Skill), telemetry.AttrExecutionID.String(rec.ExecutionID))
		j.batch.PublishEvent(dead, bus.Event{ID: rec.ExecutionID + ".dead", Source: w.cfg.Source, Type: events.TypeJob, Meta: dm, Data: dl})
		span.End()
		w.emit(j, events.TypeExecutionDeadlettered, "final", events.ExecutionDeadlettered{
			ExecutionID: rec.ExecutionID, Skill: rec.Skill, Subject: dead, Class: rec.Class, Reason: rec.Error,
		})
		w.cfg.Log.WarnContext(ctx, "worker: execution dead-lettered", "execution", rec.ExecutionID, "skill", rec.Skill,
			"class", rec.Class, "step", rec.StepID, "deliveries", rec.Attempt, "reason", rec.Error)
	}
}

// redrive finishes what an earlier delivery's outcome caused but may not have
// published (its worker died between the outcome and the ack), then acks.
func (w *Worker) redrive(ctx context.Context, j *job, rec *run.Record) error {
	switch rec.Status {
	case run.StatusFallback:
		if len(j.data.Fallback) > 0 {
			next, err := run.Load(ctx, w.events, w.cfg.Bus.Subjects, j.data.Fallback[0].ExecutionID)
			if err != nil {
				return err
			}
			if next == nil {
				w.consequences(ctx, j, rec, true)
			}
		}
	case run.StatusFailed:
		if !rec.Denied && !w.published(ctx, rec.ExecutionID, events.TypeExecutionDeadlettered) {
			w.consequences(ctx, j, rec, true)
		}
	}
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	if rec.Status != run.StatusFallback {
		if err := w.endActivation(ctx, j, rec); err != nil {
			return err
		}
	}
	return j.msg.Ack()
}

// published reports whether the EVENTS stream holds the execution's event of type typ.
func (w *Worker) published(ctx context.Context, executionID, typ string) bool {
	_, err := w.events.GetLastMsgForSubject(ctx, w.cfg.Bus.Subjects.Event(executionID, typ))
	return err == nil
}

func outcomeType(rec *run.Record) string {
	switch rec.Status {
	case run.StatusCompleted:
		return events.TypeExecutionCompleted
	case run.StatusFallback:
		return events.TypeExecutionFallback
	}
	return events.TypeExecutionFailed
}

func (w *Worker) outcomeData(j *job, rec *run.Record) any {
	repairID, digest := j.repaired()
	switch rec.Status {
	case run.StatusFallback:
		next := j.data.Fallback[0]
		return events.ExecutionFallback{
			ExecutionID: rec.ExecutionID, ActivationID: rec.ActivationID, Skill: rec.Skill, Version: rec.Version,
			Next: next.Name, NextExecutionID: next.ExecutionID, StepID: rec.StepID, Class: rec.Class, Error: rec.Error,
			Attempt: rec.Attempt, DurationMS: rec.DurationMS, Worker: rec.Worker, Log: rec.Log, RepairID: repairID, Digest: digest,
		}
	default:
		h := append(append([]events.Attempt(nil), j.data.History...), events.Attempt{
			Skill: rec.Skill, ExecutionID: rec.ExecutionID, Class: rec.Class, Error: rec.Error, Deliveries: rec.Attempt,
		})
		return events.ExecutionFailed{
			ExecutionID: rec.ExecutionID, ActivationID: rec.ActivationID, Skill: rec.Skill,
			Version: rec.Version, StepID: rec.StepID, Class: rec.Class, Error: rec.Error,
			Attempt: rec.Attempt, History: h, DeadLetter: deadLetter(w.cfg.Bus, rec), Denied: rec.Denied,
			DurationMS: rec.DurationMS, Worker: rec.Worker, Log: rec.Log, RepairID: repairID, Digest: digest,
		}
	}
}

// outcomeMsg encodes an outcome event with the extensions m (see outcomeSpan) and
// checks that the server will take it. The message is for publishOutcome, which
// gives it to the job's batch: its buffer is the bus's pool's.
func (w *Worker) outcomeMsg(j *job, m bus.Meta, typ string, data any) (*nats.Msg, error) {
	if j.data.Live {
		if j.outcomeSeq == "" {
			j.outcomeSeq = j.nextSeq()
		}
		m.Seq = j.outcomeSeq
	}
	msg, err := bus.Event{ID: run.OutcomeID(j.data.ExecutionID), Source: w.cfg.Source, Type: typ, Meta: m, Data: data}.
		PooledMsg(w.cfg.Bus.Subjects.Event(j.data.ExecutionID, typ))
	if err != nil {
		return nil, err
	}
	if err := w.cfg.Bus.Fits(msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// emit publishes one of the execution's events: persisted on the job's batch when the
// fleet's events level keeps it, else live. Ids are unique per delivery unless tag
// says the event is final for the execution.
func (w *Worker) emit(j *job, typ, tag string, data any) {
	id := j.data.ExecutionID + "." + events.Kind(typ)
	if tag == "" {
		id += "." + j.deliveryID()
	}
	w.emitID(j, id, typ, data)
}

// emits reports whether an event of type typ goes anywhere: persisted at the
// fleet's events level, or live because someone follows the activation. Progress
// events are built only when it does.
func (w *Worker) emits(j *job, typ string) bool {
	return j.data.Live || w.cfg.Events.Persisted(typ)
}

func (w *Worker) emitID(j *job, id, typ string, data any) {
	_ = w.publish(j, id, typ, data, w.cfg.Events.Persisted(typ))
}

// publish encodes an event of the job's execution and queues it on the job's batch
// (persist) or publishes it live. A persisted event the server would refuse as too
// large is an error; a live one is dropped with a log line.
func (w *Worker) publish(j *job, id, typ string, data any, persist bool) error {
	if !persist && !j.data.Live {
		return nil // nobody follows this activation live
	}
	m := j.meta
	m.ExecutionID = j.data.ExecutionID
	m.CausationID = j.msgID()
	if j.data.Live {
		m.Seq = j.nextSeq()
	}
	ev := bus.Event{ID: id, Source: w.cfg.Source, Type: typ, Meta: m, Data: data}
	subj := w.cfg.Bus.Subjects
	if !persist {
		msg, err := ev.Msg(subj.Live(j.data.ActivationID, j.data.ExecutionID, typ))
		if err == nil {
			err = w.cfg.Bus.Fits(msg)
		}
		if err == nil {
			err = w.cfg.Bus.PublishLive(msg)
		}
		if err != nil {
			w.cfg.Log.Debug("worker: live event not published", "type", typ, "execution", j.data.ExecutionID, "err", err)
		}
		return nil
	}
	msg, err := ev.Msg(subj.Event(j.data.ExecutionID, typ))
	if err != nil {
		return err
	}
	if err := w.cfg.Bus.Fits(msg); err != nil {
		return err
	}
	j.batch.Publish(msg)
	return nil
}

func deadLetter(b *bus.Bus, rec *run.Record) string {
	if rec.Denied {
		return ""
	}
	return b.Subjects.Dead(rec.Skill)
}

// span describes j for its spans (Attributes at the call site keeps them off the heap).
func (j *job) span() telemetry.Job {
	return telemetry.Job{
		Skill: j.data.Skill.Name, Version: j.data.Skill.Version, ActivationID: j.data.ActivationID,
		ExecutionID: j.data.ExecutionID, Attempt: int(j.attempt), Pool: j.data.Skill.Pool,
	}
}
