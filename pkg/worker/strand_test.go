package worker_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/worker"
)

// Every path by which a run waiting for a concurrency slot could be left waiting
// with a slot free and no one to release it.

// waitsFor waits until the execution's run is set aside and its delivery
// settled, running runs still holding theirs: a run seen set aside may still be
// trying the slots once more, and would take one freed then itself.
func (f *fixture) waitsFor(id string, running int) {
	f.t.Helper()
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		f.t.Fatal(err)
	}
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		if _, err := f.runs.Get(f.ctx, events.RunHeldKey(id)); err != nil {
			return false
		}
		info, err := cons.Info(f.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == running
	}, "the run did not wait for a slot")
}

// A slot freed with no delete that any worker sees — its key removed while the
// server could not write the marker (a full store, a restart), or the marker gone
// before a watcher that was away came back — still frees its waiting run: a gate
// with waiting runs that has been quiet for an ack wait is checked against the
// slots in KV. Here the slot's message is purged from the stream, which writes no
// marker; without the check the run waits for ever.
func TestSlotFreedUnseenReleasesItsWaitingRun(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("unseen", 1))
	o := newOverlap()
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	slot := events.ConcSlotKey(slotGate("unseen", "u"), 0)
	if _, err := f.runs.Create(f.ctx, slot, []byte("gone-execution")); err != nil {
		t.Fatal(err)
	}
	id := f.keyedJob("unseen", "u0", "u")
	f.waitsFor(id, 0)
	st, err := f.b.JS.Stream(f.ctx, "KV_"+f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(f.ctx, jetstream.WithPurgeSubject("$KV."+f.b.BucketRuns()+"."+slot)); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	f.waitEvent(id, events.TypeExecutionCompleted)
	// The ack wait is 1s: the gate is checked once it has been quiet that long,
	// at most half an ack wait late. The bound leaves a loaded machine room for
	// the release, the delivery and the run.
	if d := time.Since(freed); d > 8*time.Second {
		t.Fatalf("the waiting run started %v after its slot freed unseen, want within 1.5 ack waits", d)
	}
	f.drained()
	f.noneWaiting()
	if n := f.outcomes(id); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A run released for a freed slot that is cancelled before it takes the slot
// passes its turn on at once: the next waiting run of its key starts, not only
// when the next slot of the key frees (with a limit of one, never). The ack wait
// is long here, so that the periodic check of quiet gates cannot be what
// releases it within the test's bound.
func TestCancelledReleasedRunPassesItsTurn(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("pass-turn", 1))
	o := newOverlap("p")
	f.tools = mustSet(t, f.tools, o.tool())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.startWorkerOn(f.b, "slow-ack", log, func(c *worker.Config) { c.AckWait = 30 * time.Second })
	first := f.keyedJob("pass-turn", "p0", "p")
	if k := <-o.started; k != "p" {
		t.Fatalf("started %q", k)
	}
	released := events.ExecutionID("/t", "p1", "pass-turn")
	ctl := f.control()
	var once sync.Once
	unset := worker.SetReleaseFault(func(id string) error {
		if id == released {
			// Cancelled as it is released: its copy finds the cancel.
			once.Do(func() {
				if _, err := ctl.Cancel(f.ctx, id, control.Request{By: "ada", Reason: "wrong input"}); err != nil {
					t.Error(err)
				}
			})
		}
		return nil
	})
	t.Cleanup(unset)
	f.keyedJob("pass-turn", "p1", "p")
	f.waitsFor(released, 1)
	next := f.keyedJob("pass-turn", "p2", "p")
	f.waitsFor(next, 1)
	o.open("p")
	f.waitEvent(first, events.TypeExecutionCompleted)
	f.waitCancelled(released)
	ended := time.Now()
	f.waitEvent(next, events.TypeExecutionCompleted)
	// The gates' periodic check comes an ack wait after the release at the
	// earliest: only the turn passed on starts it sooner.
	if d := time.Since(ended); d > 12*time.Second {
		t.Fatalf("the next waiting run started %v after the released run was cancelled, want at once", d)
	}
	f.drained()
	f.noneWaiting()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.calls[released] != 0 || o.most["p"] != 1 {
		t.Fatalf("calls %v, most at once %v: the cancelled run ran, or runs overlapped", o.calls, o.most)
	}
	for _, id := range []string{first, released, next} {
		if n := f.outcomes(id); n != 1 {
			t.Fatalf("%s: %d outcomes, want 1", id, n)
		}
	}
}

// A slot freed unseen frees its waiting run however busy the gate's other slots
// are: the live holders' renewals do not keep the gate from being checked, and
// the check corrects every worker's view of the slot, so the released run finds it.
// Here 19 of 20 slots are held by runs renewing them; the 20th is purged from the
// stream, which writes no marker.
func TestSlotFreedUnseenAmongLiveHolders(t *testing.T) {
	t.Parallel()
	const limit = 20
	f := setup(t, keyedSkill("busy-unseen", limit))
	o := newOverlap()
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	gate := slotGate("busy-unseen", "b")
	for n := range limit {
		if _, err := f.runs.Create(f.ctx, events.ConcSlotKey(gate, n), []byte(fmt.Sprintf("holder-%d", n))); err != nil {
			t.Fatal(err)
		}
	}
	first := f.keyedJob("busy-unseen", "b0", "b")
	f.waitsFor(first, 0)
	second := f.keyedJob("busy-unseen", "b1", "b")
	f.waitsFor(second, 0)
	// The live holders renew their slots every third of the ack wait (1s).
	renewing, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewing)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for n := range limit - 1 {
				if _, err := f.runs.Put(f.ctx, events.ConcSlotKey(gate, n), []byte(fmt.Sprintf("holder-%d", n))); err != nil && f.ctx.Err() == nil {
					t.Error(err)
				}
			}
		}
	}()
	stopRenewing := sync.OnceFunc(func() { close(stop); <-renewing })
	t.Cleanup(stopRenewing)
	st, err := f.b.JS.Stream(f.ctx, "KV_"+f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(f.ctx, jetstream.WithPurgeSubject("$KV."+f.b.BucketRuns()+"."+events.ConcSlotKey(gate, limit-1))); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	var started string
	select {
	case k := <-o.started:
		started = k
	case <-time.After(20 * time.Second):
		t.Fatal("no waiting run started after a slot freed unseen among live holders")
	}
	// One and a half ack waits, with room for a loaded machine, as above.
	if d := time.Since(freed); started != "b" || d > 8*time.Second {
		t.Fatalf("a waiting run (key %q) started %v after its slot freed unseen, want within 1.5 ack waits", started, d)
	}
	stopRenewing()
	for n := range limit - 1 {
		if err := f.runs.Delete(f.ctx, events.ConcSlotKey(gate, n)); err != nil {
			t.Fatal(err)
		}
	}
	f.waitEvent(first, events.TypeExecutionCompleted)
	f.waitEvent(second, events.TypeExecutionCompleted)
	f.drained()
	f.noneWaiting()
	for _, id := range []string{first, second} {
		if n := f.outcomes(id); n != 1 {
			t.Fatalf("%s: %d outcomes, want 1", id, n)
		}
	}
}
