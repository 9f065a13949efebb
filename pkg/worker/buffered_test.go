package worker_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/worker"
)

// A job the worker's client fetched while every slot was busy waits in its
// buffer; if the slots stay busy past the ack wait, JetStream delivers it again
// to another worker. When the first worker's slot frees, the copy it fetched
// first must not run the execution a second time.
func TestJobFetchedPastItsAckWaitRunsOnce(t *testing.T) {
	t.Parallel()
	s := oneStep("slow", "keyed", 0)
	s.Workflow.Steps[0].Args = map[string]any{"key": "{{ inputs.key }}"}
	f := setup(t, s)
	o := newOverlap("x")
	f.tools = mustSet(t, f.tools, o.tool())
	one := func(c *worker.Config) { c.Concurrency = 1 }
	f.startWorkerOn(f.b, "a", slog.New(slog.NewTextHandler(&f.logs, nil)), one)
	ids := []string{f.keyedJob("slow", "j0", "x"), f.keyedJob("slow", "j1", "x")}
	<-o.started
	f.handedOut(2, 20*time.Second, "the first worker did not fetch every job")
	f.startWorkerOn(f.b, "b", slog.New(slog.NewTextHandler(&f.logs, nil)), one)
	select {
	case <-o.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no job was delivered again to the second worker")
	}
	o.open("x")
	for _, id := range ids {
		f.waitEvent(id, events.TypeExecutionCompleted)
	}
	f.drained()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		if o.calls[id] != 1 {
			t.Errorf("execution %s ran its step %d times, want 1 (calls %v)", id, o.calls[id], o.calls)
		}
	}
}

// The bound on a job's wait in the buffer grows while the worker is idle, but a
// job stored just now cannot have waited: after an idle spell longer than the
// bound allows, a new job still runs on the fast path (no claim written).
func TestFreshJobAfterAnIdleSpellTakesTheFastPath(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("idle", "greet", 0))
	started := time.Now()
	f.startWorkerOn(f.b, "a", slog.New(slog.NewTextHandler(&f.logs, nil)), func(c *worker.Config) { c.Concurrency = 1 })
	// Idle for more than a quarter of the ack wait (1 s): the loop's bound on a
	// message's wait is that long now.
	natstest.Eventually(t, 10*time.Second, func() bool { return time.Since(started) > 600*time.Millisecond }, "time stood still")
	id := f.job("i0", "idle")
	f.waitEvent(id, events.TypeExecutionCompleted)
	if _, err := f.runs.Get(f.ctx, events.RunClaimKey(id)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("claim of a fresh job after an idle spell: %v, want none (the fast path)", err)
	}
}
