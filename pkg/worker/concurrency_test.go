package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

// keyedSkill runs the "keyed" tool once, with the run's key, under a limit per key.
func keyedSkill(name string, limit int) *skill.Skill {
	s := oneStep(name, "keyed", 0)
	s.Digest = strings.Repeat("c1", 32)
	s.Workflow.Steps[0].Args = map[string]any{"key": "{{ inputs.key }}"}
	s.Concurrency = []skill.Concurrency{{Key: "data.key", Limit: limit}}
	return s
}

// overlap is the "keyed" tool's record: the runs of each key running now, the most
// ever at once, and each execution's calls. A run of a key in hold waits for
// that key's channel to close.
type overlap struct {
	mu      sync.Mutex
	active  map[string]int
	most    map[string]int
	calls   map[string]int
	hold    map[string]chan struct{}
	started chan string // each call's key
}

func newOverlap(held ...string) *overlap {
	o := &overlap{active: map[string]int{}, most: map[string]int{}, calls: map[string]int{}, hold: map[string]chan struct{}{},
		started: make(chan string, 1024)}
	for _, k := range held {
		o.hold[k] = make(chan struct{})
	}
	return o
}

func (o *overlap) tool() tool.Tool {
	return tool.Func("keyed", func(ctx context.Context, c tool.Call) (any, error) {
		key, _ := c.Args["key"].(string)
		o.mu.Lock()
		o.active[key]++
		o.most[key] = max(o.most[key], o.active[key])
		o.calls[c.ExecutionID]++
		wait := o.hold[key]
		o.mu.Unlock()
		o.started <- key
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
		o.mu.Lock()
		o.active[key]--
		o.mu.Unlock()
		return "ok", nil
	})
}

func (o *overlap) open(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.hold[key])
	delete(o.hold, key)
}

// keyedJob publishes a job of skill whose inputs name key.
func (f *fixture) keyedJob(name, id, key string) string {
	f.t.Helper()
	in, _ := json.Marshal(map[string]string{"key": key})
	return f.jobWithInputs(name, id, in)
}

// jobWithInputs publishes a job of skill, in the default pool, with inputs in.
func (f *fixture) jobWithInputs(name, id string, in json.RawMessage) string {
	f.t.Helper()
	ref := events.SkillRef{Name: name, Pool: "default", ExecutionID: events.ExecutionID("/t", id, name), Version: "1.0.0"}
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref,
		Inputs: in, Trigger: events.TriggerRef{ID: id, Source: "/t", Type: "com.example.order", Subject: "x"}}
	m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob, Data: j}.
		JobMsg(f.b.Subjects.Exec("default", name, j.ActivationID, events.StagePlan))
	if err != nil {
		f.t.Fatal(err)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	return j.ExecutionID
}

// handedOut waits until the default pool's consumer has nothing left to deliver
// and n deliveries out, unacknowledged.
func (f *fixture) handedOut(n uint64, within time.Duration, msg string) {
	f.t.Helper()
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		f.t.Fatal(err)
	}
	natstest.Eventually(f.t, within, func() bool {
		info, err := cons.Info(f.ctx)
		return err == nil && info.NumPending == 0 && uint64(info.NumAckPending) == n
	}, msg)
}

// noneWaiting checks that no run is left waiting for a slot.
func (f *fixture) noneWaiting() {
	f.t.Helper()
	natstest.Eventually(f.t, 20*time.Second, func() bool {
		l, err := f.runs.ListKeysFiltered(f.ctx, events.RunsHeldFilter)
		if err != nil {
			return false
		}
		n := 0
		for range l.Keys() {
			n++
		}
		return n == 0
	}, "runs are still waiting for a slot")
}

// One key flooded with 200 runs does not delay another key's run: with a limit of
// one run per key, key b's run starts while the first run of the flooded key a
// still holds a's slot, that is within one slot's turn, across two workers. No
// two runs of a key ever overlap, every run runs exactly once, and the runs that
// wait hold no worker.
func TestKeyedConcurrencyIsFairBetweenKeys(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("per-customer", 1))
	// The flooded key's 200 runs run one at a time: more than the fixture's 30s
	// under the race detector and a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	o := newOverlap("a")
	f.tools = mustSet(t, f.tools, o.tool())
	// A slot is a lease renewed every third of the ack wait: 3 s rather than the
	// fixture's 1 s, so that a heartbeat late on a loaded machine does not let the
	// lease of a's first run, which waits for the test, run out (its run would
	// then stop, and the next run of a take the slot: see renewSlots).
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	longer := func(c *worker.Config) { c.AckWait = 3 * time.Second }
	f.startWorkerOn(f.b, "test", log, longer)
	f.startWorkerOn(f.b, "second", log, longer)
	const flood = 200
	for i := range flood {
		f.keyedJob("per-customer", "a"+strconv.Itoa(i), "a")
	}
	b := f.keyedJob("per-customer", "b0", "b")
	deadline := time.After(20 * time.Second)
	for seen := map[string]int{}; seen["b"] == 0; {
		select {
		case k := <-o.started:
			seen[k]++
			if seen["a"] > 1 {
				t.Fatalf("a second run of key a started before a's first ended")
			}
		case <-deadline:
			t.Fatal("key b's run did not start while key a's first run held its slot")
		}
	}
	f.waitEvent(b, events.TypeExecutionCompleted)
	// The flood waits without holding workers: nothing of it is handed out.
	f.handedOut(1, 20*time.Second, "the waiting runs still hold deliveries")
	o.open("a")
	natstest.Eventually(t, 90*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.calls) == flood+1
	}, "the flooded key's runs did not all run")
	f.drained()
	f.noneWaiting()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.most["a"] != 1 || o.most["b"] != 1 {
		t.Fatalf("most runs at once by key: %v, want 1 each", o.most)
	}
	if len(o.calls) != flood+1 {
		t.Fatalf("%d executions ran, want %d", len(o.calls), flood+1)
	}
	for id, n := range o.calls {
		if n != 1 {
			t.Fatalf("%s ran %d times", id, n)
		}
	}
}

// slotGate is the gate of a key value of a skill's first concurrency entry.
func slotGate(skillName, key string) string {
	return events.ConcGate(skillName, 0, events.KeyHash(key))
}

// A slot whose holder died (its heartbeat stopped: here a slot written as a dead
// worker's, never renewed) expires within the ack wait, and the run waiting for
// it starts then, though no run ends to free it.
func TestSlotOfADeadHolderFreesItsWaitingRun(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("per-customer", 1))
	o := newOverlap()
	f.tools = mustSet(t, f.tools, o.tool())
	// An ack wait long beside what a loaded machine adds to the release, the
	// delivery and the run, so that the bound below is about the expiry.
	const ackWait = 5 * time.Second
	f.startWorkerOn(f.b, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *worker.Config) { c.AckWait = ackWait })
	if _, err := f.runs.Create(f.ctx, events.ConcSlotKey(slotGate("per-customer", "z"), 0), []byte("dead-execution"),
		jetstream.KeyTTL(ackWait)); err != nil {
		t.Fatal(err)
	}
	took := time.Now()
	id := f.keyedJob("per-customer", "z0", "z")
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, events.RunHeldKey(id))
		return err == nil
	}, "the run did not wait for the dead holder's slot")
	f.waitEvent(id, events.TypeExecutionCompleted)
	// The slot expires an ack wait after it was written (the server expires
	// per-key TTLs to the second); without the expiry the run would never start
	// (waitEvent would fail). The release, the delivery and the run get one more
	// ack wait, on a loaded 2-core machine.
	if d := time.Since(took); d > 2*ackWait {
		t.Fatalf("the waiting run completed %v after the dead holder's last renewal, want within the ack wait and the time to run it (%v in all)", d, 2*ackWait)
	}
	f.drained()
	f.noneWaiting()
	if n := f.outcomes(id); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A run waiting for a slot is cancelled like a queued run: it never starts, and
// it ends cancelled exactly once; the runs after it still run.
func TestCancelARunWaitingForASlot(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("per-customer", 1))
	o := newOverlap("k")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	first := f.keyedJob("per-customer", "k0", "k")
	<-o.started
	waiting := f.keyedJob("per-customer", "k1", "k")
	last := f.keyedJob("per-customer", "k2", "k")
	natstest.Eventually(t, 10*time.Second, func() bool {
		var h run.Held
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(waiting))
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && h.Gate == slotGate("per-customer", "k")
	}, "the second run of key k did not wait")
	f.cancel(waiting)
	f.waitCancelled(waiting)
	o.open("k")
	f.waitEvent(first, events.TypeExecutionCompleted)
	f.waitEvent(last, events.TypeExecutionCompleted)
	f.drained()
	f.noneWaiting()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.calls[waiting] != 0 || o.most["k"] != 1 {
		t.Fatalf("calls %v, most at once %v: the cancelled run ran, or runs overlapped", o.calls, o.most)
	}
	if n := f.outcomes(waiting); n != 1 {
		t.Fatalf("%d outcomes of the cancelled run, want 1", n)
	}
}

// A run whose slot frees between writing its waiting record and trying the slots
// again may be released (a copy published) while it takes the slot itself: only
// one of the two runs, whichever claims the execution first (the first delivery
// goes from the fast path to the claim path for it). The test publishes the copy
// a worker would, under the same message id, and frees the slot at that moment.
// (Not parallel: it sets the worker's held-record hook.)
func TestRunReleasedWhileItTakesItsSlotRunsOnce(t *testing.T) {
	f := setup(t, keyedSkill("race-slot", 1))
	o := newOverlap("r")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	second := f.startWorker("second")
	slot := events.ConcSlotKey(slotGate("race-slot", "r"), 0)
	if _, err := f.runs.Create(f.ctx, slot, []byte("blocker")); err != nil {
		t.Fatal(err)
	}
	want := events.ExecutionID("/t", "r0", "race-slot")
	var once sync.Once
	unset := worker.SetHeldWrittenHook(func(id string, rev uint64) {
		if id != want {
			return
		}
		once.Do(func() {
			e, err := f.runs.Get(f.ctx, events.RunHeldKey(id))
			if err != nil {
				t.Error(err)
				return
			}
			var h run.Held
			var j events.Job
			if err := json.Unmarshal(e.Value(), &h); err != nil {
				t.Error(err)
				return
			}
			if err := json.Unmarshal(h.Job, &j); err != nil {
				t.Error(err)
				return
			}
			m, err := bus.Event{ID: id + ".job.slot." + strconv.FormatUint(rev, 10), Source: "/w", Type: events.TypeJob, Data: j}.
				JobMsg(f.b.Subjects.Exec(j.Skill.Pool, j.Skill.Name, j.ActivationID, events.StageSlot))
			if err != nil {
				t.Error(err)
				return
			}
			m.Header.Set(events.HeaderRecovered, "1")
			bt := f.b.Batch()
			bt.Publish(m)
			if err := bt.Wait(f.ctx); err != nil {
				t.Error(err)
			}
			if err := f.runs.Delete(f.ctx, slot); err != nil {
				t.Error(err)
			}
			// The free is seen before the run tries again.
			for _, w := range []*worker.Worker{f.w, second} {
				for deadline := time.Now().Add(10 * time.Second); w.SlotHolder(slotGate("race-slot", "r"), 0) == "blocker"; {
					if time.Now().After(deadline) {
						t.Error("a worker's view did not see the slot freed")
						return
					}
					runtime.Gosched()
				}
			}
		})
	})
	t.Cleanup(unset)
	if id := f.keyedJob("race-slot", "r0", "r"); id != want {
		t.Fatalf("execution %s, want %s", id, want)
	}
	if k := <-o.started; k != "r" {
		t.Fatalf("started %q", k)
	}
	o.open("r")
	f.waitEvent(want, events.TypeExecutionCompleted)
	f.drained()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.most["r"] != 1 || o.calls[want] != 1 {
		t.Fatalf("%d runs at once, %d calls, want 1 and 1", o.most["r"], o.calls[want])
	}
	if n := f.outcomes(want); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// The other order of the race above: the run's copy, released meanwhile, claims
// the execution and takes the slot before the first delivery tries the slots
// again. The first delivery finds the slot held by its own execution but must not
// take it back (it holds no claim: the copy is running), nor, when its claim then
// fails, free it: that let another run of the key start beside the copy.
// (Not parallel: it sets the worker's held-record hook.)
func TestRunReleasedWhileItWaitsKeepsItsCopysSlot(t *testing.T) {
	f := setup(t, keyedSkill("copy-slot", 1))
	o := newOverlap("c")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	f.startWorker("second")
	gate := slotGate("copy-slot", "c")
	slot := events.ConcSlotKey(gate, 0)
	if _, err := f.runs.Create(f.ctx, slot, []byte("blocker")); err != nil {
		t.Fatal(err)
	}
	want := events.ExecutionID("/t", "c0", "copy-slot")
	var once sync.Once
	copyRuns := make(chan struct{})
	unset := worker.SetHeldWrittenHook(func(id string, rev uint64) {
		if id != want {
			return
		}
		once.Do(func() {
			// Free the slot: the workers release the waiting run, and its copy
			// claims the execution and takes the slot before this delivery goes on.
			if err := f.runs.Delete(f.ctx, slot); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-o.started:
			case <-time.After(30 * time.Second):
				t.Error("the released copy did not start")
			}
			close(copyRuns)
		})
	})
	t.Cleanup(unset)
	if id := f.keyedJob("copy-slot", "c0", "c"); id != want {
		t.Fatalf("execution %s, want %s", id, want)
	}
	select {
	case <-copyRuns:
	case <-time.After(60 * time.Second):
		t.Fatal("the first delivery never waited for a slot")
	}
	e, err := f.runs.Get(f.ctx, slot)
	if err != nil || string(e.Value()) != want {
		t.Fatalf("slot %v (%v), want held by the running copy", e, err)
	}
	// The first delivery ends (acked: its copy runs) without touching the slot.
	f.handedOut(1, 30*time.Second, "the first delivery was not settled while its copy runs")
	e2, err := f.runs.Get(f.ctx, slot)
	if err != nil || string(e2.Value()) != want || e2.Revision() < e.Revision() {
		t.Fatalf("slot %v (%v) after the first delivery ended, want still the copy's", e2, err)
	}
	// Another run of the key waits for the copy.
	other := f.keyedJob("copy-slot", "c1", "c")
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, events.RunHeldKey(other))
		return err == nil
	}, "the second run of the key did not wait for a slot")
	o.open("c")
	f.waitEvent(want, events.TypeExecutionCompleted)
	f.waitEvent(other, events.TypeExecutionCompleted)
	f.drained()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.most["c"] != 1 || o.calls[want] != 1 || o.calls[other] != 1 {
		t.Fatalf("%d runs at once, calls %v, want 1 and one each", o.most["c"], o.calls)
	}
	if n := f.outcomes(want); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A running run whose slot is taken by another (its heartbeat was late and the
// slot expired) is stopped, so two runs of a key never overlap; it runs again
// once it gets a slot, and ends once.
func TestRunThatLosesItsSlotStops(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("lose-slot", 1))
	o := newOverlap("l")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	id := f.keyedJob("lose-slot", "l0", "l")
	if k := <-o.started; k != "l" {
		t.Fatalf("started %q", k)
	}
	slot := events.ConcSlotKey(slotGate("lose-slot", "l"), 0)
	if _, err := f.runs.Put(f.ctx, slot, []byte("another-execution")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.active["l"] == 0
	}, "the run went on after another took its slot")
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, events.RunHeldKey(id))
		return err == nil
	}, "the stopped run did not wait for a slot again")
	if err := f.runs.Delete(f.ctx, slot); err != nil {
		t.Fatal(err)
	}
	o.open("l")
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.drained()
	f.noneWaiting()
	if n := f.outcomes(id); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A run whose slot is lost after it has finished (its lease ran out while the
// server could not take the renewal: a full disk, an outage, with the outcome
// still waiting to be published) is not stopped and run again: there is nothing
// left to stop, and its steps would run twice. Its outcome is published.
func TestFinishedRunThatLosesItsSlotIsNotRunAgain(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("lose-late", 1))
	o := newOverlap()
	f.tools = mustSet(t, f.tools, o.tool())
	id := events.ExecutionID("/t", "f0", "lose-late")
	slot := events.ConcSlotKey(slotGate("lose-late", "f"), 0)
	lost := make(chan struct{})
	var once sync.Once
	defer worker.SetSlotLostHook(func(exec string) {
		if exec == id {
			once.Do(func() { close(lost) })
		}
	})()
	defer worker.SetFinishedHook(func(exec string) {
		if exec != id {
			return
		}
		// Another run takes the slot between the run's end and its settling, and
		// the heartbeat finds it before the outcome is published.
		if _, err := f.runs.Put(f.ctx, slot, []byte("another-execution")); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-lost:
		case <-time.After(10 * time.Second):
			t.Error("the heartbeat did not find the slot taken")
		}
	})()
	f.start()
	if got := f.keyedJob("lose-late", "f0", "f"); got != id {
		t.Fatalf("execution %s, want %s", got, id)
	}
	f.waitEvent(id, events.TypeExecutionCompleted)
	if err := f.runs.Delete(f.ctx, slot); err != nil {
		t.Fatal(err)
	}
	f.drained()
	o.mu.Lock()
	calls := o.calls[id]
	o.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the step ran %d times, want 1", calls)
	}
	if n := f.outcomes(id); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A waiting run whose release fails (a publish timing out during a leader
// change) is released again: it does not wait for a free that never comes.
func TestFailedReleaseIsRetried(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("release-fault", 1))
	o := newOverlap("f")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	first := f.keyedJob("release-fault", "f0", "f")
	if k := <-o.started; k != "f" {
		t.Fatalf("started %q", k)
	}
	second := events.ExecutionID("/t", "f1", "release-fault")
	var failed atomic.Int64
	unset := worker.SetReleaseFault(func(id string) error {
		if id == second && failed.Add(1) == 1 {
			return errors.New("injected: no acknowledgement")
		}
		return nil
	})
	t.Cleanup(unset)
	f.keyedJob("release-fault", "f1", "f")
	f.waitsFor(second, 1)
	o.open("f")
	f.waitEvent(first, events.TypeExecutionCompleted)
	f.waitEvent(second, events.TypeExecutionCompleted)
	if failed.Load() < 2 {
		t.Fatalf("the release was tried %d times, want a retry after the failure", failed.Load())
	}
	f.drained()
	f.noneWaiting()
}

// Resuming a skill that was never paused leaves its runs waiting for a slot
// where they are: they keep their place and are released when a slot frees.
func TestResumeLeavesRunsWaitingForASlot(t *testing.T) {
	t.Parallel()
	f := setup(t, keyedSkill("resume-gate", 1))
	o := newOverlap("g")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	first := f.keyedJob("resume-gate", "g0", "g")
	if k := <-o.started; k != "g" {
		t.Fatalf("started %q", k)
	}
	second := f.keyedJob("resume-gate", "g1", "g")
	var rev uint64
	natstest.Eventually(t, 10*time.Second, func() bool {
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(second))
		if err == nil {
			rev = e.Revision()
		}
		return err == nil
	}, "the second run did not wait for the slot")
	n, was, err := f.control().Resume(f.ctx, "resume-gate", control.Request{By: "ada", Reason: "not paused"})
	if err != nil || was || n != 0 {
		t.Fatalf("resume released %d (paused: %v, %v), want 0 of a skill never paused", n, was, err)
	}
	if e, err := f.runs.Get(f.ctx, events.RunHeldKey(second)); err != nil || e.Revision() != rev {
		t.Fatalf("the waiting run's record was touched by the resume: %v", err)
	}
	o.open("g")
	f.waitEvent(first, events.TypeExecutionCompleted)
	f.waitEvent(second, events.TypeExecutionCompleted)
	f.drained()
	f.noneWaiting()
}

// A run whose concurrency key reads a required input the trigger lacks fails
// naming the input, as the workflow would have, not only the key's error.
func TestConcurrencyKeyOfAMissingInputNamesTheInput(t *testing.T) {
	t.Parallel()
	s := keyedSkill("needs-key", 1)
	s.Workflow.Inputs = []skill.Input{{Name: "key", Type: "string", Required: true}}
	f := setup(t, s)
	f.tools = mustSet(t, f.tools, newOverlap().tool())
	f.start()
	id := f.jobWithInputs("needs-key", "nokey", json.RawMessage(`{}`))
	failed := f.waitEvent(id, events.TypeExecutionFailed)
	if e, _ := failed["error"].(string); !strings.HasPrefix(e, "input key is required (concurrency.key data.key: no such key: key") {
		t.Fatalf("failed = %v", failed)
	}
}
