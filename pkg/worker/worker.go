// Package worker is the worker process: durable consumers on the JOBS stream, one per
// pool it serves, that run each job's skill and turn the outcome into persisted events
// before acking the job (DESIGN §5).
//
// Outcomes, by failure class (package failure):
//
//   - success: the terminal record is created in KV runs (compare-and-set), then
//     execution.completed is published, then the job is acked.
//   - retryable, with retries left (the skill's max_retries, default 3): execution.retrying
//     is published and the job is handed back with NakWithDelay(backoff); the broker
//     redelivers it. No retry state lives in memory.
//   - fatal, repairable, or out of retries: if the plan's fallback chain has a next
//     skill, its job is published to skillbus.exec.<pool>.<next> (the rest of the chain
//     and the attempt history travel in the job), with execution.fallback; otherwise the
//     job goes to the DLQ (skillbus.dead.<skill>) with its reason, and
//     execution.deadlettered and execution.failed are published. Either way the
//     terminal record is claimed first.
//
// A job delivered more often than its retries explain (a worker died holding it each
// time) is dead-lettered without running again, so a job that crashes workers cannot
// loop forever.
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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// Catalog is where a worker finds the skill a job names, at the version its plan
// pinned; *catalog.Catalog implements it.
type Catalog interface {
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
	Catalog Catalog
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
	// CrashAllowance is how many deliveries beyond 1+max_retries a job may have
	// (deliveries a dying worker used up) before it is dead-lettered unrun; default 2.
	CrashAllowance int
	// ConfirmTimeout is how long a confirmation waits for an answer when its skill
	// does not say; unanswered, it is denied. Default 1h; at most the events
	// retention (the timeout is a scheduled message in EVENTS).
	ConfirmTimeout time.Duration
	// MaxDepth bounds delegation through the skill tool; a job deeper than this
	// fails fatally. Default DefaultMaxDepth (2).
	MaxDepth int
	// Name identifies this worker in events and heartbeats; default host-pid.
	Name string
	// Source is the CloudEvents source of the events the worker writes; default
	// "/skillbus/worker".
	Source string
}

// Worker runs jobs.
type Worker struct {
	cfg    Config
	runs   jetstream.KeyValue
	cache  *cache
	events jetstream.Stream
	loops  []*bus.Loop
	beat   *heartbeat
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
		if err := bus.CheckToken("pool", p); err != nil {
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
	if cfg.Concurrency < 0 || cfg.CrashAllowance < 0 || cfg.Backoff.Base < 0 || cfg.Backoff.Max < cfg.Backoff.Base {
		return nil, errors.New("worker: Concurrency, CrashAllowance and Backoff must be positive, with Backoff.Max ≥ Backoff.Base")
	}
	return &Worker{cfg: cfg}, nil
}

// ConsumerConfig is the durable consumer every worker of a pool shares.
func (w *Worker) ConsumerConfig(pool string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       "worker-" + pool,
		Description:   "skillbus workers of pool " + pool,
		FilterSubject: w.cfg.Bus.Subjects.ExecPool(pool),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cfg.AckWait,
		// The worker dead-letters jobs itself (see CrashAllowance); MaxDeliver is the
		// broker's safety net should that ever fail.
		MaxDeliver:    64,
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
	if w.events, err = b.JS.Stream(ctx, b.StreamEvents()); err != nil {
		return fmt.Errorf("worker: stream %s: %w", b.StreamEvents(), err)
	}
	for _, pool := range w.cfg.Pools {
		c, err := b.JS.CreateOrUpdateConsumer(ctx, b.StreamJobs(), w.ConsumerConfig(pool))
		if err != nil {
			w.Stop(ctx)
			return fmt.Errorf("worker: consumer for pool %s: %w", pool, err)
		}
		l, err := bus.Consume(c, w.cfg.Concurrency, w.handle, w.cfg.Log)
		if err != nil {
			w.Stop(ctx)
			return fmt.Errorf("worker: %w", err)
		}
		w.loops = append(w.loops, l)
	}
	w.beat = startHeartbeat(ctx, b, w.cfg)
	return nil
}

// Stop stops taking jobs and waits for those in hand to finish until ctx ends; then
// the rest are handed back to the broker for another worker.
func (w *Worker) Stop(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range w.loops {
		wg.Go(func() { l.Stop(ctx) })
	}
	wg.Wait()
	w.loops = nil
	if w.beat != nil {
		w.beat.stop()
		w.beat = nil
	}
}

// job is one delivery of a job message being handled.
type job struct {
	msg     jetstream.Msg
	data    events.Job
	meta    bus.Meta
	attempt uint64
	// delivery names this delivery of this job message, "<stream seq>.<attempt>":
	// unique per delivery even when the same execution's job is published again (a
	// resumed confirmation), so progress events of a new delivery are never dropped as
	// duplicates of an earlier one's.
	delivery string
	skill    *skill.Skill
	batch    *bus.Batch
	start    time.Time
	log      json.RawMessage // the execution log of this delivery
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
	w.cfg.Log.Error("worker: job handed back", "subject", msg.Subject(), "err", err)
	_ = msg.NakWithDelay(w.cfg.Backoff.Base)
}

// process handles one delivery. It returns an error only when the delivery must be handed
// back without an outcome (a publish failed, or shutdown).
func (w *Worker) process(ctx context.Context, msg jetstream.Msg) error {
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	e, err := bus.Decode(&nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()})
	if err != nil {
		return w.poison(ctx, msg, err)
	}
	j := &job{msg: msg, meta: bus.MetaOf(e), attempt: md.NumDelivered, batch: w.cfg.Bus.Batch(), start: time.Now(),
		delivery: strconv.FormatUint(md.Sequence.Stream, 10) + "." + strconv.FormatUint(md.NumDelivered, 10)}
	if err := json.Unmarshal(e.Data(), &j.data); err != nil || j.data.ExecutionID == "" || j.data.Skill.Name == "" {
		if err == nil {
			err = errors.New("job has no execution_id or skill")
		}
		return w.poison(ctx, msg, fmt.Errorf("job data: %w", err))
	}
	if j.attempt > 1 {
		// A redelivery: the execution may have ended already.
		rec, err := run.Load(ctx, w.runs, j.data.ExecutionID)
		if err != nil {
			return err
		}
		if rec != nil {
			return w.redrive(ctx, j, rec)
		}
	}
	// The version the plan pinned: a skill edited since keeps its runs on the old one.
	j.skill, err = w.cfg.Catalog.LookupVersion(ctx, j.data.Skill.Name, j.data.Skill.Digest)
	if err != nil {
		return w.fail(ctx, j, "", failure.Fatalf("%v", err))
	}
	if j.data.Depth > w.cfg.MaxDepth {
		return w.fail(ctx, j, "", failure.Fatalf("delegated %d levels deep through the skill tool; the limit is %d", j.data.Depth, w.cfg.MaxDepth))
	}
	if limit := uint64(j.skill.Retries() + 1 + w.cfg.CrashAllowance); j.attempt > limit {
		return w.fail(ctx, j, "", failure.Fatalf("delivered %d times without an outcome (more than 1 + max_retries %d + crash allowance %d): workers died while running it", j.attempt, j.skill.Retries(), w.cfg.CrashAllowance))
	}

	var inputs map[string]any
	if len(j.data.Inputs) > 0 {
		if err := json.Unmarshal(j.data.Inputs, &inputs); err != nil {
			return w.fail(ctx, j, "", failure.Fatalf("inputs are not a JSON object: %v", err))
		}
	}
	w.emit(j, events.TypeExecutionStarted, "", events.ExecutionStarted{
		ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Version: j.skill.Version,
		Inputs: j.data.Inputs, Attempt: j.attempt, Worker: w.cfg.Name,
	})

	answers := make(map[string]workflow.Answer, len(j.data.Answers))
	for step, a := range j.data.Answers {
		answers[step] = workflow.Answer(a)
	}
	var tools *tool.Set
	if w.cfg.Tools != nil {
		tools = w.cfg.Tools.Ensure(ctx, toolNames(j.skill)...)
	}
	obs := &observer{w: w, j: j}
	rctx := withDepth(ctx, j.data.Depth)
	stopBeat := w.keepAlive(msg)
	var outputs map[string]any
	var log *workflow.Log
	var runErr error
	switch {
	case j.skill.Workflow == nil && j.skill.Kind == skill.KindInstruction && w.cfg.Instruct != nil:
		outputs, runErr = w.runInstruction(rctx, j, inputs, tools)
	case j.skill.Workflow == nil && j.skill.Kind == skill.KindScript:
		outputs, runErr = w.runScript(rctx, j, inputs, obs)
	default:
		outputs, log, runErr = w.cfg.Engine.ExecuteLog(rctx, workflow.Run{
			ExecutionID: j.data.ExecutionID,
			Skill:       j.skill,
			Inputs:      inputs,
			Trigger: map[string]any{
				"id": j.data.Trigger.ID, "source": j.data.Trigger.Source,
				"type": j.data.Trigger.Type, "subject": j.data.Trigger.Subject,
			},
			Attempt:       j.attempt,
			Observer:      obs,
			Confirmations: answers,
			Checkpoints:   &checkpoints{w: w, j: j, fresh: j.attempt == 1 && len(j.data.Answers) == 0},
			Cache:         w.cache,
			Tools:         tools,
		})
	}
	stopBeat()
	if log != nil {
		j.log, _ = json.Marshal(log)
	}
	if runErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if runErr == nil {
		return w.complete(ctx, j, outputs)
	}
	var paused *workflow.PausedError
	if errors.As(runErr, &paused) {
		return w.pause(ctx, j, paused)
	}
	var stepID string
	var se *workflow.StepError
	if errors.As(runErr, &se) {
		stepID = se.Step
	}
	if failure.ClassOf(runErr) == failure.Retryable && j.attempt <= uint64(j.skill.Retries()) {
		delay := w.cfg.Backoff.Delay(j.attempt)
		w.emit(j, events.TypeExecutionRetrying, "", events.ExecutionRetrying{
			ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Attempt: j.attempt,
			MaxRetries: j.skill.Retries(), DelayMS: ms(delay), Error: runErr.Error(),
		})
		if err := j.batch.Wait(ctx); err != nil {
			return err
		}
		return msg.NakWithDelay(delay)
	}
	return w.fail(ctx, j, stepID, runErr)
}

// keepAlive tells JetStream the job is still being worked on, well within AckWait.
func (w *Worker) keepAlive(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (w *Worker) complete(ctx context.Context, j *job, outputs map[string]any) error {
	rec, won, err := run.Claim(ctx, w.runs, &run.Record{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID,
		Skill: j.skill.Name, Version: j.data.Skill.Version, Status: run.StatusCompleted,
		Outputs: outputs, Attempt: j.attempt, Worker: w.cfg.Name,
		DurationMS: ms(time.Since(j.start)), FinishedAt: time.Now().UTC(), Log: j.log,
	})
	if err != nil {
		return err
	}
	if !won {
		return w.redrive(ctx, j, rec)
	}
	w.publishTerminal(j, rec)
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	return j.msg.Ack()
}

// fail ends the execution of this skill for good: fall back to the next skill of the
// chain, or dead-letter the job.
func (w *Worker) fail(ctx context.Context, j *job, stepID string, cause error) error {
	class := failure.ClassOf(cause)
	rec := &run.Record{
		ExecutionID: j.data.ExecutionID, ActivationID: j.data.ActivationID,
		Skill: j.data.Skill.Name, Version: j.data.Skill.Version, Status: run.StatusFailed,
		StepID: stepID, Class: string(class), Error: cause.Error(),
		Attempt: j.attempt, Worker: w.cfg.Name,
		DurationMS: ms(time.Since(j.start)), FinishedAt: time.Now().UTC(), Log: j.log,
		// A human said no: another skill doing the same thing is not the answer.
		Denied: errors.Is(cause, workflow.ErrDenied),
	}
	if len(j.data.Fallback) > 0 && !rec.Denied {
		rec.Status, rec.Next = run.StatusFallback, j.data.Fallback[0].ExecutionID
	}
	rec, won, err := run.Claim(ctx, w.runs, rec)
	if err != nil {
		return err
	}
	if !won {
		return w.redrive(ctx, j, rec)
	}
	if err := w.publishFailure(ctx, j, rec); err != nil {
		return err
	}
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	return j.msg.Ack()
}

// publishFailure queues what a failed record causes: the next job of the chain, or
// the dead letter and the terminal failure.
func (w *Worker) publishFailure(ctx context.Context, j *job, rec *run.Record) error {
	subj := w.cfg.Bus.Subjects
	attempt := events.Attempt{Skill: rec.Skill, ExecutionID: rec.ExecutionID, Class: rec.Class, Error: rec.Error, Deliveries: rec.Attempt}
	if rec.Status == run.StatusFallback {
		next := j.data.Fallback[0]
		if prev, err := run.Load(ctx, w.runs, next.ExecutionID); err != nil {
			return err
		} else if prev != nil {
			return nil // the next skill ran already
		}
		nj := events.Job{
			ExecutionID: next.ExecutionID, ActivationID: j.data.ActivationID, Skill: next,
			Inputs: j.data.Inputs, Trigger: j.data.Trigger, Fallback: j.data.Fallback[1:],
			History: append(append([]events.Attempt(nil), j.data.History...), attempt),
		}
		m := j.meta
		m.ExecutionID, m.CausationID = next.ExecutionID, j.msgID()
		j.batch.PublishEvent(subj.Exec(next.Pool, next.Name),
			bus.Event{ID: next.ExecutionID + ".job", Source: w.cfg.Source, Type: events.TypeJob, Meta: m, Data: nj})
		w.emit(j, events.TypeExecutionFallback, "", events.ExecutionFallback{
			ExecutionID: rec.ExecutionID, Skill: rec.Skill, Next: next.Name,
			NextExecutionID: next.ExecutionID, Class: rec.Class, Error: rec.Error,
		})
		return nil
	}
	if rec.Denied {
		w.publishTerminal(j, rec)
		return nil
	}
	dead := subj.Dead(rec.Skill)
	dl := events.DeadLetter{Job: j.data, Class: rec.Class, Reason: rec.Error, StepID: rec.StepID, Deliveries: rec.Attempt, Worker: rec.Worker}
	dm := j.meta
	dm.ExecutionID, dm.CausationID = rec.ExecutionID, j.msgID()
	j.batch.PublishEvent(dead, bus.Event{ID: rec.ExecutionID + ".dead", Source: w.cfg.Source, Type: events.TypeJob, Meta: dm, Data: dl})
	w.emit(j, events.TypeExecutionDeadlettered, "", events.ExecutionDeadlettered{
		ExecutionID: rec.ExecutionID, Skill: rec.Skill, Subject: dead, Class: rec.Class, Reason: rec.Error,
	})
	w.publishTerminal(j, rec)
	return nil
}

// publishTerminal queues the terminal event of a record. Its id depends only on the
// execution and the status, so a repeat is dropped as a duplicate.
func (w *Worker) publishTerminal(j *job, rec *run.Record) {
	if rec.Status == run.StatusCompleted {
		w.emit(j, events.TypeExecutionCompleted, "final", events.ExecutionCompleted{
			ExecutionID: rec.ExecutionID, ActivationID: rec.ActivationID, Skill: rec.Skill,
			Version: rec.Version, Outputs: rec.Outputs, DurationMS: rec.DurationMS, Attempt: rec.Attempt,
		})
		return
	}
	h := append(append([]events.Attempt(nil), j.data.History...), events.Attempt{
		Skill: rec.Skill, ExecutionID: rec.ExecutionID, Class: rec.Class, Error: rec.Error, Deliveries: rec.Attempt,
	})
	w.emit(j, events.TypeExecutionFailed, "final", events.ExecutionFailed{
		ExecutionID: rec.ExecutionID, ActivationID: rec.ActivationID, Skill: rec.Skill,
		Version: rec.Version, StepID: rec.StepID, Class: rec.Class, Error: rec.Error,
		Attempt: rec.Attempt, History: h, DeadLetter: deadLetter(w.cfg.Bus, rec),
	})
}

// redrive finishes what an earlier delivery claimed but may not have published
// (its worker died between the claim and the ack), then acks.
func (w *Worker) redrive(ctx context.Context, j *job, rec *run.Record) error {
	switch rec.Status {
	case run.StatusCompleted:
		if !w.published(ctx, rec.ExecutionID, events.TypeExecutionCompleted) {
			w.publishTerminal(j, rec)
		}
	case run.StatusFailed:
		if !w.published(ctx, rec.ExecutionID, events.TypeExecutionFailed) {
			if err := w.publishFailure(ctx, j, rec); err != nil {
				return err
			}
		}
	case run.StatusFallback:
		// Republishing the next job is a no-op when it ran already (publishFailure
		// checks its record) or is still in the duplicate window.
		if err := w.publishFailure(ctx, j, rec); err != nil {
			return err
		}
	}
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	return j.msg.Ack()
}

// published reports whether the EVENTS stream holds the execution's event of type typ.
func (w *Worker) published(ctx context.Context, executionID, typ string) bool {
	_, err := w.events.GetLastMsgForSubject(ctx, w.cfg.Bus.Subjects.Event(executionID, typ))
	return err == nil
}

// poison records a job message that cannot be read at all and terminates it.
func (w *Worker) poison(ctx context.Context, msg jetstream.Msg, cause error) error {
	md, _ := msg.Metadata()
	var seq uint64
	if md != nil {
		seq = md.Sequence.Stream
	}
	dead := nats.NewMsg(w.cfg.Bus.Subjects.Dead("_job"))
	for k, v := range msg.Headers() {
		dead.Header[k] = v
	}
	dead.Header.Set(bus.HeaderMsgID, "job."+strconv.FormatUint(seq, 10)+".dead")
	dead.Header.Set("Skillbus-Reason", cause.Error())
	dead.Header.Set("Skillbus-Subject", msg.Subject())
	dead.Data = msg.Data()
	b := w.cfg.Bus.Batch()
	b.Publish(dead)
	if err := b.Wait(ctx); err != nil {
		return err
	}
	w.cfg.Log.Error("worker: unreadable job dead-lettered", "subject", msg.Subject(), "seq", seq, "err", cause)
	return msg.TermWithReason("unreadable job")
}

// emit queues one of the execution's events. Ids are unique per delivery unless tag
// says the event is final for the execution.
func (w *Worker) emit(j *job, typ, tag string, data any) {
	id := j.data.ExecutionID + "." + events.Kind(typ)
	if tag == "" {
		id += "." + j.delivery
	}
	w.emitID(j, id, typ, data)
}

func (w *Worker) emitID(j *job, id, typ string, data any) {
	m := j.meta
	m.ExecutionID = j.data.ExecutionID
	m.CausationID = j.msgID()
	j.batch.PublishEvent(w.cfg.Bus.Subjects.Event(j.data.ExecutionID, typ), bus.Event{ID: id, Source: w.cfg.Source, Type: typ, Meta: m, Data: data})
}

func deadLetter(b *bus.Bus, rec *run.Record) string {
	if rec.Denied {
		return ""
	}
	return b.Subjects.Dead(rec.Skill)
}

func (j *job) msgID() string { return j.data.ExecutionID + ".job" }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
