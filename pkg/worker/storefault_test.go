package worker_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
)

// Work that finished while the server is up but cannot store what it caused (a full
// store acknowledges no new message) is kept and published once the server stores
// again, however long that takes: never handed back to run its steps a second time.
func TestFinishedWhileTheStoreIsFullIsNotRunAgain(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("slow", "wait", 3))
	full := &logged{msg: "cannot store"}
	f.startWorkerOn(f.b, "test", slog.New(full), nil)
	id := f.job("full", "slow")
	<-f.blocked

	released := false
	defer func() {
		if !released {
			close(f.release)
		}
	}()
	// The events stream and the runs bucket (checkpoints, claims) store nothing
	// while the step runs: no stream takes their subjects, so a publish gets no
	// acknowledgement, as from a server whose store cannot be written.
	var restore []jetstream.StreamConfig
	for _, name := range []string{f.b.StreamEvents(), "KV_" + f.b.BucketRuns()} {
		st, err := f.b.JS.Stream(f.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		restore = append(restore, info.Config)
		refusing := info.Config
		refusing.Subjects = []string{"parked." + name}
		if _, err := f.b.JS.UpdateStream(f.ctx, refusing); err != nil {
			t.Fatal(err)
		}
	}
	close(f.release)
	released = true
	// Three times the time a job is held: a worker that gave its finished work up
	// would have it redelivered and its step run again once the store takes writes.
	held := time.NewTimer(3 * time.Second)
	<-held.C
	for _, cfg := range restore {
		if _, err := f.b.JS.UpdateStream(f.ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) > 0 }, "no outcome once the store took writes again")
	f.drained()
	if n := f.calls["wait"].Load(); n != 1 {
		t.Fatalf("wait called %d times, want 1: finished work was handed back and run again", n)
	}
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
	if n := len(f.events(id, events.TypeStepCompleted)); n != 1 {
		t.Fatalf("%d step.completed events, want 1", n)
	}
	if !full.seen() {
		t.Error("the worker did not say that it keeps the finished execution until the server can store it")
	}
}
