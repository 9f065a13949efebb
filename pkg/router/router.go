// Package router is the router process: a durable consumer on the TRIGGERS stream that
// validates each trigger, routes it (package route) against the live catalog, and
// publishes the activation plan (route.decided) and the primary skill's job, acking the
// trigger only after both are persisted. A trigger that is not a valid CloudEvent, is
// too large, or explicitly names an unknown skill is terminated and recorded
// (route.unmatched, and the raw message in the DLQ under dead._trigger); a valid
// trigger that no skill wants is acked and recorded as route.unmatched.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/route"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Config configures a Router.
type Config struct {
	// Bus is the connection; required.
	Bus *bus.Bus
	// Catalog is the live skill catalog; required.
	Catalog route.Catalog
	// Log receives the router's logs; default slog.Default().
	Log *slog.Logger
	// MaxEventBytes bounds a trigger (headers and data); larger ones are terminated.
	// Default 256 KiB.
	MaxEventBytes int
	// Concurrency is how many triggers are routed at once; default 64.
	Concurrency int
	// AckWait is how long JetStream waits for the router to ack a trigger before
	// redelivering it; default 30s.
	AckWait time.Duration
	// Durable is the consumer's name, shared by every router; default "router".
	Durable string
	// Source is the CloudEvents source of the events the router writes; default
	// "/skillbus/router".
	Source string
}

// Router routes triggers.
type Router struct {
	cfg     Config
	loop    *bus.Loop
	answers *bus.Loop
	runs    jetstream.KeyValue
	events  jetstream.Stream
}

// New validates cfg and returns a Router; Start begins consuming.
func New(cfg Config) (*Router, error) {
	if cfg.Bus == nil || cfg.Catalog == nil {
		return nil, errors.New("router: Bus and Catalog are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = 256 << 10
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 64
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.Durable == "" {
		cfg.Durable = "router"
	}
	if cfg.Source == "" {
		cfg.Source = "/skillbus/router"
	}
	if cfg.MaxEventBytes < 0 || cfg.Concurrency < 0 || cfg.AckWait < 0 {
		return nil, errors.New("router: MaxEventBytes, Concurrency and AckWait must not be negative")
	}
	return &Router{cfg: cfg}, nil
}

// ConsumerConfig is the durable consumer every router shares.
func (r *Router) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       r.cfg.Durable,
		Description:   "skillbus routers",
		FilterSubject: r.cfg.Bus.Subjects.Triggers(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    10,
		MaxAckPending: 4 * r.cfg.Concurrency * 16,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// Start creates or updates the consumer and starts routing.
func (r *Router) Start(ctx context.Context) error {
	c, err := r.cfg.Bus.JS.CreateOrUpdateConsumer(ctx, r.cfg.Bus.StreamTriggers(), r.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("router: consumer: %w", err)
	}
	if err := r.startConfirmations(ctx); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	r.loop, err = bus.Consume(c, r.cfg.Concurrency, r.handle, r.cfg.Log)
	if err != nil {
		r.answers.Stop(ctx)
		return fmt.Errorf("router: %w", err)
	}
	return nil
}

// Stop stops taking triggers and waits for the ones in hand, until ctx ends.
func (r *Router) Stop(ctx context.Context) {
	if r.loop != nil {
		r.loop.Stop(ctx)
	}
	if r.answers != nil {
		r.answers.Stop(ctx)
	}
}

func (r *Router) handle(ctx context.Context, msg jetstream.Msg) {
	if err := r.route(ctx, msg); err != nil {
		// Nothing was lost: the trigger stays in the stream and comes back.
		r.cfg.Log.Warn("router: will retry trigger", "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(time.Second)
	}
}

// route handles one trigger. It returns an error only when the trigger should be
// retried (a publish failed); every outcome about the trigger itself is recorded.
func (r *Router) route(ctx context.Context, msg jetstream.Msg) error {
	ref := events.TriggerRef{Subject: msg.Subject()}
	if md, err := msg.Metadata(); err == nil {
		ref.Seq = md.Sequence.Stream
	}
	size := len(msg.Data()) + headerSize(msg.Headers())
	if size > r.cfg.MaxEventBytes {
		return r.reject(ctx, msg, ref, events.UnmatchedTooLarge,
			fmt.Sprintf("trigger is %d bytes; the limit is %d (router --max-event-bytes)", size, r.cfg.MaxEventBytes), size)
	}
	e, err := bus.Decode(&nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()})
	if err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedInvalid, err.Error(), size)
	}
	ref.ID, ref.Source, ref.Type = e.ID(), e.Source(), e.Type()

	subj := r.cfg.Bus.Subjects
	t := route.Trigger{Type: e.Type()}
	if err := bus.CheckType(e.Type()); err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedBadType, err.Error(), size)
	}
	if name, ok := subj.SkillFromTrigger(msg.Subject()); ok {
		t.Skill = name
	} else if typ, _ := subj.TypeFromTrigger(msg.Subject()); typ != e.Type() {
		return r.reject(ctx, msg, ref, events.UnmatchedBadType,
			fmt.Sprintf("event type %q does not match its subject %s; publish it on %s", e.Type(), msg.Subject(), subj.Trigger(e.Type())), size)
	}
	if s, ok := e.Extensions()[events.ExtSkill].(string); ok && s != "" && t.Skill == "" {
		t.Skill = s
	}
	inputs, err := inputsOf(e)
	if err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedInvalid, err.Error(), size)
	}

	actID := events.ActivationID(e.Source(), e.ID())
	meta := bus.MetaOf(e)
	meta.CorrelationID = actID
	meta.CausationID = e.ID()

	cands, err := route.Route(r.cfg.Catalog, t)
	var unknown *route.UnknownSkillError
	switch {
	case errors.As(err, &unknown):
		return r.reject(ctx, msg, ref, events.UnmatchedUnknownSkill, err.Error(), size)
	case err != nil:
		return r.unmatched(ctx, msg, ref, actID, meta, events.UnmatchedNoSkill, err.Error())
	}

	plan := events.Plan{}
	refs := make([]events.SkillRef, len(cands))
	for i, c := range cands {
		refs[i] = skillRef(c, e)
	}
	plan.Primary, plan.FallbackChain = refs[0], refs[1:]

	decided := bus.Event{ID: actID + ".route.decided", Source: r.cfg.Source, Type: events.TypeRouteDecided, Meta: meta,
		Data: events.RouteDecided{ActivationID: actID, Trigger: ref, Plan: plan}}

	depth := 0
	if d, ok := e.Extensions()["skilldepth"].(string); ok {
		depth, _ = strconv.Atoi(d)
	}
	job := events.Job{
		Depth:        depth,
		ExecutionID:  plan.Primary.ExecutionID,
		ActivationID: actID,
		Skill:        plan.Primary,
		Inputs:       inputs,
		Trigger:      ref,
		Fallback:     plan.FallbackChain,
		Live:         e.Extensions()[events.ExtProgress] == events.ProgressLive,
	}
	jm := meta
	jm.ExecutionID = job.ExecutionID
	jm.CausationID = decided.ID
	jobMsg, err := bus.Event{ID: job.ExecutionID + ".job", Source: r.cfg.Source, Type: events.TypeJob, Meta: jm, Data: job}.
		Msg(subj.Exec(plan.Primary.Pool, plan.Primary.Name))
	if err != nil {
		return err
	}
	if err := r.cfg.Bus.Fits(jobMsg); err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedTooLarge, err.Error(), size)
	}

	// The decision is the activation's record, written once: a create-only publish
	// on its subject. If it exists, this trigger was routed before — either by an
	// earlier delivery of this same message that died before acking it, or as an
	// earlier message with the same source and id, published again after the
	// duplicate window. Either way no second execution starts; the publisher finds
	// the first one's events, and its result, under the same activation id.
	b := r.cfg.Bus.Batch()
	b.PublishEvent(subj.Event(actID, events.TypeRouteDecided), decided, jetstream.WithExpectLastSequencePerSubject(0))
	if err := b.Wait(ctx); err != nil {
		if !isWrongLastSequence(err) {
			return err
		}
		return r.routedBefore(ctx, msg, ref, actID, jobMsg)
	}
	b.Publish(jobMsg)
	if err := b.Wait(ctx); err != nil {
		return err
	}
	return msg.Ack()
}

// routedBefore settles a trigger whose activation already has its decision. When the
// decision came from this very message (its earlier delivery died between the
// decision and the job), the job is published again — as recovered, so workers make
// sure it has not run — and the duplicate window drops it if it was persisted.
func (r *Router) routedBefore(ctx context.Context, msg jetstream.Msg, ref events.TriggerRef, actID string, job *nats.Msg) error {
	m, err := r.events.GetLastMsgForSubject(ctx, r.cfg.Bus.Subjects.Event(actID, events.TypeRouteDecided))
	if err != nil {
		return fmt.Errorf("read the earlier decision of activation %s: %w", actID, err)
	}
	var prev events.RouteDecided
	if err := json.Unmarshal(m.Data, &prev); err != nil {
		return fmt.Errorf("read the earlier decision of activation %s: %w", actID, err)
	}
	if prev.Trigger.Seq == ref.Seq {
		job.Header.Set(bus.HeaderRecovered, "1")
		b := r.cfg.Bus.Batch()
		b.Publish(job)
		if err := b.Wait(ctx); err != nil {
			return err
		}
		return msg.Ack()
	}
	r.cfg.Log.Info("router: trigger routed before; its first activation answers it",
		"activation", actID, "source", ref.Source, "id", ref.ID, "first_seq", prev.Trigger.Seq, "seq", ref.Seq)
	return msg.Ack()
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func skillRef(c route.Candidate, e *event.Event) events.SkillRef {
	s := c.Skill
	v := s.Version
	if v == "" {
		v = shortDigest(s)
	}
	return events.SkillRef{
		Name:        s.Name,
		Version:     v,
		Digest:      s.Digest,
		Pool:        s.PoolName(),
		ExecutionID: events.ExecutionID(e.Source(), e.ID(), s.Name),
		Source:      c.Source,
		Score:       c.Score,
	}
}

func shortDigest(s *skill.Skill) string {
	if len(s.Digest) > 12 {
		return s.Digest[:12]
	}
	return s.Digest
}

// inputsOf turns the trigger's data into the skill's inputs: a JSON object is used as
// it is; no data is an empty object; any other JSON value, or non-JSON data, is
// wrapped as {"data": value}.
func inputsOf(e *event.Event) (json.RawMessage, error) {
	data := e.Data()
	if len(data) == 0 {
		return json.RawMessage("{}"), nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		if mt := e.DataMediaType(); mt == "" || mt == "application/json" || mt == "text/json" {
			return nil, fmt.Errorf("data is not valid JSON (datacontenttype %q): %v", e.DataContentType(), err)
		}
		b, _ := json.Marshal(map[string]string{"data": string(data)})
		return b, nil
	}
	if _, ok := v.(map[string]any); ok {
		return json.RawMessage(data), nil
	}
	b, err := json.Marshal(map[string]any{"data": v})
	return b, err
}

// reject terminates a poison trigger after recording it: the raw message goes to the
// DLQ (dead._trigger, kept 30 days) with the reason in headers, and route.unmatched is
// published.
func (r *Router) reject(ctx context.Context, msg jetstream.Msg, ref events.TriggerRef, code, reason string, size int) error {
	b := r.cfg.Bus.Batch()
	seq := strconv.FormatUint(ref.Seq, 10)
	actID := events.ActivationID("skillbus:trigger-seq", seq)
	if ref.ID != "" && ref.Source != "" {
		actID = events.ActivationID(ref.Source, ref.ID)
	}
	dead := nats.NewMsg(r.cfg.Bus.Subjects.Dead("_trigger"))
	for k, v := range msg.Headers() {
		dead.Header[k] = v
	}
	dead.Header.Set(bus.HeaderMsgID, "trigger."+seq+".dead")
	dead.Header.Set("Skillbus-Code", code)
	dead.Header.Set("Skillbus-Reason", reason)
	dead.Header.Set("Skillbus-Subject", msg.Subject())
	dead.Header.Set("Skillbus-Trigger-Seq", seq)
	dead.Data = msg.Data()
	if code == events.UnmatchedTooLarge {
		dead.Data = nil // the original stays in TRIGGERS at Skillbus-Trigger-Seq
	}
	b.Publish(dead)
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeRouteUnmatched), bus.Event{
		ID: actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: bus.Meta{CorrelationID: actID},
		Data: events.RouteUnmatched{ActivationID: actID, Code: code, Reason: reason, Trigger: ref, Size: size},
	})
	if err := b.Wait(ctx); err != nil {
		return err
	}
	r.cfg.Log.Warn("router: trigger rejected", "code", code, "reason", reason, "subject", msg.Subject(), "seq", ref.Seq)
	return msg.TermWithReason(code)
}

// unmatched records a valid trigger no skill wants, and acks it.
func (r *Router) unmatched(ctx context.Context, msg jetstream.Msg, ref events.TriggerRef, actID string, meta bus.Meta, code, reason string) error {
	b := r.cfg.Bus.Batch()
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeRouteUnmatched), bus.Event{
		ID: actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: meta,
		Data: events.RouteUnmatched{ActivationID: actID, Code: code, Reason: reason, Trigger: ref},
	})
	if err := b.Wait(ctx); err != nil {
		return err
	}
	return msg.Ack()
}

func headerSize(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
