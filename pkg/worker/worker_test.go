package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// The tests mostly wait (AckWaits, throttle periods, servers restarting): eight
// run at once rather than one per core.
func TestMain(m *testing.M) {
	natstest.WaitingTests(8)
	goleak.VerifyTestMain(m)
}

type fixture struct {
	srv   *natstest.Server
	t     *testing.T
	b     *bus.Bus
	kv    jetstream.KeyValue
	runs  jetstream.KeyValue
	ctx   context.Context
	calls map[string]*atomic.Int64
	w     *worker.Worker
	cat   *catalog.Catalog
	tools *tool.Set
	// level is the workers' events level; tests that count progress events use full.
	level events.Level
	// The "wait" tool signals blocked when called and returns when release closes.
	release chan struct{}
	blocked chan struct{}
	// logs holds what the fixture's workers log.
	logs natstest.Buffer
}

// step returns a one-step workflow skill calling tool t.
func oneStep(name, t string, retries int) *skill.Skill {
	return &skill.Skill{
		Name: name, Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", MaxRetries: &retries,
		Digest:   strings.Repeat("ab", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{{ID: "only", Tool: t, Args: map[string]any{"who": "{{ inputs.who }}"}}}},
	}
}

func setup(t *testing.T, skills ...*skill.Skill) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	// A bound for a hung test, not a wait: on 2 cores loaded by other packages'
	// tests, TestCancelRacingCompletionHasOneOutcome took over 30 s and failed on it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{srv: srv, t: t, b: b, ctx: ctx, calls: map[string]*atomic.Int64{}, level: events.LevelFull,
		release: make(chan struct{}), blocked: make(chan struct{}, 16)}
	var err error
	if f.kv, err = b.KV(ctx, b.BucketSkills()); err != nil {
		t.Fatal(err)
	}
	if f.runs, err = b.KV(ctx, b.BucketRuns()); err != nil {
		t.Fatal(err)
	}
	for _, s := range skills {
		v, _ := json.Marshal(s)
		if _, err := f.kv.Put(ctx, s.Name, v); err != nil {
			t.Fatal(err)
		}
	}
	counted := func(name string, fn func(c tool.Call, n int64) (any, error)) tool.Tool {
		f.calls[name] = &atomic.Int64{}
		return tool.Func(name, func(_ context.Context, c tool.Call) (any, error) {
			return fn(c, f.calls[name].Add(1))
		})
	}
	f.tools, err = tool.NewSet(
		counted("greet", func(c tool.Call, _ int64) (any, error) { return "hi " + c.Args["who"].(string), nil }),
		counted("flaky", func(c tool.Call, _ int64) (any, error) { return nil, failure.Retry("upstream timeout") }),
		counted("once-flaky", func(c tool.Call, n int64) (any, error) {
			if n == 1 {
				return nil, failure.Retry("upstream timeout")
			}
			return "ok", nil
		}),
		counted("broken", func(c tool.Call, _ int64) (any, error) { return nil, failure.Fatalf("permission denied") }),
		counted("wait", func(c tool.Call, _ int64) (any, error) {
			f.blocked <- struct{}{}
			<-f.release
			return "released", nil
		}),
		counted("big", func(c tool.Call, _ int64) (any, error) { return strings.Repeat("x", 9<<20), nil }),
		tool.Echo(), // its calls only read
		// "perms" reports the permissions its call acts under.
		tool.Func("perms", func(ctx context.Context, _ tool.Call) (any, error) {
			return map[string]any{"network": tool.PermissionsFrom(ctx).Network}, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if f.cat, err = catalog.Watch(ctx, f.kv, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cat.Stop)
	return f
}

func (f *fixture) start() {
	f.t.Helper()
	f.w = f.startWorker("test")
}

// startWorker starts one more worker on the fixture's bus and catalog.
func (f *fixture) startWorker(name string) *worker.Worker {
	f.t.Helper()
	log := slog.New(slog.NewTextHandler(&f.logs, nil))
	eng, err := workflow.New(workflow.Config{Tools: f.tools, Log: log})
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := worker.New(worker.Config{
		Bus: f.b, Catalog: f.cat, Engine: eng, Log: log, AckWait: time.Second,
		Backoff: worker.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}, Name: name, Events: f.level,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := w.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// job publishes a job for the named skills: the first runs, the rest are its chain.
func (f *fixture) job(id string, names ...string) string {
	f.t.Helper()
	return f.jobMsgID(id, "", names...)
}

// jobMsgID publishes a job with the given Nats-Msg-Id suffix, to publish a job again as
// if after the duplicate window.
func (f *fixture) jobMsgID(id, suffix string, names ...string) string {
	f.t.Helper()
	return f.jobIn("default", id, suffix, names...)
}

// jobIn publishes a job to a pool.
func (f *fixture) jobIn(pool, id, suffix string, names ...string) string {
	f.t.Helper()
	return f.jobWith(nil, pool, id, suffix, names...)
}

// jobWith publishes a job to a pool with extra headers.
func (f *fixture) jobWith(headers map[string]string, pool, id, suffix string, names ...string) string {
	f.t.Helper()
	refs := make([]events.SkillRef, len(names))
	for i, n := range names {
		refs[i] = events.SkillRef{Name: n, Pool: pool, ExecutionID: events.ExecutionID("/t", id, n), Version: "1.0.0"}
	}
	j := events.Job{ExecutionID: refs[0].ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: refs[0],
		Inputs: json.RawMessage(`{"who":"ada"}`), Trigger: events.TriggerRef{ID: id, Source: "/t", Subject: "x"}, Fallback: refs[1:]}
	m, err := bus.Event{ID: j.ExecutionID + ".job" + suffix, Source: "/t", Type: events.TypeJob, Meta: bus.Meta{CausationID: j.ActivationID + ".route.decided"}, Data: j}.
		JobMsg(f.b.Subjects.Exec(pool, names[0], j.ActivationID, events.StagePlan))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range headers {
		m.Header.Set(k, v)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	return j.ExecutionID
}

// events returns the decoded data of every event of type typ about id.
func (f *fixture) events(id, typ string) []map[string]any {
	f.t.Helper()
	c, err := f.b.JS.OrderedConsumer(f.ctx, f.b.StreamEvents(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.b.Subjects.Event(id, typ)}})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []map[string]any
	batch, err := c.FetchNoWait(1000)
	if err != nil {
		f.t.Fatal(err)
	}
	for m := range batch.Messages() {
		e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: m.Headers(), Data: m.Data()}))
		if err != nil {
			f.t.Fatal(err)
		}
		var d map[string]any
		_ = json.Unmarshal(e.Data(), &d)
		out = append(out, d)
	}
	return out
}

func (f *fixture) waitEvent(id, typ string) map[string]any {
	f.t.Helper()
	var evs []map[string]any
	natstest.Eventually(f.t, 30*time.Second, func() bool {
		evs = f.events(id, typ)
		return len(evs) > 0
	}, "no %s for %s", typ, id)
	return evs[0]
}

// outcome reads the execution's outcome from EVENTS.
func (f *fixture) outcome(id string) (*run.Record, error) {
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		return nil, err
	}
	return run.Load(f.ctx, s, f.b.Subjects, id)
}

// drained waits until every job has been acked or terminated: no consumer of the
// JOBS stream (which keeps jobs after they ran) has one pending or unacked.
func (f *fixture) drained() {
	f.t.Helper()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	var busy string
	natstest.Eventually(f.t, 30*time.Second, func() bool {
		busy = ""
		l := s.ListConsumers(f.ctx)
		for info := range l.Info() {
			if info.NumPending > 0 || info.NumAckPending > 0 {
				busy += fmt.Sprintf(" %s (pending %d, unacked %d)", info.Name, info.NumPending, info.NumAckPending)
			}
		}
		return l.Err() == nil && busy == ""
	}, "jobs not yet done:%s", busy)
}

// stored is the execution's event of type typ as EVENTS holds it.
func (f *fixture) stored(id, typ string) *jetstream.RawStreamMsg {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(id, typ))
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) dead(subject string) []*jetstream.RawStreamMsg {
	f.t.Helper()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamDead())
	info, err := s.Info(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(f.ctx, seq)
		if err == nil && m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

// A job whose structured JSON has a member after its data — as a publisher other
// than a router may write it — runs: the worker's reader of the envelope takes the
// data unchecked, and when the job does not decode, reads the envelope again in full.
func TestJobWithMembersAfterItsData(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "echo", 0))
	f.start()
	j := events.Job{ExecutionID: events.ExecutionID("/t", "late", "hello"), ActivationID: events.ActivationID("/t", "late"),
		Skill:  events.SkillRef{Name: "hello", Pool: "default", ExecutionID: events.ExecutionID("/t", "late", "hello"), Version: "1.0.0"},
		Inputs: json.RawMessage(`{"who":"ada"}`), Trigger: events.TriggerRef{ID: "late", Source: "/t", Subject: "x"}}
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(f.b.Subjects.Exec("default", "hello", j.ActivationID, events.StagePlan))
	m.Header.Set(bus.HeaderContentType, "application/cloudevents+json")
	m.Data = []byte(`{"specversion":"1.0","id":"` + j.ExecutionID + `.job","source":"/t","type":"io.skillbus.job","data":` + string(data) + `,"causationid":"c"}`)
	if _, ok := bus.DecodeUnchecked(bus.FromNATS(m)); !ok {
		t.Fatal("the envelope's reader did not take the data unchecked: the test tests nothing")
	}
	if _, err := f.b.JS.PublishMsg(f.ctx, m, jetstream.WithMsgID(j.ExecutionID+".job")); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(j.ExecutionID, events.TypeExecutionCompleted)
}

// A job says its activation and execution only in its data; the events it causes
// carry them, and their cause, as CloudEvents extensions.
func TestOutcomeCarriesTheJobsActivationAndExecution(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	f.start()
	id := f.job("1", "hello")
	f.waitEvent(id, events.TypeExecutionCompleted)
	m := f.stored(id, events.TypeExecutionCompleted)
	e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: m.Header, Data: m.Data}))
	if err != nil {
		t.Fatal(err)
	}
	m2 := bus.MetaOf(e)
	if want := (bus.Meta{CorrelationID: events.ActivationID("/t", "1"), CausationID: id + ".job", ExecutionID: id}); m2 != want {
		t.Fatalf("outcome extensions %+v, want %+v", m2, want)
	}
	// A structured-mode event's JSON data needs no datacontenttype: JSON is the
	// default, and the SDK reads it as such.
	var d events.ExecutionCompleted
	if err := e.DataAs(&d); e.Time().IsZero() || err != nil || d.ExecutionID != id {
		t.Fatalf("outcome time %v, data %+v (%v): an event for watchers has both", e.Time(), d, err)
	}
}

// A workflow's tool calls act under its skill's permissions, and only its own.
func TestToolCallsActUnderTheSkillsPermissions(t *testing.T) {
	t.Parallel()
	open, closed := oneStep("open", "perms", 0), oneStep("closed", "perms", 0)
	open.Permissions.Network.Outbound = true
	f := setup(t, open, closed)
	f.start()
	for name, want := range map[string]bool{"open": true, "closed": false} {
		id := f.job(name, name)
		done := f.waitEvent(id, events.TypeExecutionCompleted)
		got := done["outputs"].(map[string]any)["only"].(map[string]any)["network"]
		if got != want {
			t.Errorf("%s: the call acted with network %v, want %v", name, got, want)
		}
	}
}

func TestSuccess(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	f.start()
	id := f.job("1", "hello")
	done := f.waitEvent(id, events.TypeExecutionCompleted)
	if got := done["outputs"].(map[string]any)["only"]; got != "hi ada" {
		t.Fatalf("outputs = %v", done["outputs"])
	}
	f.drained()
	for _, typ := range []string{events.TypeExecutionStarted, events.TypeStepStarted, events.TypeStepCompleted} {
		if n := len(f.events(id, typ)); n != 1 {
			t.Errorf("%d %s events, want 1", n, typ)
		}
	}
	rec, err := f.outcome(id)
	if err != nil || rec == nil {
		t.Fatalf("outcome %v, %v", rec, err)
	}
	if rec.Status != run.StatusCompleted || rec.Worker != "test" {
		t.Fatalf("record = %+v", rec)
	}
}

func TestRetriesThenDeadLetter(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("flaky", "flaky", 2))
	f.start()
	id := f.job("2", "flaky")
	failed := f.waitEvent(id, events.TypeExecutionFailed)
	f.drained()
	if failed["class"] != "retryable" || !strings.Contains(failed["error"].(string), "upstream timeout") {
		t.Fatalf("failed = %v", failed)
	}
	if n := f.calls["flaky"].Load(); n != 3 {
		t.Fatalf("tool called %d times, want 1 + max_retries 2 = 3", n)
	}
	if n := len(f.events(id, events.TypeExecutionRetrying)); n != 2 {
		t.Fatalf("%d retrying events, want 2", n)
	}
	dl := f.dead("skillbus.dead.flaky")
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	e, _ := bus.Decode(bus.FromNATS(&nats.Msg{Header: dl[0].Header, Data: dl[0].Data}))
	var d events.DeadLetter
	_ = json.Unmarshal(e.Data(), &d)
	if d.Job.ExecutionID != id || d.Deliveries != 3 || d.Class != "retryable" || !strings.Contains(d.Reason, "upstream timeout") {
		t.Fatalf("dead letter = %+v", d)
	}
	if n := len(f.events(id, events.TypeExecutionDeadlettered)); n != 1 {
		t.Fatalf("%d deadlettered events, want 1", n)
	}
	// An operator reading the worker's log sees both.
	logs := f.logs.String()
	if strings.Count(logs, `msg="worker: execution failed; retrying" execution=`+id) != 2 || !strings.Contains(logs, `msg="worker: execution dead-lettered" execution=`+id) {
		t.Errorf("the worker's log:\n%s", logs)
	}
}

func TestRetrySucceeds(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("once", "once-flaky", 3))
	f.start()
	id := f.job("3", "once")
	done := f.waitEvent(id, events.TypeExecutionCompleted)
	if done["attempt"].(float64) != 2 {
		t.Fatalf("completed on attempt %v, want 2", done["attempt"])
	}
	f.drained()
}

func TestFatalFallsBack(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("broken", "broken", 3), oneStep("hello", "greet", 3))
	f.start()
	id := f.job("4", "broken", "hello")
	fb := f.waitEvent(id, events.TypeExecutionFallback)
	if fb["next"] != "hello" || fb["class"] != "fatal" {
		t.Fatalf("fallback = %v", fb)
	}
	if n := f.calls["broken"].Load(); n != 1 {
		t.Fatalf("fatal failure retried: %d calls", n)
	}
	next := fb["next_execution_id"].(string)
	f.waitEvent(next, events.TypeExecutionCompleted)
	f.drained()
	if n := len(f.events(id, events.TypeExecutionFailed)) + len(f.events(id, events.TypeExecutionCompleted)); n != 0 {
		t.Fatalf("the failed skill published %d terminal events; the activation's only result is the fallback's", n)
	}
}

func TestUnknownSkillIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.start()
	id := f.job("5", "ghost")
	failed := f.waitEvent(id, events.TypeExecutionFailed)
	if !strings.Contains(failed["error"].(string), `"ghost" is not in the catalog`) {
		t.Fatalf("failed = %v", failed)
	}
	f.drained()
	if len(f.dead("skillbus.dead.ghost")) != 1 {
		t.Fatal("no dead letter")
	}
}

func TestUnreadableJobIsTerminated(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.start()
	if _, err := f.b.JS.Publish(f.ctx, "skillbus.exec.default.x", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	f.drained()
	natstest.Eventually(t, 10*time.Second, func() bool { return len(f.dead("skillbus.dead._job")) == 1 }, "no dead letter")
	m := f.dead("skillbus.dead._job")[0]
	if string(m.Data) != "not an event" || m.Header.Get("Skillbus-Reason") == "" {
		t.Fatalf("dead letter %q %v", m.Data, m.Header)
	}
}

// A job whose execution already has an outcome (its worker died after publishing
// it, before acking) is not run again, and the outcome stays the only one.
func TestRecordedResultWins(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	id := events.ExecutionID("/t", "6", "hello")
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Event(id, events.TypeExecutionCompleted), bus.Event{ID: run.OutcomeID(id), Source: "/t",
		Type: events.TypeExecutionCompleted, Data: events.ExecutionCompleted{ExecutionID: id, Skill: "hello", Outputs: map[string]any{"only": "earlier"}, Attempt: 1}})
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.start()
	f.job("6", "hello")
	f.drained()
	// The same job again, as if published after the duplicate window.
	f.jobMsgID("6", ".again", "hello")
	f.drained()
	done := f.events(id, events.TypeExecutionCompleted)
	if len(done) != 1 || done[0]["outputs"].(map[string]any)["only"] != "earlier" {
		t.Fatalf("completed events = %v, want the recorded result once", done)
	}
}

// An execution whose workers died running it more often than the crash allowance
// (each death leaves a claim whose lease runs out) is dead-lettered unrun; deliveries
// handed back on purpose (waiting for a holder, a reconnect, the server) do not count.
func TestCrashLoopEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 1))
	// Hand the job back four times, as waiting workers do: it still runs.
	eng, _ := workflow.New(workflow.Config{Tools: f.tools})
	w, _ := worker.New(worker.Config{Bus: f.b, Catalog: f.cat, Engine: eng})
	c, err := f.b.JS.CreateOrUpdateConsumer(f.ctx, f.b.StreamJobs(), w.ConsumerConfig("default"))
	if err != nil {
		t.Fatal(err)
	}
	handed := f.job("7", "hello")
	for range 4 {
		msgs, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			_ = m.Nak()
		}
	}
	// Another execution that killed two workers already: its claim's lease ran out.
	dead := events.ExecutionID("/t", "8", "hello")
	claim, _ := json.Marshal(map[string]any{"execution_id": dead, "worker": "gone", "lease_until": time.Now().Add(-time.Minute), "takeovers": 2})
	if _, err := f.runs.Create(f.ctx, dead+".claim", claim); err != nil {
		t.Fatal(err)
	}
	f.job("8", "hello")
	f.start()
	f.waitEvent(handed, events.TypeExecutionCompleted)
	failed := f.waitEvent(dead, events.TypeExecutionFailed)
	if !strings.Contains(failed["error"].(string), "workers died running it 3 times") {
		t.Fatalf("failed = %v", failed)
	}
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet ran %d times, want once (the handed-back job, not the crash loop)", n)
	}
	f.drained()
}

// TestLongStepKeepsItsJob: a step running three times the consumer's AckWait keeps
// its job — the worker tells JetStream it is still working on it — so the job is
// delivered once and its execution completes once.
func TestLongStepKeepsItsJob(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("slow", "wait", 0))
	// AckWait 2 s, a heartbeat every 2/3 s: a beat late by more than 1.3 s on a
	// loaded machine would let JetStream hand the job out again, which is what
	// this test looks for, not what it tests.
	f.startWorkerOn(f.b, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *worker.Config) { c.AckWait = 2 * time.Second })
	id := f.job("long", "slow")
	select {
	case <-f.blocked:
	case <-f.ctx.Done():
		t.Fatal("the step never started")
	}
	// The step holds the job for 3 AckWaits; without the heartbeat JetStream hands
	// it out again after the first.
	hold := time.After(6 * time.Second)
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	<-hold
	info, err := cons.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(f.release)
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Fatalf("while the step ran: %d redelivered, %d deliveries; want 0 and 1", info.NumRedelivered, info.Delivered.Consumer)
	}
	f.waitEvent(id, events.TypeExecutionCompleted)
	if n := f.calls["wait"].Load(); n != 1 {
		t.Fatalf("the step ran %d times, want 1", n)
	}
}

// A worker restarted under the same name (skillbus dev names its workers
// <host>-dev-N) is another process: the claim its predecessor died holding is a
// takeover, so a job that kills its worker on every run is dead-lettered once the
// crash allowance is spent instead of crash-looping the process for ever.
func TestCrashesUnderOneWorkerNameCount(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 1))
	dead := events.ExecutionID("/t", "9", "hello")
	// The worker named "test" died running it twice; its lease ran out.
	claim, _ := json.Marshal(map[string]any{"execution_id": dead, "worker": "test", "process": "before-the-restart",
		"lease_until": time.Now().Add(-time.Minute), "takeovers": 2})
	if _, err := f.runs.Create(f.ctx, dead+".claim", claim); err != nil {
		t.Fatal(err)
	}
	f.job("9", "hello")
	f.start() // named "test" too
	failed := f.waitEvent(dead, events.TypeExecutionFailed)
	if !strings.Contains(failed["error"].(string), "workers died running it 3 times") {
		t.Fatalf("failed = %v", failed)
	}
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet ran %d times, want none", n)
	}
	// The dead letter goes to another stream than the outcome: it is there once the
	// job is settled, not necessarily when the outcome is.
	f.drained()
	if d := f.dead("skillbus.dead.hello"); len(d) != 1 {
		t.Fatalf("%d dead letters, want 1", len(d))
	}
}
