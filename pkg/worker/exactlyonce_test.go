package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// A job that another worker holds (its claim's lease is live) is not run, even on a
// first delivery: after a server restart a job still running elsewhere comes back
// with NumDelivered == 1. When the holder publishes the outcome, the job is acked
// without running.
func TestHeldExecutionIsNotRunTwice(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	id := events.ExecutionID("/t", "held", "hello")
	claim, _ := json.Marshal(map[string]any{"execution_id": id, "worker": "other", "lease_until": time.Now().Add(time.Hour)})
	if _, err := f.runs.Create(f.ctx, id+".claim", claim); err != nil {
		t.Fatal(err)
	}
	// Stored before the worker starts: older than its epoch, so not provably new.
	f.job("held", "hello")
	f.start()
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := cons.Info(f.ctx)
		return err == nil && info.NumRedelivered > 0 || err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer > 0
	}, "the job was never handed back")
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times while another worker held the execution", n)
	}
	// The holder finishes.
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Event(id, events.TypeExecutionCompleted), bus.Event{ID: run.OutcomeID(id), Source: "/t",
		Type: events.TypeExecutionCompleted, Data: events.ExecutionCompleted{ExecutionID: id, Skill: "hello", Outputs: map[string]any{"only": "by other"}, Attempt: 1}})
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.drained()
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times; the execution had finished elsewhere", n)
	}
	if done := f.events(id, events.TypeExecutionCompleted); len(done) != 1 {
		t.Fatalf("%d outcomes, want the holder's one", len(done))
	}
}

// A job stored before the worker started, with no claim, is claimed, run once, and
// its claim names the worker.
func TestOldJobIsClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	id := f.job("old", "hello")
	f.start()
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.drained()
	e, err := f.runs.Get(f.ctx, id+".claim")
	if err != nil {
		t.Fatalf("no claim for a job older than the worker: %v", err)
	}
	if !strings.Contains(string(e.Value()), `"worker":"test"`) {
		t.Fatalf("claim %s", e.Value())
	}
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1", n)
	}
}

// The fast path writes nothing but the outcome: no claim.
func TestNewJobRunsUnclaimed(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	f.start()
	id := f.job("new", "hello")
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.drained()
	if _, err := f.runs.Get(f.ctx, id+".claim"); err == nil {
		t.Fatal("a job stored after the worker started was claimed: the fast path should write nothing")
	}
}

// When nats-server restarts while a job runs, the worker claims the execution as
// soon as it is connected again, and the run still ends with one outcome and one
// call.
func TestServerRestartClaimsRunningExecutions(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("slow", "wait", 3))
	f.start()
	id := f.job("restart", "slow")
	<-f.blocked
	f.srv.Restart()
	natstest.Eventually(t, 20*time.Second, func() bool {
		e, err := f.runs.Get(f.ctx, id+".claim")
		return err == nil && strings.Contains(string(e.Value()), `"worker":"test"`)
	}, "the running execution was not claimed after the reconnect")
	close(f.release)
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.drained()
	if n := f.calls["wait"].Load(); n != 1 {
		t.Fatalf("wait called %d times, want 1", n)
	}
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// At the default events level a one-step execution persists only its outcome; its
// progress goes live, and only when the trigger asked for it.
func TestStepsLevelPersistsOnlyWhatRecoveryNeeds(t *testing.T) {
	t.Parallel()
	readFirst := twoSteps("read-first", func(s *skill.Skill) { s.Workflow.Steps[0].Tool = "echo" })
	f := setup(t, oneStep("hello", "greet", 3), twoSteps("pair", nil), readFirst)
	f.level = events.LevelSteps
	f.start()
	nc := f.srv.Conn(t)
	live, err := nc.SubscribeSync(f.b.Subjects.LiveEvents(">"))
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	id := f.job("lvl", "hello")
	f.waitEvent(id, events.TypeExecutionCompleted)
	pair := f.job("lvl2", "pair")
	f.waitEvent(pair, events.TypeExecutionCompleted)
	f.drained()
	for _, typ := range []string{events.TypeExecutionStarted, events.TypeStepStarted, events.TypeStepCompleted} {
		if n := len(f.events(id, typ)); n != 0 {
			t.Errorf("one-step: %d %s events persisted, want 0", n, typ)
		}
	}
	// The two-step skill checkpoints its first tool step only: the second is last.
	cps := f.events(pair, events.TypeStepCompleted)
	if len(cps) != 1 || cps[0]["step_id"] != "first" {
		t.Errorf("two-step checkpoints %v, want the first step's only", cps)
	}
	// A first step that only read (echo) is done again after a crash rather than
	// checkpointed: no checkpoint at all.
	rf := f.job("lvl3", "read-first")
	f.waitEvent(rf, events.TypeExecutionCompleted)
	if cps := f.events(rf, events.TypeStepCompleted); len(cps) != 0 {
		t.Errorf("read-only first step: checkpoints %v, want none", cps)
	}
	if m, err := live.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("live event %s published although nobody asked", m.Subject)
	}
}

// A result larger than the server's max_payload (8 MiB in tests) fails the execution once, fatally,
// with result_too_large — it is not retried as if a worker had died.
func TestResultTooLargeFailsOnce(t *testing.T) {
	t.Parallel()
	for _, steps := range []int{1, 2} { // the outcome too large; a checkpoint too large
		t.Run(strings.Repeat("step", steps), func(t *testing.T) {
			t.Parallel()
			sk := oneStep("huge", "big", 3)
			if steps == 2 {
				sk.Workflow.Steps = append(sk.Workflow.Steps, sk.Workflow.Steps[0])
				sk.Workflow.Steps[1].ID = "again"
			}
			f := setup(t, sk)
			f.level = events.LevelSteps
			f.start()
			id := f.job("big", "huge")
			failed := f.waitEvent(id, events.TypeExecutionFailed)
			f.drained()
			if failed["class"] != "fatal" || !strings.Contains(failed["error"].(string), "result_too_large") {
				t.Fatalf("failed = %v", failed)
			}
			if n := f.calls["big"].Load(); n != 1 {
				t.Fatalf("big called %d times, want 1", n)
			}
			if n := len(f.dead("skillbus.dead.huge")); n != 1 {
				t.Fatalf("%d dead letters, want 1", n)
			}
		})
	}
}

// A skill with max_concurrent: 2 runs at most two at once across two workers, and
// nothing strands: its pool is served by the workers of its base pool.
func TestMaxConcurrentBoundsTheFleet(t *testing.T) {
	t.Parallel()
	sk := oneStep("scarce", "wait", 0)
	sk.MaxConcurrent = 2
	f := setup(t, sk)
	f.start()
	f.startWorker("second")
	pool := sk.PoolName()
	for i := range 6 {
		f.jobIn(pool, "mc"+strconv.Itoa(i), "", "scarce")
	}
	<-f.blocked
	<-f.blocked
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-"+pool)
	if err != nil {
		t.Fatalf("no consumer for pool %s: %v", pool, err)
	}
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err = cons.Info(f.ctx)
		return err == nil && info.NumAckPending == 2 && info.NumPending == 4
	}, "consumer %+v: want 2 handed out and 4 waiting", info)
	if n := f.calls["wait"].Load(); n != 2 {
		t.Fatalf("%d running at once, want 2", n)
	}
	close(f.release)
	f.drained()
	if n := f.calls["wait"].Load(); n != 6 {
		t.Fatalf("%d ran, want 6", n)
	}
}

// A skill whose prerequisites are not met fails before running anything, fatally,
// naming what is missing.
func TestUnmetPrerequisitesFailBeforeRunning(t *testing.T) {
	t.Parallel()
	sk := oneStep("needy", "greet", 3)
	sk.Prerequisites = []skill.Prerequisite{{Kind: skill.PrerequisiteEnv, Name: "SKILLBUS_TEST_SURELY_UNSET"}}
	f := setup(t, sk)
	f.start()
	id := f.job("pre", "needy")
	failed := f.waitEvent(id, events.TypeExecutionFailed)
	f.drained()
	if failed["class"] != "fatal" || !strings.Contains(failed["error"].(string), "SKILLBUS_TEST_SURELY_UNSET") {
		t.Fatalf("failed = %v", failed)
	}
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times", n)
	}
}

// A run that finishes while the server is away keeps its result and publishes it
// when the server is back, however long the outage: the step is not run again. The
// worker's connection buffers nothing while it reconnects, so its publishes fail for
// as long as the server is away (as a publish written to a dying server's socket is
// lost), and the outage lasts well over AckWait, the time the job is held.
func TestFinishedWhileServerAwayIsNotRunAgain(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("slow", "wait", 3))
	nc, err := nats.Connect(f.srv.URL(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	away := &logged{msg: "the server is away"}
	f.startWorkerOn(b, "test", slog.New(away), nil)
	id := f.job("away", "slow")
	<-f.blocked
	f.srv.Stop()
	natstest.Eventually(t, 10*time.Second, func() bool { return !nc.IsConnected() }, "the worker did not notice the server was gone")
	close(f.release) // the step finishes while nobody can hear it
	natstest.Eventually(t, 10*time.Second, away.seen, "the worker did not try to publish while the server was away")
	// The outage goes on for three times the time the job is held: a worker that
	// gave its finished work up after AckWait would have it redelivered and run
	// again once the server is back.
	outage := time.NewTimer(3 * time.Second)
	<-outage.C
	f.srv.Start()
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) > 0 }, "no outcome after the server came back")
	f.drained()
	if n := f.calls["wait"].Load(); n != 1 {
		t.Fatalf("wait called %d times, want 1: finished work was handed back and run again", n)
	}
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
	// What the run published while the server was away is published too, not only
	// the outcome.
	if n := len(f.events(id, events.TypeStepCompleted)); n != 1 {
		t.Fatalf("%d step.completed events, want 1: the step's event was lost in the outage", n)
	}
}

// startWorkerOn starts a worker like startWorker, on bus b, logging to log, with its
// configuration changed by edit (when not nil).
func (f *fixture) startWorkerOn(b *bus.Bus, name string, log *slog.Logger, edit func(*worker.Config)) *worker.Worker {
	f.t.Helper()
	eng, err := workflow.New(workflow.Config{Tools: f.tools, Log: log})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := worker.Config{
		Bus: b, Catalog: f.cat, Engine: eng, Log: log, AckWait: time.Second,
		Backoff: worker.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}, Name: name, Events: f.level,
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := w.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// logged is a slog handler that notes whether a record whose message contains msg
// was logged.
type logged struct {
	msg string
	hit atomic.Bool
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.msg) {
		l.hit.Store(true)
	}
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }
func (l *logged) seen() bool                         { return l.hit.Load() }

// Two deliveries of one execution reaching the same worker at once (here two job
// messages of one execution, both older than the worker, so both take the claim
// path) never both run: the claim names the worker, so the process itself must keep
// the second out, from before the first claims until it has settled.
func TestOneDeliveryPerExecutionInAWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	id := f.jobMsgID("twice", "", "hello")
	f.jobMsgID("twice", ".again", "hello")
	// The first delivery to look its skill up, after claiming, waits there until the
	// second has had every chance to run.
	gate := &gatedLookup{inner: f.cat, entered: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(gate.release) // a failing test must not leave the first delivery waiting
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.startWorkerOn(f.b, "test", log, func(c *worker.Config) { c.Catalog = gate })
	<-gate.entered
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	// The second job is handed back again and again (the first hand-back may also be
	// a lost race to create the claim) until the first has settled; or it runs.
	natstest.Eventually(t, 20*time.Second, func() bool {
		info, err := cons.Info(f.ctx)
		return f.calls["greet"].Load() > 0 || err == nil && info.Delivered.Consumer >= 5
	}, "the second delivery neither ran nor was handed back")
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times while the first delivery held the execution: two deliveries of it ran in one worker", n)
	}
	gate.release()
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.drained()
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1: two deliveries of one execution ran in one worker", n)
	}
}

// gatedLookup holds the first LookupVersion call until release.
type gatedLookup struct {
	inner   worker.VersionLookup
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
	opened  sync.Once
}

func (g *gatedLookup) release() { g.opened.Do(func() { close(g.open) }) }

func (g *gatedLookup) LookupVersion(ctx context.Context, name, digest string) (*skill.Skill, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.open
	}
	return g.inner.LookupVersion(ctx, name, digest)
}
