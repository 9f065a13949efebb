package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// twoSteps: greet, then once-flaky (retryable on its first call), with options.
func twoSteps(name string, mod func(*skill.Skill)) *skill.Skill {
	three := 3
	s := &skill.Skill{Name: name, Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", MaxRetries: &three,
		Digest: strings.Repeat("cd", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{
			{ID: "first", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }}"}},
			{ID: "second", Tool: "once-flaky", Args: map[string]any{"after": "{{ first }}"}},
		}}}
	if mod != nil {
		mod(s)
	}
	return s
}

// A redelivered job resumes after its last completed step: the first step's tool
// is not called again.
func TestRedeliveryResumesFromCheckpoints(t *testing.T) {
	t.Parallel()
	f := setup(t, twoSteps("durable", nil))
	f.start()
	id := f.job("d1", "durable")
	done := f.waitEvent(id, events.TypeExecutionCompleted)
	if done["attempt"].(float64) != 2 {
		t.Fatalf("completed on attempt %v, want 2", done["attempt"])
	}
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("the first step ran %d times; its checkpoint should have been reused", n)
	}
	resumed := 0
	for _, e := range f.events(id, events.TypeStepCompleted) {
		if e["resumed"] == true {
			resumed++
		}
	}
	if resumed != 1 {
		t.Fatalf("%d resumed step.completed events, want 1", resumed)
	}
	f.drained()
}

func TestCacheAnswersRepeatedCalls(t *testing.T) {
	t.Parallel()
	s := oneStep("cached", "greet", 0)
	s.Workflow.Steps[0].Cache = skill.Duration(time.Minute)
	f := setup(t, s)
	f.start()
	for _, id := range []string{"c1", "c2"} {
		f.waitEvent(f.job(id, "cached"), events.TypeExecutionCompleted)
	}
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times with the same args, want 1 (cached)", n)
	}
}

// startRouter runs a router, which resumes paused executions when answered.
func (f *fixture) startRouter() {
	f.t.Helper()
	r, err := router.New(router.Config{Bus: f.b, Catalog: f.cat, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := r.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { r.Stop(f.ctx) })
}

func (f *fixture) answer(id, step string, approved bool) {
	f.t.Helper()
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Event(id, events.TypeConfirmationRecorded), bus.Event{
		ID: id + ".answer", Source: "/t", Type: events.TypeConfirmationRecorded,
		Data: events.ConfirmationRecorded{ExecutionID: id, StepID: step, Answer: events.Answer{Approved: approved, By: "ada"}},
	})
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func confirmSecond(timeout time.Duration) func(*skill.Skill) {
	return func(s *skill.Skill) {
		s.Workflow.Steps[1].Tool = "greet"
		s.Workflow.Steps[1].Args = map[string]any{"who": "{{ inputs.who }} again"}
		s.Workflow.Confirmations = []skill.Confirmation{{Step: "second", Message: "Greet {{ inputs.who }} again?", Timeout: skill.Duration(timeout)}}
	}
}

func TestConfirmationPausesWithoutHoldingAWorker(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		approved bool
		calls    int64
		status   string
	}{
		{"approved", true, 2, "completed"},
		{"denied", false, 1, "skipped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, twoSteps("careful", confirmSecond(time.Hour)))
			f.start()
			f.startRouter()
			id := f.job("p-"+tt.name, "careful")
			req := f.waitEvent(id, events.TypeConfirmationRequested)
			if req["step_id"] != "second" || req["message"] != "Greet ada again?" {
				t.Fatalf("confirmation.requested = %v", req)
			}
			f.drained() // the job is acked while it waits
			p, _, err := run.LoadPaused(f.ctx, f.runs, id)
			if err != nil || p == nil || p.Step != "second" {
				t.Fatalf("paused record %+v, %v", p, err)
			}
			f.answer(id, "second", tt.approved)
			f.waitEvent(id, events.TypeExecutionCompleted)
			if n := f.calls["greet"].Load(); n != tt.calls {
				t.Fatalf("greet called %d times, want %d", n, tt.calls)
			}
			rec, err := f.outcome(id)
			if err != nil || rec == nil {
				t.Fatalf("record %v %v", rec, err)
			}
			var log struct {
				Steps []struct{ ID, Status string }
			}
			_ = json.Unmarshal(rec.Log, &log)
			if len(log.Steps) != 2 || log.Steps[1].Status != tt.status {
				t.Fatalf("log steps %+v, want the second %s", log.Steps, tt.status)
			}
			f.drained()
		})
	}
}

func TestUnansweredConfirmationIsDenied(t *testing.T) {
	t.Parallel()
	f := setup(t, twoSteps("impatient", confirmSecond(time.Second)))
	f.start()
	f.startRouter()
	id := f.job("t1", "impatient")
	req := f.waitEvent(id, events.TypeConfirmationRequested)
	natstest.Eventually(t, 15*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) == 1 }, "not resumed after the deadline")
	// The denial, written when the run paused, is published at the deadline: its
	// time is then.
	if at := f.eventTimes(id, events.TypeConfirmationRecorded); len(at) != 1 || at[0].Format(time.RFC3339) != req["timeout_at"] {
		t.Fatalf("confirmation.recorded at %v, want one at the deadline %v", at, req["timeout_at"])
	}
	skipped := f.events(id, events.TypeStepSkipped)
	if len(skipped) != 1 || !strings.Contains(skipped[0]["reason"].(string), "denied by timeout") {
		t.Fatalf("skipped = %v", skipped)
	}
}

// A worker that dies in the middle of a job (its connection gone, the job never
// acked) leaves it to another worker, which resumes after the steps already done.
func TestWorkerDeathResumesFromCheckpoints(t *testing.T) {
	t.Parallel()
	three := 3
	s := &skill.Skill{Name: "long", Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", MaxRetries: &three,
		Digest: strings.Repeat("ef", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{
			{ID: "first", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }}"}},
			{ID: "second", Tool: "block"},
		}}}
	f := setup(t, s)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var blocked atomic.Int64
	f.tools = mustSet(t, f.tools, tool.Func("block", func(ctx context.Context, _ tool.Call) (any, error) {
		if blocked.Add(1) == 1 { // the first worker's call hangs until it "dies"
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}
		return "done", nil
	}))
	// Worker A on a connection of its own, which the test cuts.
	ncA, err := nats.Connect(f.b.NC.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	bA, err := bus.New(ncA, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engA, _ := workflow.New(workflow.Config{Tools: f.tools, Log: log})
	wA, err := worker.New(worker.Config{Bus: bA, Catalog: f.cat, Engine: engA, Log: log, AckWait: time.Second, Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if err := wA.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	id := f.job("w1", "long")
	<-entered
	// first's checkpoint is its step.completed event: wait until it is persisted.
	natstest.Eventually(t, 10*time.Second, func() bool { return len(f.events(id, events.TypeStepCompleted)) == 1 }, "first step not checkpointed")
	ncA.Close() // worker A dies: no ack, no more heartbeats
	close(release)
	wA.Stop(context.Background())

	f.start() // worker B
	done := f.waitEvent(id, events.TypeExecutionCompleted)
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("the first step ran %d times; worker B should have resumed after it", n)
	}
	if done["attempt"].(float64) != 1 {
		t.Fatalf("completed on attempt %v, want 1: a worker's death is not a retry", done["attempt"])
	}
	f.drained()
}

func mustSet(t *testing.T, base *tool.Set, extra ...tool.Tool) *tool.Set {
	t.Helper()
	var tools []tool.Tool
	for _, n := range base.Names() {
		tl, _ := base.Lookup(n)
		tools = append(tools, tl)
	}
	s, err := tool.NewSet(append(tools, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The attempt number comes from the execution's claim, not from JetStream's delivery
// count: here the server restarts in the middle of the retries and its consumer's
// memory of the deliveries is lost (the consumer is created anew, as when a killed
// server forgets its last moments), so the job comes back with NumDelivered == 1.
// The skill still runs exactly 1 + max_retries times, attempts 1 to 4.
func TestRetryCountSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("flaky", "flaky", 3))
	nc, err := nats.Connect(f.srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Backoffs of 1.5s to 3s leave the test the time to restart the server between
	// the first and the second attempt.
	w := f.startWorkerOn(b, "test", log, func(c *worker.Config) { c.Backoff = worker.Backoff{Base: 3 * time.Second, Max: 3 * time.Second} })
	id := f.job("r1", "flaky")
	natstest.Eventually(t, 10*time.Second, func() bool { return len(f.events(id, events.TypeExecutionRetrying)) == 1 }, "no first retry")
	// The server stops and comes back having forgotten its consumer's deliveries.
	state := filepath.Join(f.srv.Server.JetStreamConfig().StoreDir, "$G", "streams", b.StreamJobs(), "obs", w.ConsumerConfig("default").Durable, "o.dat")
	f.srv.Stop()
	if err := os.Remove(state); err != nil {
		t.Fatalf("the consumer's state: %v", err)
	}
	f.srv.Start()
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.events(id, events.TypeExecutionFailed)) > 0 }, "the execution did not fail")
	f.drained()
	if n := f.calls["flaky"].Load(); n != 4 {
		t.Fatalf("flaky ran %d times, want 4 (1 + max_retries 3)", n)
	}
	failed := f.events(id, events.TypeExecutionFailed)
	if len(failed) != 1 || failed[0]["attempt"] != 4.0 {
		t.Fatalf("failed = %v, want one outcome on attempt 4", failed)
	}
	var attempts []float64
	for _, e := range f.events(id, events.TypeExecutionRetrying) {
		attempts = append(attempts, e["attempt"].(float64))
	}
	if !slices.Equal(attempts, []float64{1, 2, 3}) {
		t.Fatalf("retrying attempts %v, want [1 2 3]", attempts)
	}
}

// Deliveries handed back without a run (another worker held the execution) do not
// use up retries: the skill runs 1 + max_retries times all the same.
func TestHandBacksDoNotUseRetries(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("flaky", "flaky", 2))
	id := events.ExecutionID("/t", "hb", "flaky")
	claim, _ := json.Marshal(map[string]any{"execution_id": id, "worker": "other", "lease_until": time.Now().Add(1500 * time.Millisecond)})
	if _, err := f.runs.Create(f.ctx, id+".claim", claim); err != nil {
		t.Fatal(err)
	}
	f.job("hb", "flaky") // older than the worker: the claim path
	f.start()
	failed := f.waitEvent(id, events.TypeExecutionFailed)
	f.drained()
	if n := f.calls["flaky"].Load(); n != 3 {
		t.Fatalf("flaky ran %d times, want 3 (1 + max_retries 2)", n)
	}
	if failed["attempt"] != 3.0 {
		t.Fatalf("failed on attempt %v, want 3", failed["attempt"])
	}
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(f.ctx); err != nil || info.Delivered.Consumer <= 3 {
		t.Fatalf("consumer %+v %v: the job was never handed back, so the test proves nothing", info, err)
	}
}

// A job handed back many times is still delivered: the workers' consumer has no
// delivery limit, and one left by an older version with a limit is updated. Under
// repeated server restarts a job is handed back dozens of times without running; a
// job past the limit stays in the work queue forever, with no outcome.
func TestConsumerHasNoDeliveryLimit(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 3))
	old := jetstream.ConsumerConfig{Durable: "worker-default", FilterSubject: f.b.Subjects.ExecPool("default"),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: 64, MaxAckPending: 10000}
	if _, err := f.b.JS.CreateConsumer(f.ctx, f.b.StreamJobs(), old); err != nil {
		t.Fatal(err)
	}
	f.start()
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	if n := cons.CachedInfo().Config.MaxDeliver; n != -1 {
		t.Fatalf("MaxDeliver %d: a job handed back that often would be stranded", n)
	}
	f.waitEvent(f.job("limitless", "hello"), events.TypeExecutionCompleted)
}
