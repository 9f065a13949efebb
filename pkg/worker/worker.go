// Package worker is the worker process: durable consumers on the JOBS stream, one per
// pool it serves, that run each job's skill and turn what it came to into persisted
// events before acking the job.
//
// A delivery goes through three stages. Admission (claim.go): the first delivery of a
// job stored in the worker's connection epoch runs at once; any other delivery finds
// the execution's outcome or claims the execution first. Execution (execute.go): the
// skill runs and returns a Decision. Settlement (settle, outcome.go), by decision:
//
//   - Complete: the execution.completed outcome is published, then the job is acked.
//   - Retry (a retryable failure with the skill's max_retries left, default 3):
//     execution.retrying is published and the job is handed back with
//     NakWithDelay(backoff); the broker redelivers it. No retry state lives in memory.
//   - Fail (fatal, repairable, or out of retries): if the plan's fallback chain has a
//     next skill, the execution.fallback outcome is published, then the next skill's
//     job on skillbus.exec.<pool>.<next> (the rest of the chain and the attempt
//     history travel in it); otherwise the execution.failed outcome, then the dead
//     letter (skillbus.dead.<skill>) and execution.deadlettered.
//   - Pause: the job is parked for a person's confirmation (pause.go).
//
// An execution has exactly one outcome: the three outcome events share one message id.
// An execution whose workers died running it more than CrashAllowance times (its
// claim taken over each time) is dead-lettered without running again, so a job that
// crashes workers cannot loop forever; deliberate hand-backs do not count.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/storage"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/stats"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// VersionLookup is where a worker finds the skill a job names, at the version its plan
// pinned; *catalog.Catalog implements it.
type VersionLookup interface {
	LookupVersion(ctx context.Context, name, digest string) (*skill.Skill, error)
}

// Backoff is the delay before a retryable failure is retried: Base·2^(attempt-1),
// capped at Max, with jitter in [d/2, d].
type Backoff struct {
	Base time.Duration // default 1s
	Max  time.Duration // default 1m
}

// Delay returns the backoff before retry number attempt (from 1).
func (b Backoff) Delay(attempt uint64) time.Duration {
	d := b.Base
	for i := uint64(1); i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Config configures a Worker.
type Config struct {
	// Bus, Catalog and Engine are required.
	Bus     *bus.Bus
	Catalog VersionLookup
	Engine  *workflow.Engine
	// Tools, when set, gives each job the worker's current tools (including tools
	// discovered on the bus since start); otherwise the Engine's tools are used.
	Tools Tools
	// Files reads skill bodies and files for instruction and script skills; without
	// it, instruction skills get the catalog's Body and script skills cannot run.
	Files Files
	// Instruct runs instruction skills; nil: they fail fatally (no chat model), so
	// the plan falls back.
	Instruct *instruct.Runner
	// Exec configures the processes of script skills (their working directory is
	// always a fresh copy of the skill's files).
	Exec tool.ExecConfig
	// Log receives the worker's logs; default slog.Default().
	Log *slog.Logger
	// Pools this worker serves; default ["default"].
	Pools []string
	// Concurrency is how many jobs of each pool run at once; default 32.
	Concurrency int
	// AckWait is how long JetStream waits for an ack before redelivering a job to
	// another worker; running jobs send InProgress well within it. Default 30s.
	AckWait time.Duration
	// Backoff of retryable failures; defaults as documented on Backoff.
	Backoff Backoff
	// CrashAllowance is how many times workers may die running an execution (its
	// claim taken over after the holder's lease ran out) before it is dead-lettered
	// unrun; default 2.
	CrashAllowance int
	// ConfirmTimeout is how long a confirmation waits for an answer when its skill
	// does not say; unanswered, it is denied. Default 1h; at most the events
	// retention (the timeout is a scheduled message in EVENTS).
	ConfirmTimeout time.Duration
	// MaxDepth bounds delegation through the skill tool; a job deeper than this
	// fails fatally. Default DefaultMaxDepth (2).
	MaxDepth int
	// Events is which events are persisted and which only published live; default
	// events.DefaultLevel (see events.Level for what each costs and keeps).
	Events events.Level
	// ReclaimGrace is how long after its connection to the server comes back a worker
	// lets the first delivery of an older job wait, so that a worker that was running
	// it before a server restart can claim it first. Default 5s.
	ReclaimGrace time.Duration
	// Metrics receives the worker's measurements (executions, steps, retries,
	// fallbacks, dead letters); nil records nothing.
	Metrics *telemetry.Metrics
	// Repair parks executions that fail with a repairable fault on a repair job
	// (skillbus.repair.<skill>) instead of failing them, for the repair workers to
	// fix the skill; false: they fail as any other failure. Turn it on only in a
	// fleet that runs repair workers.
	Repair bool
	// CancelGrace is how long the processes of a running exec step have, after
	// SIGTERM, before they are killed when their execution is cancelled; default
	// tool.DefaultStopGrace (5s).
	CancelGrace time.Duration
	// Name identifies this worker in events and heartbeats; default host-pid.
	Name string
	// Source is the CloudEvents source of the events the worker writes; default
	// "/skillbus/worker".
	Source string
}

// Worker runs jobs.
type Worker struct {
	cfg       Config
	instance  string // names this process in its claims (see claimRecord.Process)
	runs      jetstream.KeyValue
	cache     *cache
	events    jetstream.Stream
	loops     map[string]*bus.Loop // each served pool's own loop, by pool
	dueLoop   *bus.Loop            // the due throttled runs' (throttlewait.go)
	beat      *heartbeat
	jobBeats  *heartbeat // beats the running jobs (keepAlive)
	stats     *stats.Recorder
	counting  sync.WaitGroup     // the stats recorder's writes
	stopStat  context.CancelFunc // ends them
	epoch     *bus.Epoch
	inflight  running // the jobs running in this process
	stopWatch func()  // stops the reconnect notifications watchReconnects reads
	solo      solo
	cancel    context.CancelFunc // ends the solo-pool watch
	watching  sync.WaitGroup
	ctl       control            // cancelled executions, paused skills (control.go)
	stopCtl   context.CancelFunc // ends their watch
	ctlWatch  sync.WaitGroup
	gates     gates         // keyed concurrency (concurrency.go)
	prio      prioPools     // queue priority lanes (lanes.go)
	warmup    time.Duration // laneWarmup; tests set a longer one
	throttles sync.Map      // skill digest → *throttleProg (throttle.go)
	// current: the catalog's current version of each skill, by name (current.go).
	current atomic.Pointer[map[string]*skill.Skill]

	repairsOnce sync.Once
	repairs     jetstream.KeyValue
	repairsErr  error
}

// New validates cfg and returns a Worker; Start begins consuming.
func New(cfg Config) (*Worker, error) {
	if cfg.Bus == nil || cfg.Catalog == nil || cfg.Engine == nil {
		return nil, errors.New("worker: Bus, Catalog and Engine are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if len(cfg.Pools) == 0 {
		cfg.Pools = []string{skill.DefaultPool}
	}
	for _, p := range cfg.Pools {
		if err := events.CheckToken("pool", p); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 32
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.AckWait < time.Second {
		return nil, fmt.Errorf("worker: AckWait %v is below 1s", cfg.AckWait)
	}
	if cfg.Backoff.Base == 0 {
		cfg.Backoff.Base = time.Second
	}
	if cfg.Backoff.Max == 0 {
		cfg.Backoff.Max = time.Minute
	}
	if cfg.CrashAllowance == 0 {
		cfg.CrashAllowance = 2
	}
	if cfg.ConfirmTimeout == 0 {
		cfg.ConfirmTimeout = time.Hour
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	if cfg.Source == "" {
		cfg.Source = "/skillbus/worker"
	}
	if cfg.ReclaimGrace == 0 {
		cfg.ReclaimGrace = 5 * time.Second
	}
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = tool.DefaultStopGrace
	}
	lvl, err := events.ParseLevel(string(cfg.Events))
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cfg.Events = lvl
	if cfg.Concurrency < 0 || cfg.CrashAllowance < 0 || cfg.Backoff.Base < 0 || cfg.Backoff.Max < cfg.Backoff.Base || cfg.CancelGrace < 0 {
		return nil, errors.New("worker: Concurrency, CrashAllowance, CancelGrace and Backoff must be positive, with Backoff.Max ≥ Backoff.Base")
	}
	return &Worker{cfg: cfg, instance: nuid.Next(), warmup: laneWarmup}, nil
}

// ConsumerConfig is the durable consumer every worker of a pool shares.
func (w *Worker) ConsumerConfig(pool string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       "worker-" + pool,
		Description:   "skillbus workers of pool " + pool,
		FilterSubject: w.cfg.Bus.Subjects.ExecPool(pool),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cfg.AckWait,
		// No delivery limit: the worker ends executions itself (retries counted in the
		// claim, crashes by CrashAllowance). Hand-backs raise the delivery count
		// without a run (a claim held elsewhere, the grace after a reconnect; under
		// repeated server restarts, dozens of them), and a job past a limit would
		// stay in the work queue undelivered, with no outcome, for good.
		MaxDeliver:    -1,
		MaxAckPending: 10000,
	}
}

// Start creates or updates the consumers and starts running jobs.
func (w *Worker) Start(ctx context.Context) error {
	b := w.cfg.Bus
	var err error
	if w.runs, err = b.KV(ctx, b.BucketRuns()); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	cacheKV, err := b.KV(ctx, b.BucketCache())
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w.cache = &cache{kv: cacheKV}
	statsKV, err := b.KV(ctx, b.BucketStats())
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	// The outcomes this process publishes, counted for the routers' success rates.
	w.stats = stats.NewRecorder(statsKV, w.cfg.Log)
	sctx, stopStat := context.WithCancel(context.WithoutCancel(ctx))
	w.stopStat = stopStat
	w.counting.Go(func() { w.stats.Run(sctx, time.Second) })
	if w.events, err = b.Stream(ctx, b.StreamEvents()); err != nil {
		return fmt.Errorf("worker: stream %s: %w", b.StreamEvents(), err)
	}
	if _, err := b.Stream(ctx, b.StreamJobs()); err != nil {
		return fmt.Errorf("worker: stream %s: %w", b.StreamJobs(), err)
	}
	w.epoch = b.NewEpoch(b.StreamJobs())
	// Learn the epoch before the first job arrives: jobs stored before this worker
	// started take the claim path.
	w.epoch.Fresh(ctx, 0)
	reconnected, stop := b.Reconnected()
	w.stopWatch = stop
	go w.watchReconnects(reconnected)
	// Cancels and paused skills recorded before this worker started hold for the
	// first job it takes.
	if err := w.watchControl(ctx); err != nil {
		w.Stop(ctx)
		return err
	}
	if cat, ok := w.cfg.Catalog.(Skills); ok {
		w.setCurrent(cat.All()) // before the gates' view, whose first releases read it
	}
	if err := w.watchGates(ctx); err != nil {
		w.Stop(ctx)
		return err
	}
	if err := w.consumeDue(ctx); err != nil {
		w.Stop(ctx)
		return err
	}
	w.jobBeats = startJobBeats(ctx, w)
	lanes := w.lanesAtStart(ctx)
	w.loops = make(map[string]*bus.Loop, len(w.cfg.Pools))
	for _, pool := range w.cfg.Pools {
		c, err := b.EnsureConsumer(ctx, b.StreamJobs(), w.ConsumerConfig(pool))
		if err != nil {
			w.Stop(ctx)
			return fmt.Errorf("worker: consumer for pool %s: %w", pool, err)
		}
		if lanes[pool] {
			w.prio.mu.Lock()
			err := w.serveLanes(ctx, pool, c)
			w.prio.mu.Unlock()
			if err != nil {
				w.Stop(ctx)
				return fmt.Errorf("worker: pool %s: %w", pool, err)
			}
			continue
		}
		l, err := bus.Consume(c, w.cfg.Concurrency, w.handle, w.cfg.Log)
		if err != nil {
			w.Stop(ctx)
			return fmt.Errorf("worker: %w", err)
		}
		w.loops[pool] = l
	}
	if cat, ok := w.cfg.Catalog.(Skills); ok {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		w.cancel = cancel
		w.syncSolo(ctx, cat.All())
		w.watching.Go(func() { w.watchSolo(wctx, cat) })
		w.watching.Go(func() { w.watchLeftLanes(wctx) })
	}
	w.beat = startHeartbeat(ctx, b, w.cfg)
	return nil
}

// Stop stops taking jobs and waits for those in hand to finish until ctx ends; then
// the rest are handed back to the broker for another worker.
func (w *Worker) Stop(ctx context.Context) {
	if w.cancel != nil {
		w.cancel()
		w.watching.Wait()
		w.cancel = nil
	}
	w.stopSolo(ctx)
	w.stopLanes(ctx)
	var wg sync.WaitGroup
	for _, l := range w.loops {
		wg.Go(func() { l.Stop(ctx) })
	}
	if l := w.dueLoop; l != nil {
		wg.Go(func() { l.Stop(ctx) })
	}
	wg.Wait()
	w.loops, w.dueLoop = nil, nil
	if w.beat != nil {
		w.beat.stop()
		w.beat = nil
	}
	if w.jobBeats != nil {
		w.jobBeats.stop()
		w.jobBeats = nil
	}
	if w.stopStat != nil {
		w.stopStat() // the last counts are written on the way out
		w.counting.Wait()
		w.stopStat = nil
	}
	if w.stopWatch != nil {
		w.stopWatch()
		w.stopWatch = nil
	}
	if w.stopCtl != nil {
		w.stopCtl()
		w.ctlWatch.Wait()
		w.stopCtl = nil
	}
	w.stopGates()
}

// running is the jobs running in this process by execution id: a map under a
// mutex rather than a sync.Map, whose every store allocates.
type running struct {
	mu sync.Mutex
	m  map[string]*job
}

// add reserves j's execution for j; false: another delivery of it has it.
func (r *running) add(j *job) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, busy := r.m[j.data.ExecutionID]; busy {
		return false
	}
	if r.m == nil {
		r.m = make(map[string]*job)
	}
	r.m[j.data.ExecutionID] = j
	return true
}

// remove ends j's reservation.
func (r *running) remove(j *job) {
	r.mu.Lock()
	if r.m[j.data.ExecutionID] == j {
		delete(r.m, j.data.ExecutionID)
	}
	r.mu.Unlock()
}

// get returns the job running the execution, or nil.
func (r *running) get(executionID string) *job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[executionID]
}

// all returns the jobs running now.
func (r *running) all() []*job {
	r.mu.Lock()
	defer r.mu.Unlock()
	js := make([]*job, 0, len(r.m))
	for _, j := range r.m {
		js = append(js, j)
	}
	return js
}

// job is one delivery of a job message being handled.
type job struct {
	msg     jetstream.Msg
	data    events.Job
	meta    bus.Meta
	attempt uint64
	// delivery names this delivery of this job message, "<stream seq>.<nuid>":
	// unique per delivery even when the same execution's job is published again (a
	// resumed confirmation) or the server forgot how often it delivered it, so
	// progress events of a new delivery are never dropped as duplicates of an
	// earlier one's.
	// It is made when first asked for (deliveryID): a delivery that publishes no
	// progress and takes no claim never needs it.
	delivery     string
	deliveryOnce sync.Once
	id           string // see msgID
	seq          uint64 // the job message's stream sequence
	// delivered is the server's count of this message's deliveries, and progress
	// how many events of an execution followed live this delivery has stamped with
	// its place (events.Seq); outcomeSeq is the outcome's, taken once.
	delivered  uint64
	progress   atomic.Uint64
	outcomeSeq string
	skill      *skill.Skill
	batch      *bus.Batch
	start      time.Time
	log        *workflow.Log // the execution log of this delivery (nil for instruction and script skills)
	// fast: the first delivery of a job stored in the worker's current epoch; it runs
	// unclaimed (see claim.go). reconnects is the connection's count when it began.
	fast       bool
	reconnects uint64
	claim      claimState
	// takeovers: how many times a worker died holding the execution's claim.
	takeovers int
	// retries: the runs that failed retryably, as the claim records them;
	// released: the claim was handed back on purpose (see release).
	retries  int
	released bool
	beat     jobBeat // see keepAlive
	// stop is requested when the execution is cancelled while it runs here
	// (control.go); the run's context carries it to the engine and exec tool.
	stop     tool.Stop
	runCtx   runContext
	deadline runDeadline           // under runCtx
	timeout  workflow.TimeoutError // the cause of deadline at the run's time limit
	// What the run is handed, kept here so that a job's run allocates them with
	// the job rather than one by one: its decoded inputs, its observer and its
	// checkpoints.
	inputs map[string]any
	obs    observer
	cps    checkpoints
	// completed is the outcome complete publishes.
	completed completed
	// slots: the concurrency slots the run holds (concurrency.go); gated: it
	// went through the slots (took them or waits again).
	slots []heldSlot
	gated bool
}

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	err := w.process(ctx, msg)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		// Shutting down: hand the job back at once for another worker.
		_ = msg.Nak()
		return
	}
	if errors.Is(err, errLostClaim) {
		// Whoever holds the execution now settles it; this delivery comes back to
		// find its outcome.
		_ = msg.NakWithDelay(w.cfg.AckWait)
		return
	}
	w.cfg.Log.Error("worker: job handed back", "subject", msg.Subject(), "err", err)
	_ = msg.NakWithDelay(w.cfg.Backoff.Base)
}

// readJob decodes a delivered job. An error makes it a poison message.
//
// The job's envelope and data are read in place: their strings are slices of the
// message's data, which the job keeps, and which nothing may write to.
func (w *Worker) readJob(msg jetstream.Msg, md *jetstream.MsgMetadata) (*job, *bus.Binary, error) {
	// The job's data is decoded strictly below, so its envelope's reader need not
	// check it first; when the decoding fails, DecodeFast's verdict stands.
	e, unchecked := bus.DecodeUnchecked(msg)
	if !unchecked {
		var err error
		if e, err = bus.DecodeFast(msg); err != nil {
			return nil, nil, err
		}
	}
	// The attempt is 1 on the fast path; the claim path reads it from the claim
	// (the delivery count is no record of retries: see claim.go).
	j := &job{msg: msg, attempt: 1, batch: w.cfg.Bus.Batch(), start: time.Now(), seq: md.Sequence.Stream, delivered: md.NumDelivered}
	err := events.DecodeJobInPlace(e.Data, &j.data)
	if err != nil && unchecked {
		if e, err = bus.DecodeFast(msg); err != nil {
			return nil, nil, err
		}
		j.data = events.Job{}
		err = events.DecodeJobInPlace(e.Data, &j.data)
	}
	if err != nil || j.data.ExecutionID == "" || j.data.Skill.Name == "" {
		if err == nil {
			err = errors.New("job has no execution_id or skill")
		}
		return nil, nil, fmt.Errorf("job data: %w", err)
	}
	if x := j.data.ExecutionID; len(e.ID) == len(x)+len(".job") && strings.HasPrefix(e.ID, x) && strings.HasSuffix(e.ID, ".job") {
		j.id = e.ID // the id the plan gives a job, read rather than made again
	} else {
		j.id = x + ".job"
	}
	return j, e, nil
}

// gate settles a claimed job that must not run (cancelled, held by a paused
// skill, of a version the catalog lacks, too deeply delegated, declined by
// repair, or past the crash allowance) and reports whether it did; it also
// resolves the job's skill version.
func (w *Worker) gate(ctx context.Context, j *job) (done bool, err error) {
	if c, err := w.cancelOf(ctx, j); err != nil || c != nil {
		if err != nil {
			return true, err
		}
		return true, w.settle(ctx, j, Cancelled{Cancel: c})
	}
	if h := w.ctl.held(j.data.Skill.Name); h != nil {
		if held, err := w.hold(ctx, j, h); held || err != nil {
			return true, err
		}
	}
	// The version the plan pinned: a skill edited since keeps its runs on the old one.
	j.skill, err = w.cfg.Catalog.LookupVersion(ctx, j.data.Skill.Name, j.data.Skill.Digest)
	switch {
	case err != nil:
		return true, w.fail(ctx, j, "", failure.Fatalf("%v", err))
	case j.data.Depth > w.cfg.MaxDepth:
		return true, w.fail(ctx, j, "", failure.Fatalf("delegated %d levels deep through the skill tool; the limit is %d", j.data.Depth, w.cfg.MaxDepth))
	case j.data.Repair != nil && j.data.Repair.Declined != "":
		return true, w.declined(ctx, j)
	case j.takeovers > w.cfg.CrashAllowance:
		return true, w.fail(ctx, j, "", failure.Fatalf("workers died running it %d times (the crash allowance is %d): it is not run again", j.takeovers, w.cfg.CrashAllowance))
	}
	// The limits that count are the skill's current ones (current.go), unless
	// their keys cannot be read on this run (a newer version keys on an input
	// the pinned version's run does not have): then its own version's count.
	fs := w.flowSkill(j)
	if fs != j.skill && !w.keysRead(j, fs) {
		fs = j.skill
	}
	if fs.Throttle != nil {
		if done, err := w.throttle(ctx, j, fs); done || err != nil {
			return true, err
		}
	}
	if len(fs.Concurrency) > 0 {
		if p := w.gateProgsOf(fs); p.err != nil || len(p.entries) > 0 {
			return w.takeSlots(ctx, j, p)
		}
	}
	return false, nil
}

// process handles one delivery. It returns an error only when the delivery must be handed
// back without an outcome (a publish failed, or shutdown).
func (w *Worker) process(ctx context.Context, msg jetstream.Msg) (err error) {
	// By value, kept on the stack: msg.Metadata() allocates what it returns.
	mdv, err := bus.Metadata(msg)
	if err != nil {
		return err
	}
	md := &mdv
	j, e, err := w.readJob(msg, md)
	if err != nil {
		return w.poison(ctx, msg, err)
	}
	j.meta = e.Meta()
	// A job says its activation and execution in its data (bus.Event.JobMsg); the
	// events it causes carry them as extensions.
	j.meta.CorrelationID, j.meta.ExecutionID = j.data.ActivationID, j.data.ExecutionID
	// The delivery's CONSUMER span continues the trace the job carries and links to
	// the delivery before it; everything this delivery publishes carries the span on.
	var template string // the spans' name for the job's subject
	if !telemetry.Off() {
		template = events.ExecTemplate(msg.Subject())
	}
	ctx, span := bustrace.StartDelivery(ctx, msg, md.Consumer, telemetry.Delivery{
		ExecutionID: j.data.ExecutionID, Resumes: len(j.data.Answers), Attempt: int(md.NumDelivered),
		Recovered: msg.Headers().Get(events.HeaderRecovered) != "", Template: template,
		ID: e.ID, TraceParent: j.meta.TraceParent, TraceState: j.meta.TraceState,
	}, telemetry.Job{
		Skill: j.data.Skill.Name, Version: j.data.Skill.Version, ActivationID: j.data.ActivationID,
		ExecutionID: j.data.ExecutionID, Attempt: int(md.NumDelivered), Pool: j.data.Skill.Pool,
	}.Attributes()...)
	defer func() { telemetry.End(span, err) }()
	j.msg = bustrace.Settling(ctx, msg, template) // ack, nak and term get settle spans under it
	if tp, ts := telemetry.Inject(ctx); tp != "" {
		j.meta.TraceParent, j.meta.TraceState = tp, ts
	}
	j.reconnects = w.cfg.Bus.Reconnects()
	j.fast = md.NumDelivered == 1 && len(j.data.Answers) == 0 && msg.Headers().Get(events.HeaderRecovered) == "" && msg.Headers().Get(events.HeaderCheckCancel) == "" &&
		!w.mayHaveWaited(ctx, md.Timestamp) && w.epoch.Fresh(ctx, md.Sequence.Stream)
	// One delivery of an execution at a time in this process, reserved before it
	// is claimed: a claim names the worker, not the delivery, so two deliveries here
	// could otherwise both take it.
	if !j.fast {
		// Released for a slot: a delivery that ends without going through the
		// slots (cancelled, ended by another copy, handed back while another
		// delivery of it is here) passes its turn on (gatecheck.go).
		if gate := msg.Headers().Get(events.HeaderConcGate); gate != "" {
			defer func() { w.passTurn(ctx, j, gate, err) }()
		}
	}
	if !w.inflight.add(j) {
		return j.msg.NakWithDelay(w.leaseFor(j) / 2)
	}
	defer w.inflight.remove(j)
	if !j.fast {
		if handled, err := w.claim(ctx, j); handled || err != nil {
			return err
		}
	}
	if done, err := w.gate(ctx, j); done {
		return err
	}
	if j.slots != nil {
		defer w.freeSlots(j) // after the heartbeat below stops
	}

	if len(j.data.Inputs) > 0 {
		if err := events.DecodeInputs(j.data.Inputs, &j.inputs); err != nil {
			return w.fail(ctx, j, "", failure.Fatalf("inputs are not a JSON object: %v", err))
		}
	}
	if w.emits(j, events.TypeExecutionStarted) {
		w.emit(j, events.TypeExecutionStarted, "", events.ExecutionStarted{
			ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Version: j.skill.Version,
			Inputs: j.data.Inputs, Attempt: j.attempt, Worker: w.cfg.Name,
		})
	}

	var answers map[string]workflow.Answer // nil for a job no one has answered
	if len(j.data.Answers) > 0 {
		answers = make(map[string]workflow.Answer, len(j.data.Answers))
	}
	for step, a := range j.data.Answers {
		answers[step] = workflow.Answer(a)
	}
	var tools *tool.Set
	if w.cfg.Tools != nil {
		tools = w.cfg.Tools.Ensure(ctx, toolNames(j.skill)...)
	}
	// The run's context: cancelled when the claim is lost (see renew), and ending
	// at a workflow's time limit, which the engine then does not set again.
	var limit time.Duration
	if j.skill.Workflow != nil {
		limit = j.skill.ExecTimeout()
	}
	j.timeout = workflow.TimeoutError{Limit: limit, Default: j.skill.Timeout <= 0}
	j.deadline.start(ctx, limit, &j.timeout)
	defer j.deadline.cancel()
	j.stop.Grace = w.cfg.CancelGrace
	j.runCtx = runContext{
		StopContext: tool.StopContext{Context: &j.deadline, Stop: &j.stop},
		parent:      parent{activation: j.data.ActivationID, depth: j.data.Depth},
	}
	rctx := context.Context(&j.runCtx) // the run's context with the stop and the parent, allocated with the job
	if j.skill.Workflow == nil && j.skill.Kind == skill.KindInstruction {
		// A model's turns have no step boundary to stop at: a cancel ends the run.
		stopped := j.stop.Done()
		go func() {
			select {
			case <-stopped:
				j.deadline.cancel()
			case <-rctx.Done():
			}
		}()
	}
	j.claim.mu.Lock()
	j.claim.run = &j.deadline
	j.claim.mu.Unlock()
	// The heartbeat goes on while the decision is settled: a settle that waits out a
	// server outage still holds the job and the execution's claim.
	w.keepAlive(ctx, j)
	defer j.stopBeat()
	d := j.cancelledOf(w.execute(rctx, j, j.inputs, answers, tools))
	j.finish()
	if h := finishedHook.Load(); h != nil {
		(*h)(j.data.ExecutionID)
	}
	if ctx.Err() != nil {
		if _, ok := d.(Complete); !ok {
			return ctx.Err()
		}
	}
	if j.isLost() {
		return errLostClaim
	}
	return w.settle(ctx, j, d)
}

// settle turns an execution's decision into what it causes — persisted events, the
// next job, a dead letter, a paused record — and then acks or naks the job. It is
// the only place that does: a new kind of decision is a new case here.
//
// Work that finished while the server is away is not handed back to be run again:
// settle waits for the connection, however long the outage (a job is not redelivered
// while the server is down), and publishes again; once connected it claims the
// execution first (ensureClaim), so if another worker has taken it over meanwhile this
// one stops. Connected, it keeps trying for AckWait after the last reconnect, and for
// as long as the server cannot store (a full disk, a stream with a write error: no
// acknowledgement, or a refusal for want of storage), backing off to 5s; handing the
// job back would run its steps again once the server can. Every publish carries its
// deterministic message id, so what had been persisted before is not persisted twice.
func (w *Worker) settle(ctx context.Context, j *job, d Decision) error {
	b := w.cfg.Bus
	deadline, seen := time.Now().Add(w.cfg.AckWait), b.Reconnects()
	pause, said := 200*time.Millisecond, time.Time{}
	for {
		err := w.settleOnce(ctx, j, d)
		if err == nil || ctx.Err() != nil || errors.Is(err, errLostClaim) {
			return err
		}
		full := storage.IsFault(err)
		if !full && !w.connectionTrouble(err) {
			return err
		}
		if r := b.Reconnects(); r != seen {
			deadline, seen = time.Now().Add(w.cfg.AckWait), r
		}
		switch {
		case b.Connected() && full:
			if time.Since(said) > 30*time.Second {
				said = time.Now()
				w.cfg.Log.Error("worker: the server cannot store what a finished execution caused; keeping it until it can",
					"execution", j.data.ExecutionID, "err", err)
			}
			pause = min(2*pause, 5*time.Second)
			w.cfg.Log.Debug("worker: the server cannot store what a finished execution caused; trying again",
				"execution", j.data.ExecutionID, "retry_in", pause, "err", err)
		case b.Connected() && time.Now().After(deadline):
			return err
		default:
			w.cfg.Log.Warn("worker: the server is away; keeping the finished execution to publish it when it is back",
				"execution", j.data.ExecutionID, "err", err)
		}
		if !b.WaitConnected(ctx) {
			return err
		}
		select { // a moment for the server to settle before publishing again
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		// What the run had queued and the server never acknowledged (progress,
		// checkpoints) is published again; the outcome is settleOnce's to publish.
		cut := j.batch
		j.batch = w.cfg.Bus.Batch()
		cut.Resend(j.batch, func(m *nats.Msg) bool { return m.Header.Get(bus.HeaderMsgID) == run.OutcomeID(j.data.ExecutionID) })
	}
}

// connectionTrouble reports whether err is the server being away (a publish that
// could not reach it or got no answer) rather than a refusal.
func (w *Worker) connectionTrouble(err error) bool {
	if bus.InProcess(err) {
		return true // a publish of the same id or subject is still being replicated: try again
	}
	return !w.cfg.Bus.Connected() || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

func (w *Worker) settleOnce(ctx context.Context, j *job, d Decision) error {
	switch d := d.(type) {
	case Complete:
		return w.complete(ctx, j, d.Outputs)
	case Pause:
		if err := w.release(ctx, j, j.retries); err != nil {
			return err
		}
		return w.pause(ctx, j, d.PausedError)
	case Retry:
		if err := w.ensureClaim(ctx, j); err != nil {
			return err
		}
		w.cfg.Metrics.Retry(ctx, j.skill.Name, string(failure.ClassOf(d.Err)))
		telemetry.RecordError(trace.SpanFromContext(ctx), d.Err)
		w.emit(j, events.TypeExecutionRetrying, "", events.ExecutionRetrying{
			ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Attempt: j.attempt,
			MaxRetries: j.skill.Retries(), DelayMS: ms(d.Delay), Error: d.Err.Error(),
		})
		if err := j.batch.Wait(ctx); err != nil {
			return err
		}
		if err := w.release(ctx, j, int(j.attempt)); err != nil {
			return err
		}
		w.cfg.Log.InfoContext(ctx, "worker: execution failed; retrying", "execution", j.data.ExecutionID, "skill", j.skill.Name,
			"attempt", j.attempt, "attempts", j.skill.Retries()+1, "retry_in", d.Delay, "class", failure.ClassOf(d.Err), "err", d.Err)
		return j.msg.NakWithDelay(d.Delay)
	case Fail:
		return w.fail(ctx, j, d.Step, d.Err)
	case Repair:
		return w.repair(ctx, j, d)
	case Cancelled:
		return w.cancelRun(ctx, j, d)
	}
	return fmt.Errorf("worker: unknown decision %T", d)
}

// keepAlive tells JetStream the job is still being worked on, well within AckWait,
// and renews the execution's claim if it holds one: every AckWait/3 from now, the
// worker's beats (heartbeat.go) beat it. It is no timer of the job's own: most jobs
// finish long before their first beat, and a job's heartbeat costs only its state,
// which lives in the job. stopBeat waits for a beat under way: no renewal runs after
// it returns.
func (w *Worker) keepAlive(ctx context.Context, j *job) {
	j.beat.mu.Lock()
	defer j.beat.mu.Unlock()
	j.beat.w, j.beat.ctx, j.beat.j = w, ctx, j
	j.beat.next, j.beat.on = time.Now().Add(w.cfg.AckWait/3), true
}

// jobBeat is a job's keepAlive state.
type jobBeat struct {
	mu      sync.Mutex
	on      bool // keepAlive has started it
	stopped bool
	firing  bool      // a beat is under way or about to be
	next    time.Time // when the job is to be beaten next, at the latest
	w       *Worker
	ctx     context.Context
	j       *job
}

// due reports whether the job is to be beaten before the worker's beats look again
// in within, and then marks a beat under way.
func (b *jobBeat) due(now time.Time, within time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on || b.stopped || b.firing || b.next.After(now.Add(within)) {
		return false
	}
	b.firing = true
	return true
}

func (b *jobBeat) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.firing = false
	if b.stopped {
		return
	}
	_ = b.j.msg.InProgress()
	b.w.renew(b.ctx, b.j)
	if len(b.j.slots) > 0 {
		b.w.renewSlots(b.ctx, b.j)
	}
	b.next = time.Now().Add(b.w.cfg.AckWait / 3)
}

// stopBeat stops the job's heartbeat; a beat under way finishes first.
func (j *job) stopBeat() {
	j.beat.mu.Lock()
	j.beat.stopped = true
	j.beat.mu.Unlock()
}

// poison records a job message that cannot be read at all and terminates it.
func (w *Worker) poison(ctx context.Context, msg jetstream.Msg, cause error) error {
	md, _ := msg.Metadata()
	var seq uint64
	if md != nil {
		seq = md.Sequence.Stream
	}
	dead := nats.NewMsg(w.cfg.Bus.Subjects.Dead(events.DeadJob))
	for k, v := range msg.Headers() {
		dead.Header[k] = v
	}
	dead.Header.Set(bus.HeaderMsgID, "job."+strconv.FormatUint(seq, 10)+".dead")
	dead.Header.Set(events.HeaderDeadReason, cause.Error())
	dead.Header.Set(events.HeaderDeadSubject, msg.Subject())
	dead.Data = msg.Data()
	// Its PRODUCER span continues whatever trace the unreadable job carries.
	_, span := bustrace.StartPublishMsg(bustrace.ExtractMsg(ctx, msg), dead, w.cfg.Bus.Subjects.Dead(events.DeadJob))
	b := w.cfg.Bus.Batch()
	b.Publish(dead)
	err := b.Wait(ctx)
	telemetry.End(span, err)
	if err != nil {
		return err
	}
	w.cfg.Log.Error("worker: unreadable job dead-lettered", "subject", msg.Subject(), "seq", seq, "err", cause)
	return msg.TermWithReason("unreadable job")
}

// msgID is the job message's id, which the events it causes name as their cause.
func (j *job) msgID() string {
	if j.id == "" {
		return j.data.ExecutionID + ".job"
	}
	return j.id
}

// deliveryID names this delivery (see job.delivery).
func (j *job) deliveryID() string {
	j.deliveryOnce.Do(func() { j.delivery = strconv.FormatUint(j.seq, 10) + "." + nuid.Next() })
	return j.delivery
}

// nextSeq is the place of the delivery's next event in the execution's sequence,
// for a follower to order its live and persisted events by.
func (j *job) nextSeq() string {
	return events.Seq{Job: j.seq, Delivery: max(j.delivered, 1), N: j.progress.Add(1)}.String()
}

// logJSON is the job's execution log as JSON, nil without one.
func (j *job) logJSON() json.RawMessage {
	if j.log == nil {
		return nil
	}
	b, _ := json.Marshal(j.log)
	return b
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
