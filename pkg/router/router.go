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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
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
	cfg    Config
	epoch  *bus.Epoch
	sel    *selector.Selector
	typos  typoLog // unmatched types one edit from a skill's, logged
	syncMu sync.Mutex
	synced atomic.Uint64
	// gen counts the catalogs the selector was given (a catalog's revision may
	// repeat: a bucket made again counts from 1); the memo's decisions are of one.
	gen atomic.Uint64
	// flows are the catalog's skills' flow control, compiled (see compileFlows).
	flows   atomic.Pointer[map[string]*compiledFlow]
	live    *live
	svc     micro.Service
	loop    *bus.Loop
	answers *bus.Loop
	fired   *bus.Loop // debounced runs that are due
	runs    jetstream.KeyValue
	events  jetstream.Stream
	jobs    jetstream.Stream // read for the depth of a skill's child triggers
	limits  *limiter
	waits   *waitIndex // open wait_for_event waits (wait.go)
	// ramps are the skills' version ramps (ramp.go); nil while none.
	ramps  atomic.Pointer[map[string]*run.Ramp]
	rampIx *rampIndex
	// jobTemplate is the jobs' subject template, for their PRODUCER spans.
	jobTemplate string
	parseConfig parseConfig
	// cancels are the catalog's cancel_on rules by the type of event that cancels.
	cancels atomic.Pointer[map[string][]*cancelRule]
	control *control.Controller
	// bg counts the courtesy reads under way after a trigger's ack (solowait.go),
	// which Stop waits for.
	bg sync.WaitGroup
	// faults, set by tests, fails the router at named points (Router.fault).
	faults func(point string) error
	// waitHook, set by tests, sees each change of a wait record the router's
	// watcher delivers after the first load, before it is indexed.
	waitHook func(jetstream.KeyValueEntry)
	// waitLookback, set by tests, replaces waitReplayLookback.
	waitLookback time.Duration
	// replayHook, set by tests, sees each replay of triggers for waits: how
	// many waits it matches.
	replayHook func(waits int)
	// memo remembers the decisions of triggers without text (memo.go).
	memo decisions
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
	r := &Router{cfg: cfg, sel: selector.New(cfg.Selector), jobTemplate: cfg.Bus.Subjects.JobTemplate()}
	r.parseConfig = parseConfig{subjects: cfg.Bus.Subjects, maxEventBytes: cfg.MaxEventBytes, textFields: cfg.TextFields}
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
	all := r.cfg.Catalog.All()
	// Flows first: a handler that selects a skill from the new catalog must find
	// its compiled filter (admit compiles one it does not find, as a safeguard).
	prev := r.flows.Load()
	var prevm map[string]*compiledFlow
	if prev != nil {
		prevm = *prev
	}
	flows := compileFlows(all, prevm)
	cancels := cancelIndex(flows)
	// Cancels before flows: indexCancels, which reads flows first, skips the
	// lookups when the cancels are empty, and must see those of the flows it read.
	r.cancels.Store(&cancels)
	r.flows.Store(&flows)
	r.sel.Sync(all)
	r.gen.Add(1)
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
	c, err := r.cfg.Bus.EnsureConsumer(ctx, r.cfg.Bus.StreamTriggers(), r.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("router: consumer: %w", err)
	}
	if r.jobs, err = r.cfg.Bus.Stream(ctx, r.cfg.Bus.StreamJobs()); err != nil {
		return fmt.Errorf("router: stream %s: %w", r.cfg.Bus.StreamJobs(), err)
	}
	if r.limits, err = newLimiter(ctx, r.cfg.Bus); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	if err := r.startConfirmations(ctx); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	if r.control, err = control.New(ctx, r.cfg.Bus); err != nil {
		r.answers.Stop(ctx)
		return fmt.Errorf("router: %w", err)
	}
	if err := r.startWaits(ctx); err != nil {
		r.answers.Stop(ctx)
		return fmt.Errorf("router: waits: %w", err)
	}
	if err := r.startRamps(ctx); err != nil {
		r.answers.Stop(ctx)
		r.stopWaits()
		return fmt.Errorf("router: ramps: %w", err)
	}
	if err := r.startDebounce(ctx); err != nil {
		r.answers.Stop(ctx)
		r.stopWaits()
		r.stopRamps()
		return fmt.Errorf("router: %w", err)
	}
	r.sync()
	// Learn the epoch before the first trigger arrives (see routedElsewhere).
	r.epoch = r.cfg.Bus.NewEpoch(r.cfg.Bus.StreamTriggers())
	r.epoch.Fresh(ctx, 0)
	if err := r.live.start(ctx); err != nil {
		r.answers.Stop(ctx)
		r.fired.Stop(ctx)
		return fmt.Errorf("router: following results and workers: %w", err)
	}
	if err := r.startService(ctx); err != nil {
		r.live.stop()
		r.answers.Stop(ctx)
		r.fired.Stop(ctx)
		return fmt.Errorf("router: %w", err)
	}
	r.loop, err = bus.Consume(c, r.cfg.Concurrency, r.handle, r.cfg.Log)
	if err != nil {
		r.stopService()
		r.live.stop()
		r.answers.Stop(ctx)
		r.fired.Stop(ctx)
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
	if r.fired != nil {
		r.fired.Stop(ctx)
	}
	r.stopService()
	r.live.stop()
	r.stopWaits()
	r.stopRamps()
	r.bg.Wait()
}

func (r *Router) handle(ctx context.Context, msg jetstream.Msg) {
	// The trigger's CONSUMER span continues the publisher's trace (or starts one);
	// the decision and the jobs carry it on.
	start := time.Now()
	ctx, span := bustrace.StartConsume(ctx, msg, r.cfg.Durable, nil)
	note, err := r.route(ctx, bustrace.Settling(ctx, msg, ""))
	if err != nil {
		note = routeNote{outcome: telemetry.OutcomeFailed}
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrOutcome.String(note.outcome))
		if note.method != "" {
			span.SetAttributes(telemetry.AttrRouteMethod.String(note.method))
		}
	}
	telemetry.End(span, err)
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.Route(ctx, note.outcome, note.method, time.Since(start))
	}
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

// route handles one trigger: parse, decide, plan, settle. It returns an error only
// when the trigger should be retried (a read or a publish failed); every outcome
// about the trigger itself is recorded.
func (r *Router) route(ctx context.Context, msg jetstream.Msg) (routeNote, error) {
	var t trigger
	o := parse(ctx, msg, r.parseConfig, &t)
	if o == nil {
		if err := r.matchWaits(ctx, &t); err != nil {
			return routeNote{}, err
		}
		var err error
		if o, err = r.decideTrigger(ctx, &t); err != nil {
			return routeNote{}, err
		}
	}
	return r.settle(ctx, &t, o)
}

// decideTrigger asks the selector about a parsed trigger, and for a trigger a
// skill takes, its parent's job for its depth; then it plans. What it reads may
// fail (a recall source, the registry, the jobs stream): only a failed read of
// the jobs stream is an error, which retries the trigger.
func (r *Router) decideTrigger(ctx context.Context, t *trigger) (outcome, error) {
	d, err := r.decide(ctx, t)
	if err != nil {
		var unknown *selector.UnknownSkillError
		if !errors.As(err, &unknown) {
			return nil, err
		}
		if t.burstOf != "" {
			// Deleted with a burst or a batch it took triggers for.
			return r.burstOfDeleted(ctx, t)
		}
		if why, ok := r.invalidSkill(ctx, unknown.Name); ok {
			return rejected{events.UnmatchedInvalidSkill, why}, nil
		}
		return rejected{events.UnmatchedUnknownSkill, err.Error()}, nil
	}
	if d.Primary != "" {
		t.depth, err = r.depthOf(ctx, t.e)
		if errors.Is(err, errBadParent) {
			return rejected{events.UnmatchedInvalid, err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
	}
	t.ramps = rampsNow(&r.ramps)
	o := plan(d, t, r.cfg.Bus.Subjects, r.sel.Get)
	if u, ok := o.(unmatched); ok && u.code == events.UnmatchedNoSkill && len(d.Candidates) == 0 && t.req.Type != "" && t.req.Type != selector.RequestType {
		if c := r.sel.ClosestType(t.req.Type); c != "" {
			u.reason += fmt.Sprintf("; did you mean %s?", c)
			o = u
			r.typos.note(r.cfg.Log, t.req.Type, c)
		}
	}
	return o, nil
}

// typoLog logs an event type that no skill takes but one a skill takes is near,
// once a minute per type at most: a sender's typo ("com.example.order.craeted")
// would otherwise only show to someone waiting on the trigger, since an event no
// skill takes is acked quietly (most event types on a bus are no skill's).
type typoLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *typoLog) note(log *slog.Logger, typ, near string) {
	now := time.Now()
	l.mu.Lock()
	if l.last == nil || len(l.last) > 1024 {
		l.last = map[string]time.Time{}
	}
	if at, ok := l.last[typ]; ok && now.Sub(at) < time.Minute {
		l.mu.Unlock()
		return
	}
	l.last[typ] = now
	l.mu.Unlock()
	log.Info("router: no skill takes this event type; acked without a run", "type", typ, "did_you_mean", near)
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
	pe, err := bus.DecodeFast(bus.MsgOf(m.Subject, m.Header, m.Data))
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
func (r *Router) decide(ctx context.Context, t *trigger) (*selector.Decision, error) {
	r.sync()
	if t.req.Text != "" && t.req.Skill == "" && len(r.cfg.Recallers) > 0 {
		t.req.Recalled = r.recall(ctx, t.req.Text, t.req.Recalled)
	}
	return r.selectFor(ctx, t)
}

// recall asks the recall sources in parallel about text, each bounded by
// RecallTimeout, and appends what they found to recalled.
func (r *Router) recall(ctx context.Context, text string, recalled []selector.Recall) []selector.Recall {
	skills := r.sel.Skills()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rc := range r.cfg.Recallers {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, r.cfg.RecallTimeout)
			defer cancel()
			got, err := rc.Recall(rctx, text, skills)
			if err != nil {
				r.cfg.Log.Warn("router: recall source failed; routing without it", "source", rc.Name(), "err", err)
				return
			}
			mu.Lock()
			recalled = append(recalled, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return recalled
}

// selectFor runs the selector over a trigger's request (its recalled candidates
// already gathered), with its skills' flow control. A decision that starts a
// debounced skill folds the trigger into its burst and is decided again without
// it; one that starts a skill with a rate limit counts the trigger against it
// (Router.count) and is decided again with the verdict: without the skill when
// it is over its limit. Skills in a fallback chain, or cut from the plan, are
// neither folded nor counted. Skills without flow control pay nothing for it.
func (r *Router) selectFor(ctx context.Context, t *trigger) (*selector.Decision, error) {
	var flows map[string]*compiledFlow
	if f := r.flows.Load(); f != nil {
		flows = *f
	}
	return r.selectWith(ctx, t, r.live.env(), flows)
}

// selectWith is selectFor asking env about the running system.
func (r *Router) selectWith(ctx context.Context, t *trigger, env selector.Env, flows map[string]*compiledFlow) (*selector.Decision, error) {
	env.Admit = admit(t, flows)
	// A trigger's question asked before, with the same answers from the
	// running system: the decision remembered (memo.go). A trigger, not a
	// request of Decide's, whose caller may keep the decision.
	var keyBuf [256]byte
	var key []byte
	gen := r.gen.Load()
	if t.msg != nil {
		if k, ok := memoKey(keyBuf[:0], &t.req); ok {
			d, remember := r.memo.get(gen, k, env, flows, &t.verdicts)
			if d != nil {
				return d, nil
			}
			if remember {
				key = k
			}
		}
	}
	for {
		// Asked for the first time, the selector is asked through a recording
		// of what it asks, for the memo.
		var ns notes
		rec := recording{env: env, notes: &ns}
		asking := env
		if key != nil {
			if env.Success != nil {
				asking.Success = rec.success
			}
			if env.PoolLive != nil {
				asking.PoolLive = rec.poolLive
			}
			asking.Admit = rec.admit
		}
		d, err := r.sel.Select(t.req, asking)
		if err != nil {
			return d, err
		}
		if key != nil {
			if ns.pure(env, flows) {
				// Nothing it asked depends on the trigger but filters, which the
				// memo asks again: no fold, no count.
				r.memo.put(gen, key, d, slices.Clone(ns.asked[:ns.n]))
				return d, nil
			}
			key = nil // not to be remembered: it may fold or count the trigger
		}
		if t.foldRunning(d) {
			t.uncounted, t.verdicts = nil, flowVerdicts{}
			continue
		}
		if t.uncounted == nil {
			return d, nil
		}
		again, err := r.count(ctx, t, d)
		if err != nil || !again {
			return d, err
		}
		t.verdicts = flowVerdicts{}
	}
}

// Decide routes a request the way a trigger is routed, without publishing anything,
// for a Go program that embeds a router (`skillbus route --nats-url` asks the same
// of a running router through its service).
// A filter reads the request's type and data; a rate limit is read, not counted:
// a skill whose window is full now is refused as a trigger would be.
func (r *Router) Decide(ctx context.Context, req selector.Request) (*selector.Decision, error) {
	var data any
	if req.Data != nil {
		data = req.Data
	}
	return r.decide(ctx, &trigger{req: req, e: &bus.Binary{Type: req.Type}, data: data})
}

// RequestData reads a route request's data (JSON) as the router reads a trigger's:
// obj is the object the selector and the skill's inputs see, data that is not an
// object wrapped as {"data": v}; data is the value a filter's data reads, v itself.
func RequestData(raw json.RawMessage) (obj map[string]any, data any, err error) {
	_, obj, data, err = inputsOf(&bus.Binary{Data: raw})
	return obj, data, err
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
// wrapped as {"data": value}. obj is the inputs decoded, read once for routing;
// data is the data itself decoded (nil for none, a string for non-JSON data).
func inputsOf(e *bus.Binary) (_ json.RawMessage, obj map[string]any, data any, _ error) {
	raw := e.Data
	if len(raw) == 0 {
		return json.RawMessage("{}"), map[string]any{}, nil, nil
	}
	var v any
	if err := events.DecodeValue(raw, &v); err != nil {
		if mt := e.DataMediaType(); mt == "" || mt == "application/json" || mt == "text/json" {
			return nil, nil, nil, fmt.Errorf("data is not valid JSON (datacontenttype %q): %v", e.ContentType, err)
		}
		b, _ := json.Marshal(map[string]string{"data": string(raw)})
		var wrapped map[string]any      // not obj: &obj would move it to the heap on every call
		_ = json.Unmarshal(b, &wrapped) // as the skill will read it (invalid UTF-8 replaced)
		return b, wrapped, wrapped["data"], nil
	}
	if m, ok := v.(map[string]any); ok {
		return json.RawMessage(raw), m, m, nil
	}
	obj = map[string]any{"data": v}
	b, err := json.Marshal(obj)
	return b, obj, v, err
}

// textOf is selector.TextOf over inputs already decoded: the first of fields
// (selector.DefaultTextFields when nil) that holds a non-blank string.
func textOf(obj map[string]any, fields []string) string {
	for _, f := range textFieldsOr(fields) {
		if s, ok := obj[f].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// textFieldsOr is fields, or selector.DefaultTextFields when there are none: the
// data fields a trigger's routing text is taken from.
func textFieldsOr(fields []string) []string {
	if len(fields) == 0 {
		return selector.DefaultTextFields
	}
	return fields
}
