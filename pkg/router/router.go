// Package router is the router process: a durable consumer on the TRIGGERS stream that
// validates each trigger, decides its activation plan (package selector) against the
// live catalog, and publishes the plan (route.decided) and the jobs that run at once
// (the primary, its parallel partners and always-skills), acking the trigger only
// after all are persisted. While it runs it follows the terminal results per skill
// version that workers count (package stats) and worker heartbeats, which feed the
// success-rate and availability parts of the score. A trigger that is not a valid CloudEvent, is
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// SkillSource is what the router reads; *catalog.Catalog implements it.
type SkillSource interface {
	All() []*skill.Skill
	Revision() uint64
}

// Recaller is an optional recall source (embeddings, a chat model). An error or a
// timeout only drops its candidates; the trigger is routed with the other sources.
type Recaller interface {
	Name() string
	Recall(ctx context.Context, text string, skills []*skill.Skill) ([]selector.Recall, error)
}

// Config configures a Router.
type Config struct {
	// Bus is the connection; required.
	Bus *bus.Bus
	// Catalog is the live skill catalog; required.
	Catalog SkillSource
	// Selector configures the routing decision (weights, threshold, maxActive, ...);
	// the zero value is the documented default.
	Selector selector.Config
	// TextFields are the data fields a trigger's routing text comes from; nil means
	// selector.DefaultTextFields.
	TextFields []string
	// Recallers are optional recall sources, asked in parallel for triggers with text.
	Recallers []Recaller
	// RecallTimeout bounds each Recaller; default 2s.
	RecallTimeout time.Duration
	// StatsWindow is how far back the terminal results a skill version's success
	// rate counts go; default 24h. The stats bucket keeps 25 hours of them.
	StatsWindow time.Duration
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
	// RetryBase and RetryMax bound the delay before a trigger that could not be
	// routed because a write failed (the store full, the server away) is delivered
	// again: RetryBase·2^(n-1) after the n-th failed delivery, at most RetryMax;
	// defaults 1s and 30s. Such a trigger is retried until it is routed, never
	// dropped after a number of deliveries.
	RetryBase, RetryMax time.Duration
	// Durable is the consumer's name, shared by every router; default "router".
	Durable string
	// Source is the CloudEvents source of the events the router writes; default
	// "/skillbus/router".
	Source string
	// Metrics receives routing decisions and latency; nil records nothing.
	Metrics *telemetry.Metrics
	// Events is the fleet's events level; "" is events.DefaultLevel. The routing
	// decision is an event of its own in the EVENTS stream only at the full level;
	// at every level it travels in the plan's jobs.
	Events events.Level
}

// Router routes triggers.
type Router struct {
	cfg     Config
	epoch   *bus.Epoch
	sel     *selector.Selector
	syncMu  sync.Mutex
	synced  atomic.Uint64
	live    *live
	svc     micro.Service
	loop    *bus.Loop
	answers *bus.Loop
	runs    jetstream.KeyValue
	events  jetstream.Stream
	jobs    jetstream.Stream // read for the depth of a skill's child triggers
	// jobTemplate is the jobs' subject template, for their PRODUCER spans.
	jobTemplate string
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
		cfg.MaxEventBytes = bus.DefaultMaxEventBytes
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
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.RetryBase < 0 || cfg.RetryMax < cfg.RetryBase {
		return nil, errors.New("router: RetryBase must be positive and RetryMax at least RetryBase")
	}
	if cfg.Source == "" {
		cfg.Source = "/skillbus/router"
	}
	if cfg.RecallTimeout == 0 {
		cfg.RecallTimeout = 2 * time.Second
	}
	if cfg.StatsWindow == 0 {
		cfg.StatsWindow = 24 * time.Hour
	}
	lvl, err := events.ParseLevel(string(cfg.Events))
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	cfg.Events = lvl
	if cfg.MaxEventBytes < 0 || cfg.Concurrency < 0 || cfg.AckWait < 0 {
		return nil, errors.New("router: MaxEventBytes, Concurrency and AckWait must not be negative")
	}
	r := &Router{cfg: cfg, sel: selector.New(cfg.Selector), jobTemplate: cfg.Bus.Subjects.Prefix + ".exec.{pool}.{skill}.{activation}.{stage}"}
	r.live = newLive(r)
	return r, nil
}

// sync brings the selector up to the catalog's revision, re-indexing only the
// skills whose digest changed.
func (r *Router) sync() {
	rev := r.cfg.Catalog.Revision()
	if rev == r.synced.Load() && rev != 0 {
		return
	}
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	if rev = r.cfg.Catalog.Revision(); rev == r.synced.Load() && rev != 0 {
		return
	}
	r.sel.Sync(r.cfg.Catalog.All())
	r.synced.Store(rev)
}

// ConsumerConfig is the durable consumer every router shares.
func (r *Router) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       r.cfg.Durable,
		Description:   "skillbus routers",
		FilterSubject: r.cfg.Bus.Subjects.Triggers(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		// No delivery limit: a trigger the router could not route because a write
		// failed comes back until it is routed. With a limit, the last triggers
		// accepted before the store filled were dropped without a trace. Triggers
		// that are themselves bad are terminated and recorded, never retried.
		MaxDeliver:    -1,
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
	if r.jobs, err = r.cfg.Bus.JS.Stream(ctx, r.cfg.Bus.StreamJobs()); err != nil {
		return fmt.Errorf("router: stream %s: %w", r.cfg.Bus.StreamJobs(), err)
	}
	if err := r.startConfirmations(ctx); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	r.sync()
	// Learn the epoch before the first trigger arrives (see routedElsewhere).
	r.epoch = r.cfg.Bus.NewEpoch(r.cfg.Bus.StreamTriggers())
	r.epoch.Fresh(ctx, 0)
	if err := r.live.start(ctx); err != nil {
		r.answers.Stop(ctx)
		return fmt.Errorf("router: following results and workers: %w", err)
	}
	if err := r.startService(ctx); err != nil {
		r.live.stop()
		r.answers.Stop(ctx)
		return fmt.Errorf("router: %w", err)
	}
	r.loop, err = bus.Consume(c, r.cfg.Concurrency, r.handle, r.cfg.Log)
	if err != nil {
		r.stopService()
		r.live.stop()
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
	r.stopService()
	r.live.stop()
}

func (r *Router) handle(ctx context.Context, msg jetstream.Msg) {
	// The trigger's CONSUMER span continues the publisher's trace (or starts one);
	// the decision and the jobs carry it on.
	start := time.Now()
	ctx, span := telemetry.StartConsume(ctx, &nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}, r.cfg.Durable, nil)
	note := &routeNote{outcome: telemetry.OutcomeRouted}
	err := r.route(context.WithValue(ctx, routeNoteKey{}, note), telemetry.Settling(ctx, msg, ""))
	if err != nil {
		note.outcome = telemetry.OutcomeFailed
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrOutcome.String(note.outcome))
		if note.method != "" {
			span.SetAttributes(telemetry.AttrRouteMethod.String(note.method))
		}
	}
	telemetry.End(span, err)
	r.cfg.Metrics.Route(ctx, note.outcome, note.method, time.Since(start))
	if err != nil {
		// Nothing was lost: the trigger stays in the stream and comes back, for as
		// long as it takes.
		var n uint64 = 1
		if md, _ := msg.Metadata(); md != nil {
			n = md.NumDelivered
		}
		delay := r.retryDelay(n)
		lvl := slog.LevelWarn
		if n >= 3 {
			lvl = slog.LevelError
		}
		r.cfg.Log.Log(ctx, lvl, "router: trigger not routed; will retry", "subject", msg.Subject(), "deliveries", n, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
	}
}

// retryDelay is the delay after the n-th failed delivery of a trigger.
func (r *Router) retryDelay(n uint64) time.Duration {
	d := r.cfg.RetryBase
	for i := uint64(1); i < n && d < r.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, r.cfg.RetryMax)
}

// routeNote is how route tells handle what it decided, for the span and the
// routing metrics: routed, unmatched or rejected, and how the skill was recalled.
type routeNote struct{ outcome, method string }

type routeNoteKey struct{}

func noteOf(ctx context.Context) *routeNote {
	n, _ := ctx.Value(routeNoteKey{}).(*routeNote)
	return n
}

// route handles one trigger. It returns an error only when the trigger should be
// retried (a publish failed); every outcome about the trigger itself is recorded.
func (r *Router) route(ctx context.Context, msg jetstream.Msg) error {
	ref := events.TriggerRef{Subject: msg.Subject()}
	md, _ := msg.Metadata() // nil only for a message that did not come from a stream
	if md != nil {
		ref.Seq = md.Sequence.Stream
	}
	nm := &nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}
	size := bus.EventSize(nm)
	e, err := bus.DecodeFast(nm)
	if err == nil {
		ref.ID, ref.Source, ref.Type = e.ID, e.Source, e.Type
	}
	if size > r.cfg.MaxEventBytes {
		// Rejected under its own activation id when it has one, where whoever
		// waits for it looks.
		return r.reject(ctx, msg, ref, events.UnmatchedTooLarge,
			fmt.Sprintf("trigger is %d bytes; the limit is %d (router --max-event-bytes)", size, r.cfg.MaxEventBytes), size)
	}
	if err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedInvalid, err.Error(), size)
	}

	subj := r.cfg.Bus.Subjects
	req := selector.Request{Type: e.Type}
	if err := events.CheckType(e.Type); err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedBadType, err.Error(), size)
	}
	if name, ok := subj.SkillFromTrigger(msg.Subject()); ok {
		req.Skill = name
	} else if typ, _ := subj.TypeFromTrigger(msg.Subject()); typ != e.Type {
		return r.reject(ctx, msg, ref, events.UnmatchedBadType,
			fmt.Sprintf("event type %q does not match its subject %s; publish it on %s", e.Type, msg.Subject(), subj.Trigger(e.Type)), size)
	}
	if s := e.Ext(events.ExtSkill); s != "" && req.Skill == "" {
		req.Skill = s
	}
	inputs, obj, err := inputsOf(e)
	if err != nil {
		return r.reject(ctx, msg, ref, events.UnmatchedInvalid, err.Error(), size)
	}
	req.Text = textOf(obj, r.cfg.TextFields)
	req.Data = obj

	actID := events.ActivationID(e.Source, e.ID)
	meta := e.Meta()
	meta.CorrelationID = actID
	meta.CausationID = e.ID
	if tp, ts := telemetry.Inject(ctx); tp != "" {
		meta.TraceParent, meta.TraceState = tp, ts
	}

	d, err := r.decide(ctx, req)
	switch {
	case err != nil:
		var unknown *selector.UnknownSkillError
		if !errors.As(err, &unknown) {
			return err
		}
		if why, ok := r.invalidSkill(ctx, unknown.Name); ok {
			return r.reject(ctx, msg, ref, events.UnmatchedInvalidSkill, why, size)
		}
		return r.reject(ctx, msg, ref, events.UnmatchedUnknownSkill, err.Error(), size)
	case d.Primary == "":
		reason := "no skill matches"
		if req.Text != "" {
			reason += " the text"
		}
		if req.Type != "" && req.Type != selector.RequestType {
			reason += fmt.Sprintf(" event type %q", req.Type)
		}
		if len(d.Candidates) > 0 {
			reason = fmt.Sprintf("no skill scored above the threshold %.2f; best: %s %.3f", d.Threshold, d.Candidates[0].Name, d.Candidates[0].Score)
		}
		return r.unmatched(ctx, msg, ref, actID, meta, d, reason)
	}

	// A plan's entries, each built once (an execution id is a hash).
	refs := make(map[string]events.SkillRef, 1)
	refOf := func(name string) events.SkillRef {
		if sr, ok := refs[name]; ok {
			return sr
		}
		var sr events.SkillRef
		if c := d.Candidate(name); c != nil {
			sr = skillRef(*c, e)
		} else { // the generic skill, appended to the chain without being recalled
			s, _ := r.sel.Get(name)
			sr = skillRef(selector.Candidate{Name: s.Name, Skill: s, Source: "generic"}, e)
		}
		refs[name] = sr
		return sr
	}
	plan := events.Plan{Primary: refOf(d.Primary), ParallelGroups: d.ParallelGroups, EstimatedCost: d.EstimatedCost, Parameters: d.Parameters}
	for _, n := range d.Fallback {
		plan.FallbackChain = append(plan.FallbackChain, refOf(n))
	}
	for _, n := range d.Always {
		plan.Always = append(plan.Always, refOf(n))
	}
	data := events.RouteDecided{ActivationID: actID, Trigger: ref, Plan: plan, Threshold: d.Threshold, Candidates: candidates(d)}

	decidedID := actID + ".route.decided" // the plan's id, the jobs' cause

	depth, err := r.depthOf(ctx, e)
	if errors.Is(err, errBadParent) {
		return r.reject(ctx, msg, ref, events.UnmatchedInvalid, err.Error(), size)
	}
	if err != nil {
		return err
	}
	running := d.Running()
	live := e.Ext(events.ExtProgress) == events.ProgressLive
	jobs := make([]*nats.Msg, 0, len(running))
	var together [][]string
	if len(running) > 1 {
		// Whichever worker ends the last of them says the activation is over.
		together = make([][]string, len(running))
		for i, name := range running {
			together[i] = []string{refOf(name).ExecutionID}
		}
		for _, f := range plan.FallbackChain {
			together[0] = append(together[0], f.ExecutionID)
		}
	}
	// The jobs are the activation's record, each written once: create-only
	// publishes on subjects that name the activation, in a stream that keeps them. If
	// the primary's job exists, this trigger was routed before — by an earlier
	// delivery of this same message that died before acking it, or as an earlier
	// message with the same source and id, published again after the duplicate
	// window. Either way no second execution starts; the publisher finds the first
	// one's events, and its result, under the same activation id. The decision rides
	// in the jobs (events.Job.Route), where followers read it; it is an event of its
	// own only where the events level persists it.
	if prev, ok := r.routedElsewhere(ctx, md, actID, plan.Primary.Name); ok {
		r.cfg.Log.Info("router: trigger routed before to another skill (the catalog changed since); its first activation answers it",
			"activation", actID, "source", ref.Source, "id", ref.ID, "first", prev, "now", plan.Primary.Name)
		return msg.Ack()
	}
	pubs := make([]trace.Span, 0, len(running)+1)
	for i, name := range running {
		sr := refOf(name)
		job := events.Job{
			Depth:        depth,
			ExecutionID:  sr.ExecutionID,
			ActivationID: actID,
			Skill:        sr,
			Inputs:       inputs,
			Trigger:      ref,
			Live:         live,
			Together:     together,
		}
		if i == 0 {
			job.Fallback = plan.FallbackChain // only the primary's job falls back
		}
		job.Route = events.RouteOf(data, i == 0) // last in its data, which a worker skips
		jm := meta
		jm.ExecutionID = job.ExecutionID
		jm.CausationID = decidedID
		// The job's PRODUCER span: the worker's delivery continues from it. It is
		// started first, so the job carries it in its JSON.
		attrs := telemetry.Job{Skill: sr.Name, Version: sr.Version, ActivationID: actID, ExecutionID: sr.ExecutionID, Pool: sr.Pool}.Attributes()
		if attrs != nil { // nil with tracing off: then nothing to append to
			attrs = append(attrs, telemetry.AttrRouteMethod.String(sr.Source), telemetry.AttrRouteScore.Float64(sr.Score))
		}
		jsubj, jid := subj.Exec(sr.Pool, sr.Name, actID, events.StagePlan), job.ExecutionID+".job"
		_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: jsubj, Template: r.jobTemplate, ID: jid},
			&jm.TraceParent, &jm.TraceState, attrs...)
		pubs = append(pubs, span)
		jobMsg, err := bus.Event{ID: jid, Source: r.cfg.Source, Type: events.TypeJob, Meta: jm}.JobMsgOf(jsubj, &job)
		if err != nil {
			telemetry.EndAll(pubs, err)
			return err
		}
		if err := r.cfg.Bus.Fits(jobMsg); err != nil {
			telemetry.EndAll(pubs, err)
			return r.reject(ctx, msg, ref, events.UnmatchedTooLarge, err.Error(), size)
		}
		jobs = append(jobs, jobMsg)
	}

	b := r.cfg.Bus.Batch()
	if r.cfg.Events.Persisted(events.TypeRouteDecided) {
		dsubj := subj.Event(actID, events.TypeRouteDecided)
		// Built only here: boxing the decision as the event's data costs an allocation.
		decided := bus.Event{ID: decidedID, Source: r.cfg.Source, Type: events.TypeRouteDecided, Meta: meta, Data: data}
		_, dspan := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: dsubj, Template: subj.Prefix + ".events.{activation}.route.decided", ID: decided.ID},
			&decided.Meta.TraceParent, &decided.Meta.TraceState, telemetry.AttrActivationID.String(actID))
		pubs = append(pubs, dspan)
		dm, err := decided.Msg(dsubj)
		if err != nil {
			telemetry.EndAll(pubs, err)
			return err
		}
		b.Create(dm)
	}
	for _, m := range jobs {
		b.Create(m)
	}
	err = b.Wait(ctx)
	telemetry.EndAll(pubs, err)
	if err != nil {
		return err
	}
	if b.Duplicates() && b.Duplicate(refOf(running[0]).ExecutionID+".job") {
		if md != nil && md.NumDelivered == 1 {
			r.cfg.Log.Info("router: trigger routed before; its first activation answers it",
				"activation", actID, "source", ref.Source, "id", ref.ID, "seq", ref.Seq)
		}
		return msg.Ack()
	}
	// Announce the decision to whoever follows the activation live (a plain NATS
	// publish with no body): the follower reads it from the jobs just stored.
	if live {
		_ = r.cfg.Bus.NC.Publish(subj.Live(actID, plan.Primary.ExecutionID, events.TypeRouteDecided), nil)
	}
	if n := noteOf(ctx); n != nil {
		n.method = plan.Primary.Source
	}
	return msg.Ack()
}

// errBadParent is a trigger naming a parent activation (events.ExtParent) that is
// not one, or that has no job.
var errBadParent = errors.New("bad parent activation")

// depthOf is the delegation depth of a trigger's jobs: 0 for a trigger published by
// anyone but the skill tool, and one more than its parent job's for a trigger the
// skill tool published, whose events.ExtParent names the activation of the job
// that invoked it. The depth is read from that job, which a router wrote: nothing a
// sender puts in a trigger lowers it (earlier versions took a "skilldepth"
// extension at its word, and a trigger saying -20 let a skill delegate 22 levels
// deep). Naming a parent can only make a trigger deeper.
func (r *Router) depthOf(ctx context.Context, e *bus.Binary) (int, error) {
	act := e.Ext(events.ExtParent)
	if act == "" {
		return 0, nil
	}
	if err := events.CheckToken(events.ExtParent, act); err != nil {
		return 0, fmt.Errorf("%w: %v", errBadParent, err)
	}
	// Every job of an activation carries the depth its plan's jobs were given.
	m, err := r.jobs.GetLastMsgForSubject(ctx, r.cfg.Bus.Subjects.Exec("*", "*", act, "*"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, fmt.Errorf("%w: %s %s names an activation with no job", errBadParent, events.ExtParent, act)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the job of parent activation %s: %w", act, err)
	}
	pe, err := bus.DecodeFast(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
	var j events.Job
	if err == nil {
		err = events.DecodeJobWithoutRoute(pe.Data, &j)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the job of %s is unreadable: %v", errBadParent, act, err)
	}
	return max(j.Depth, 0) + 1, nil
}

// routedElsewhere looks, for a trigger that may have been routed before, for a
// decision that chose another primary than primary, and returns its primary.
//
// The plan's jobs are create-only on subjects that name their skill, so a trigger
// routed again to the same skill finds its job and starts nothing without any read.
// Routed to another skill (the catalog changed between two deliveries), it would
// start a second execution: so a delivery that is not certainly the first — a
// redelivery, or a trigger stored before this router's connection began, whose
// delivery count a server restart may have reset — reads the decision first. First
// deliveries of fresh triggers, nearly all of them, read nothing.
func (r *Router) routedElsewhere(ctx context.Context, md *jetstream.MsgMetadata, actID, primary string) (string, bool) {
	if md != nil && md.NumDelivered == 1 && r.epoch.Fresh(ctx, md.Sequence.Stream) {
		return "", false
	}
	prev, _, err := r.cfg.Bus.Decision(ctx, actID)
	if err != nil || prev.Plan.Primary.Name == primary {
		return "", false
	}
	return prev.Plan.Primary.Name, true
}

// decide runs the optional recall sources (each bounded by RecallTimeout, their
// failures logged and ignored), then the selector.
func (r *Router) decide(ctx context.Context, req selector.Request) (*selector.Decision, error) {
	r.sync()
	if req.Text != "" && req.Skill == "" && len(r.cfg.Recallers) > 0 {
		skills := r.sel.Skills()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, rc := range r.cfg.Recallers {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, r.cfg.RecallTimeout)
				defer cancel()
				got, err := rc.Recall(rctx, req.Text, skills)
				if err != nil {
					r.cfg.Log.Warn("router: recall source failed; routing without it", "source", rc.Name(), "err", err)
					return
				}
				mu.Lock()
				req.Recalled = append(req.Recalled, got...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	return r.sel.Select(req, r.live.env())
}

// Decide routes a request the way a trigger is routed, without publishing anything;
// `skillbus route --nats-url` asks it through the router's service.
func (r *Router) Decide(ctx context.Context, req selector.Request) (*selector.Decision, error) {
	return r.decide(ctx, req)
}

func candidates(d *selector.Decision) []events.Candidate {
	out := make([]events.Candidate, len(d.Candidates))
	for i, c := range d.Candidates {
		out[i] = events.Candidate{
			Name: c.Name, Version: c.Version, Source: c.Source, Sources: c.Sources, Score: c.Score,
			Components: events.ScoreComponents(c.Components), Selected: c.Selected, Role: c.Role, Reason: c.Reason,
		}
	}
	return out
}

func skillRef(c selector.Candidate, e *bus.Binary) events.SkillRef {
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
		ExecutionID: events.ExecutionID(e.Source, e.ID, s.Name),
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
// wrapped as {"data": value}. obj is the inputs decoded, read once for routing.
func inputsOf(e *bus.Binary) (_ json.RawMessage, obj map[string]any, _ error) {
	data := e.Data
	if len(data) == 0 {
		return json.RawMessage("{}"), map[string]any{}, nil
	}
	var v any
	if err := events.DecodeValue(data, &v); err != nil {
		if mt := e.DataMediaType(); mt == "" || mt == "application/json" || mt == "text/json" {
			return nil, nil, fmt.Errorf("data is not valid JSON (datacontenttype %q): %v", e.ContentType, err)
		}
		b, _ := json.Marshal(map[string]string{"data": string(data)})
		_ = json.Unmarshal(b, &obj) // as the skill will read it (invalid UTF-8 replaced)
		return b, obj, nil
	}
	if m, ok := v.(map[string]any); ok {
		return json.RawMessage(data), m, nil
	}
	obj = map[string]any{"data": v}
	b, err := json.Marshal(obj)
	return b, obj, err
}

// textOf is selector.TextOf over inputs already decoded: the first of fields
// (selector.DefaultTextFields when nil) that holds a non-blank string.
func textOf(obj map[string]any, fields []string) string {
	if fields == nil {
		fields = selector.DefaultTextFields
	}
	for _, f := range fields {
		if s, ok := obj[f].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// reject terminates a poison trigger after recording it: the raw message goes to the
// DLQ (dead._trigger, kept 30 days) with the reason in headers, and route.unmatched is
// published.
func (r *Router) reject(ctx context.Context, msg jetstream.Msg, ref events.TriggerRef, code, reason string, size int) error {
	if n := noteOf(ctx); n != nil {
		n.outcome = telemetry.OutcomeRejected
	}
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
	_, dspan := telemetry.StartPublishMsg(ctx, dead, r.cfg.Bus.Subjects.Prefix+".dead._trigger", telemetry.AttrActivationID.String(actID))
	b.Publish(dead)
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeRouteUnmatched), bus.Event{
		ID: actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: bus.Meta{CorrelationID: actID},
		Data: events.RouteUnmatched{ActivationID: actID, Code: code, Reason: reason, Trigger: ref, Size: size},
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

// unmatched records a valid trigger no skill wants, with the best candidates, and
// acks it.
func (r *Router) unmatched(ctx context.Context, msg jetstream.Msg, ref events.TriggerRef, actID string, meta bus.Meta, d *selector.Decision, reason string) error {
	if n := noteOf(ctx); n != nil {
		n.outcome = telemetry.OutcomeUnmatched
	}
	cs := candidates(d)
	if len(cs) > maxUnmatchedCandidates {
		cs = cs[:maxUnmatchedCandidates]
	}
	b := r.cfg.Bus.Batch()
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeRouteUnmatched), bus.Event{
		ID: actID + ".route.unmatched", Source: r.cfg.Source, Type: events.TypeRouteUnmatched, Meta: meta,
		Data: events.RouteUnmatched{ActivationID: actID, Code: events.UnmatchedNoSkill, Reason: reason, Trigger: ref, Threshold: d.Threshold, Candidates: cs},
	})
	if err := b.Wait(ctx); err != nil {
		return err
	}
	return msg.Ack()
}
