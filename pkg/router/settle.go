package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// routeNote is what routing a trigger came to, for its span and the routing
// metrics: routed, unmatched or rejected, and how the primary was recalled.
type routeNote struct{ outcome, method string }

// settle publishes what an outcome says and then acks the trigger (or terminates
// it). It returns an error only when the trigger should be retried (a write
// failed); it is the only place routing writes.
func (r *Router) settle(ctx context.Context, t *trigger, o outcome) (routeNote, error) {
	if _, bad := o.(rejected); !bad {
		if err := r.cancelMatching(ctx, t); err != nil {
			return routeNote{}, err
		}
		if len(t.folds) > 0 {
			if err := r.foldAll(ctx, t); err != nil {
				return routeNote{}, err
			}
		}
	}
	// A type switch, not o.outcome() nor %T: either would move a routed outcome,
	// and with it the trigger holding it, to the heap.
	switch o := o.(type) {
	case rejected:
		return routeNote{outcome: telemetry.OutcomeRejected}, r.reject(ctx, t, o.code, o.reason)
	case unmatched:
		return routeNote{outcome: telemetry.OutcomeUnmatched}, r.unmatched(ctx, t, o)
	case *routed:
		return r.publishPlan(ctx, t, o)
	}
	return routeNote{outcome: telemetry.OutcomeFailed}, errors.New("router: unknown outcome")
}

// publishPlan publishes a routed trigger's jobs (and its decision, where the
// events level persists it) and acks the trigger.
//
// The jobs are the activation's record, each written once: create-only publishes
// on subjects that name the activation, in a stream that keeps them. If the
// primary's job exists, this trigger was routed before — by an earlier delivery of
// this same message that died before acking it, or as an earlier message with the
// same source and id, published again after the duplicate window. Either way no
// second execution starts; the publisher finds the first one's events, and its
// result, under the same activation id. The decision rides in the jobs
// (events.Job.Route), where followers read it; it is an event of its own only
// where the events level persists it.
func (r *Router) publishPlan(ctx context.Context, t *trigger, o *routed) (routeNote, error) {
	note := routeNote{outcome: telemetry.OutcomeRouted}
	primary := o.decided.Plan.Primary
	if prev, ok := r.routedElsewhere(ctx, t.md(), t.actID, primary.Name); ok {
		r.cfg.Log.Info("router: trigger routed before to another skill (the catalog changed since); its first activation answers it",
			"activation", t.actID, "source", t.ref.Source, "id", t.ref.ID, "first", prev, "now", primary.Name)
		return note, t.msg.Ack()
	}
	subj := r.cfg.Bus.Subjects
	pubs := make([]trace.Span, 0, len(o.jobs())+1)
	jobs := make([]*nats.Msg, 0, len(o.jobs()))
	for i := range o.jobs() {
		pj := &o.jobs()[i]
		sr := pj.job.Skill
		// The job's PRODUCER span: the worker's delivery continues from it. It is
		// started first, so the job carries it in its JSON.
		attrs := telemetry.Job{Skill: sr.Name, Version: sr.Version, ActivationID: t.actID, ExecutionID: sr.ExecutionID, Pool: sr.Pool}.Attributes()
		if attrs != nil { // nil with tracing off: then nothing to append to
			attrs = append(attrs, telemetry.AttrRouteMethod.String(sr.Source), telemetry.AttrRouteScore.Float64(sr.Score))
		}
		_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: pj.subject, Template: r.jobTemplate, ID: pj.id},
			&pj.meta.TraceParent, &pj.meta.TraceState, attrs...)
		pubs = append(pubs, span)
		// Encoded into a buffer of the bus's pool, which the batch puts back once
		// JetStream has the job (GiveCreate below); one refused as too large is
		// never given, and its buffer is left to the garbage collector.
		jobMsg, err := bus.Event{ID: pj.id, Source: r.cfg.Source, Type: events.TypeJob, Meta: pj.meta}.PooledJobMsgOf(pj.subject, &pj.job)
		if err != nil {
			telemetry.EndAll(pubs, err)
			return note, err
		}
		r.lane(&pj.job.Skill, t)
		if err := r.cfg.Bus.Fits(jobMsg); err != nil {
			telemetry.EndAll(pubs, err)
			return routeNote{outcome: telemetry.OutcomeRejected}, r.reject(ctx, t, events.UnmatchedTooLarge, err.Error())
		}
		jobs = append(jobs, jobMsg)
	}

	// The runs' cancel_on keys before their jobs: a run that starts has them, so
	// an event routed at once finds it (and its sender is told it cancelled it).
	// Such a run may be cancelled before its job is out — by an event kept
	// before it, by one routed between the key and the job, by a runs cancel
	// --skill given while its burst was pending — and its job says so, so that
	// the worker reads the cancel from KV runs, not from its copy.
	check, err := r.indexCancels(ctx, t, o)
	if err == nil && t.burstOf != "" && t.burstSeq != 0 {
		var more []string
		more, err = r.cancelPendingRun(ctx, t, o)
		check = append(check, more...)
	}
	if err != nil {
		telemetry.EndAll(pubs, err)
		return note, err
	}
	for _, id := range check {
		for i := range jobs {
			if o.jobs()[i].job.Skill.ExecutionID == id {
				jobs[i].Header.Set(events.HeaderCheckCancel, "1")
			}
		}
	}
	if err := r.fault("plan.publish"); err != nil {
		telemetry.EndAll(pubs, err)
		return note, err
	}
	b := r.cfg.Bus.Batch()
	if r.cfg.Events.Persisted(events.TypeRouteDecided) {
		dsubj := subj.Event(t.actID, events.TypeRouteDecided)
		// Built only here: boxing the decision as the event's data costs an allocation.
		decided := bus.Event{ID: o.decidedID, Source: r.cfg.Source, Type: events.TypeRouteDecided, Meta: t.meta, Data: o.decided}
		_, dspan := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: dsubj, Template: subj.ActivationEventTemplate(events.TypeRouteDecided), ID: decided.ID},
			&decided.Meta.TraceParent, &decided.Meta.TraceState, telemetry.AttrActivationID.String(t.actID))
		pubs = append(pubs, dspan)
		dm, err := decided.PooledMsg(dsubj)
		if err != nil {
			telemetry.EndAll(pubs, err)
			return note, err
		}
		b.GiveCreate(dm)
	}
	for _, m := range jobs {
		b.GiveCreate(m)
	}
	err = b.Wait(ctx)
	telemetry.EndAll(pubs, err)
	if err != nil {
		return note, err
	}
	if b.Duplicates() && b.Duplicate(o.jobs()[0].id) {
		if t.md() != nil && t.md().NumDelivered == 1 {
			r.cfg.Log.Info("router: trigger routed before; its first activation answers it",
				"activation", t.actID, "source", t.ref.Source, "id", t.ref.ID, "seq", t.ref.Seq)
		}
		return note, t.msg.Ack()
	}
	// Announce the decision to whoever follows the activation live (a plain NATS
	// publish with no body): the follower reads it from the jobs just stored.
	if t.live {
		_ = r.cfg.Bus.PublishLive(&nats.Msg{Subject: subj.Live(t.actID, primary.ExecutionID, events.TypeRouteDecided)})
	}
	note.method = primary.Source
	ackErr := t.msg.Ack()
	if t.live {
		// After the ack: a read that is slow to answer holds up no trigger's.
		r.soloWaiting(ctx, t, o)
	}
	return note, ackErr
}

// reject terminates a poison trigger after recording it: the raw message goes to the
// DLQ (dead._trigger, kept 30 days) with the reason in headers, and route.unmatched is
// published.
func (r *Router) reject(ctx context.Context, t *trigger, code, reason string) error {
	msg, ref := t.msg, t.ref
	b := r.cfg.Bus.Batch()
	seq := strconv.FormatUint(ref.Seq, 10)
	actID := events.ActivationID("skillbus:trigger-seq", seq)
	// A trigger from one of skillbus's own sources on a sender's subject is not
	// recorded under the activation it names, whatever is wrong with it (its
	// source, its size, its type): that is skillbus's own, whose caller would
	// read the sender's rejection as its own.
	forged := events.IsReservedSource(ref.Source) && !ownSubject(r.cfg.Bus.Subjects, msg.Subject())
	if ref.ID != "" && ref.Source != "" && !forged {
		actID = events.ActivationID(ref.Source, ref.ID)
	}
	dead := nats.NewMsg(r.cfg.Bus.Subjects.Dead(events.DeadTrigger))
	for k, v := range msg.Headers() {
		dead.Header[k] = v
	}
	dead.Header.Set(bus.HeaderMsgID, "trigger."+seq+".dead")
	dead.Header.Set(events.HeaderDeadCode, code)
	dead.Header.Set(events.HeaderDeadReason, reason)
	dead.Header.Set(events.HeaderDeadSubject, msg.Subject())
	dead.Header.Set(events.HeaderDeadTriggerSeq, seq)
	dead.Data = msg.Data()
	if code == events.UnmatchedTooLarge {
		dead.Data = nil // the original stays in TRIGGERS at Skillbus-Trigger-Seq
	}
	_, dspan := bustrace.StartPublishMsg(ctx, dead, r.cfg.Bus.Subjects.Dead(events.DeadTrigger), telemetry.AttrActivationID.String(actID))
	b.Publish(dead)
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeRouteUnmatched), bus.Event{
		ID: actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: bus.Meta{CorrelationID: actID},
		Data: events.RouteUnmatched{ActivationID: actID, Code: code, Reason: reason, Trigger: ref, Size: t.size},
	})
	err := b.Wait(ctx)
	telemetry.End(dspan, err)
	if err != nil {
		return err
	}
	r.cfg.Log.Warn("router: trigger rejected", "code", code, "reason", reason, "subject", msg.Subject(), "seq", ref.Seq)
	return msg.TermWithReason(code)
}

// maxUnmatchedCandidates bounds the candidates route.unmatched lists.
const maxUnmatchedCandidates = 5

// unmatched records a valid trigger no skill takes, with the best candidates, and
// acks it.
func (r *Router) unmatched(ctx context.Context, t *trigger, o unmatched) error {
	cs := candidates(o.d)
	if len(cs) > maxUnmatchedCandidates {
		cs = cs[:maxUnmatchedCandidates]
	}
	b := r.cfg.Bus.Batch()
	b.PublishEvent(r.cfg.Bus.Subjects.Event(t.actID, events.TypeRouteUnmatched), bus.Event{
		ID: t.actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: t.meta,
		Data: events.RouteUnmatched{ActivationID: t.actID, Code: o.code, Reason: o.reason, Trigger: t.ref, Threshold: o.d.Threshold, Candidates: cs,
			EndedWaits: t.endedWaits, Cancelled: t.cancelled},
	})
	if err := b.Wait(ctx); err != nil {
		return err
	}
	return t.msg.Ack()
}

// cancelPendingRun cancels the run of a debounced burst or a batch that came due
// after runs cancel --skill was given while it was pending (its last trigger was
// stored before then): before its job is published, so that the worker taking it
// finds the cancel and starts nothing. The run is planned all the same, so that it
// ends as cancelled, where whoever follows it looks.
func (r *Router) cancelPendingRun(ctx context.Context, t *trigger, o *routed) (cancelled []string, _ error) {
	e, err := r.runs.Get(ctx, events.SkillCancelledKey(t.burstOf))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading whether %s's pending runs were cancelled: %w", t.burstOf, err)
	}
	var cut run.SkillCancel
	if err := json.Unmarshal(e.Value(), &cut); err != nil || t.burstSeq > cut.Seq {
		return nil, nil // a trigger stored after the cancel: this run is not cancelled
	}
	// Counted in this TRIGGERS stream, not one deleted since, whose sequences a
	// new one counts again from 1.
	st, err := r.cfg.Bus.Stream(ctx, r.cfg.Bus.StreamTriggers())
	if err != nil {
		return nil, fmt.Errorf("reading whether %s's pending runs were cancelled: %w", t.burstOf, err)
	}
	if info := st.CachedInfo(); info == nil || !info.Created.Equal(cut.Stream) {
		return nil, nil
	}
	reason := "runs cancel --skill while the run was pending"
	if cut.Reason != "" {
		reason += ": " + cut.Reason
	}
	for i := range o.jobs() {
		sr := o.jobs()[i].job.Skill
		if sr.Name != t.burstOf {
			continue
		}
		if _, err := r.control.CancelKnown(ctx, sr.ExecutionID, control.Request{By: cut.By, Reason: reason, Source: r.cfg.Source}); err != nil {
			return nil, err
		}
		cancelled = append(cancelled, sr.ExecutionID)
		r.cfg.Log.Info("router: a pending run cancelled by runs cancel --skill", "skill", sr.Name, "execution", sr.ExecutionID, "by", cut.By)
	}
	return cancelled, nil
}
