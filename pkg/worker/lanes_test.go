package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// starts records the order in which runs start; the run of hold waits for
// release (or its context) before it ends.
type starts struct {
	mu      sync.Mutex
	order   []string
	hold    string
	held    chan struct{}
	release chan struct{}
}

func newStarts(hold string) *starts {
	return &starts{hold: hold, held: make(chan struct{}, 4), release: make(chan struct{})}
}

func (s *starts) tool() tool.Tool {
	return tool.Func("order", func(ctx context.Context, c tool.Call) (any, error) {
		who := c.Args["who"].(string)
		s.mu.Lock()
		s.order = append(s.order, who)
		hold := who == s.hold
		s.mu.Unlock()
		if hold {
			s.held <- struct{}{}
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return who, nil
	})
}

func (s *starts) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// ticket is a skill of pool with a queue priority, whose runs call "order".
func ticket(name, pool, prio string) *skill.Skill {
	s := oneStep(name, "order", 0)
	s.Pool, s.QueuePriority = pool, prio
	return s
}

// startOne starts a worker that runs one job at a time, its runs recorded by st.
func (f *fixture) startOne(st *starts, pools ...string) *worker.Worker {
	f.t.Helper()
	return f.startOneWith(st, nil, pools...)
}

// startOneWith is startOne with edit (when not nil) called on the worker
// before it starts.
func (f *fixture) startOneWith(st *starts, edit func(*worker.Worker), pools ...string) *worker.Worker {
	f.t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := tool.NewSet(st.tool())
	if err != nil {
		f.t.Fatal(err)
	}
	eng, err := workflow.New(workflow.Config{Tools: set, Log: log})
	if err != nil {
		f.t.Fatal(err)
	}
	// The ack wait is long beside these tests: deliveries the client has
	// fetched but no lane handler holds yet are not kept in progress, and one
	// redelivered after a short ack wait on a loaded machine comes back behind
	// the jobs after it (low17 before low16).
	w, err := worker.New(worker.Config{Bus: f.b, Catalog: f.cat, Engine: eng, Log: log, AckWait: 15 * time.Second,
		Concurrency: 1, Pools: pools, Name: "one", Events: f.level})
	if err != nil {
		f.t.Fatal(err)
	}
	if edit != nil {
		edit(w)
	}
	if err := w.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// jobPrio publishes the job of a run of skill in pool, as the router does for
// a run of the given queue priority: on its lane, with the priority in a header.
func (f *fixture) jobPrio(pool, name, id string, prio int) {
	f.t.Helper()
	ref := events.SkillRef{Name: name, Pool: pool, ExecutionID: events.ExecutionID("/t", id, name), Version: "1.0.0", QueuePriority: prio}
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref,
		Inputs: json.RawMessage(fmt.Sprintf(`{"who":%q}`, id)), Trigger: events.TriggerRef{ID: id, Source: "/t", Subject: "x"}}
	m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob, Data: j}.
		JobMsg(f.b.Subjects.Exec(events.LanePool(pool, events.Lane(prio)), name, j.ActivationID, events.StagePlan))
	if err != nil {
		f.t.Fatal(err)
	}
	if prio != 0 {
		m.Header.Set(events.HeaderQueuePriority, strconv.Itoa(prio))
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// inHand waits until the worker holds n jobs of a pool's lane (delivered, not acked).
func (f *fixture) inHand(pool string, lane, n int) {
	f.t.Helper()
	name := "worker-" + events.LanePool(pool, lane)
	var info *jetstream.ConsumerInfo
	natstest.Eventually(f.t, 20*time.Second, func() bool {
		c, err := f.b.Consumer(f.ctx, f.b.StreamJobs(), name)
		if err != nil {
			return false
		}
		info, err = c.Info(f.ctx)
		return err == nil && int(info.NumAckPending) >= n
	}, "%s does not hold %d jobs: %+v", name, n, info)
}

// lows are the ids of the 20 low-priority runs queued in these tests.
func lows() []string {
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("low%02d", i)
	}
	return ids
}

// A worker that runs one job at a time has 20 runs queued behind the one it
// runs; a run of priority 300 queued after them starts next, then a second of
// the same priority, then the 20 in the order they were queued.
func TestHighPriorityRunOvertakesQueuedRuns(t *testing.T) {
	t.Parallel()
	f := setup(t, ticket("tickets", "", "300"))
	st := newStarts("first")
	w := f.startOne(st)
	f.jobPrio("default", "tickets", "first", 0)
	<-st.held
	for _, id := range lows() {
		f.jobPrio("default", "tickets", id, -30)
	}
	f.jobPrio("default", "tickets", "high", 300)
	f.jobPrio("default", "tickets", "high2", 300)
	// Both high ones are queued with the worker before its slot frees.
	natstest.Eventually(t, 20*time.Second, func() bool { return worker.LaneWaiting(w, "default", 300) == 2 }, "high runs not held")
	close(st.release)
	want := append([]string{"first", "high", "high2"}, lows()...)
	natstest.Eventually(t, 30*time.Second, func() bool { return len(st.seen()) >= len(want) }, "runs started: %v", st.seen())
	if got := st.seen(); !slices.Equal(got, want) {
		t.Errorf("runs started in the order\n%v\nwant\n%v", got, want)
	}
}

// A high-priority run queued behind 20 others is still the first to start
// when the worker that held them stops and another starts. (The others are
// handed back to the server in their order, but the stopping worker's pulls
// may take some of them again and hand them back later: past the window a
// worker holds, runs of one priority keep their order only as the server
// delivers them.)
func TestQueuedHighPriorityRunIsFirstAfterARestart(t *testing.T) {
	t.Parallel()
	f := setup(t, ticket("tickets", "", `data.who == "high" ? 600 : 0`))
	before := newStarts("first")
	w := f.startOne(before)
	f.jobPrio("default", "tickets", "first", 0)
	<-before.held
	for _, id := range lows() {
		f.jobPrio("default", "tickets", id, 0)
	}
	f.jobPrio("default", "tickets", "high", 600)
	f.inHand("default", 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	w.Stop(ctx) // the held run is cancelled and handed back with the rest
	cancel()
	if got := before.seen(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("before the restart, runs started: %v", got)
	}

	after := newStarts("")
	// Its lanes wait for each other's first delivery however long a loaded
	// machine takes, not the 2 s a worker gives them.
	f.startOneWith(after, func(w *worker.Worker) { worker.SetLaneWarmup(w, 20*time.Second) })
	natstest.Eventually(t, 30*time.Second, func() bool { return len(after.seen()) >= 21 }, "runs started: %v", after.seen())
	if got := after.seen(); got[0] != "high" {
		t.Fatalf("after the restart the first run was %s, not high: %v", got[0], got)
	}
}

// A pool without queue_priority skills has one consumer, as ever; a pool with
// one has its lanes' besides.
func TestOnlyPoolsWithQueuePriorityHaveLanes(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("plain", "order", 0), ticket("tickets", "vip", "60"))
	f.startOne(newStarts(""), "default", "vip")
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range s.ListConsumers(f.ctx).Info() {
		got = append(got, name.Name)
	}
	slices.Sort(got)
	want := []string{"worker-default", "worker-vip", "worker-vip~p-1", "worker-vip~p-2", "worker-vip~p1", "worker-vip~p2"}
	if !slices.Equal(got, want) {
		t.Errorf("consumers of JOBS: %v, want %v", got, want)
	}
}

// A pool whose catalog gains a skill with queue_priority gets its lanes, and
// a run published on one of them runs.
func TestLanesStartWhenASkillGainsQueuePriority(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("tickets", "order", 0))
	st := newStarts("")
	f.startOne(st)
	f.jobPrio("default", "tickets", "before", 0)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(st.seen()) == 1 }, "runs started: %v", st.seen())
	b, _ := json.Marshal(ticket("tickets", "", "120"))
	if _, err := f.kv.Put(f.ctx, "tickets", b); err != nil {
		t.Fatal(err)
	}
	f.jobPrio("default", "tickets", "after", 120)
	f.jobPrio("default", "tickets", "plain", 0)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(st.seen()) == 3 }, "runs started: %v", st.seen())
}

// A job that lands on a lane of a pool none of whose skills has queue_priority
// (a run planned while its skill had one, published again after it lost it)
// runs: a worker serving the pool without lanes finds it and serves them.
func TestJobOnTheLaneOfAPoolWithoutQueuePriorityRuns(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("tickets", "order", 0))
	st := newStarts("")
	w := f.startOneWith(st, func(w *worker.Worker) { worker.SetLaneCheck(w, 100*time.Millisecond) })
	if worker.ServesLanes(w, "default") {
		t.Fatal("a pool without queue_priority skills has lanes at the start")
	}
	// The lane's consumer, as a worker made it while the skill had queue_priority.
	if _, err := f.b.EnsureConsumer(f.ctx, f.b.StreamJobs(), w.ConsumerConfig(events.LanePool("default", events.Lane(300)))); err != nil {
		t.Fatal(err)
	}
	f.jobPrio("default", "tickets", "returned", 300)
	natstest.Eventually(t, 20*time.Second, func() bool { return slices.Contains(st.seen(), "returned") },
		"the job on the lane did not run: runs started %v", st.seen())
	if !worker.ServesLanes(w, "default") {
		t.Error("the worker ran the lane's job without serving the pool's lanes")
	}
	f.jobPrio("default", "tickets", "plain", 0)
	natstest.Eventually(t, 20*time.Second, func() bool { return slices.Contains(st.seen(), "plain") },
		"a plain job after the lanes started did not run: runs started %v", st.seen())
}

// The whole way: the router evaluates a skill's queue_priority on each trigger
// and the one worker of the pool, running one job at a time, starts the
// enterprise customer's run before the 20 queued before it.
func TestRoutedHighPriorityRunOvertakesQueuedRuns(t *testing.T) {
	t.Parallel()
	sk := ticket("tickets", "", `data.who == "high" ? 300 : 0`)
	sk.Triggers = []string{"com.example.ticket"}
	f := setup(t, sk)
	f.startRouter()
	st := newStarts("first")
	w := f.startOne(st)
	trigger := func(who string) {
		t.Helper()
		m, err := bus.Event{ID: who, Source: "/support", Type: "com.example.ticket", Data: map[string]any{"who": who}}.
			Msg(f.b.Subjects.Trigger("com.example.ticket"))
		if err != nil {
			t.Fatal(err)
		}
		bt := f.b.Batch()
		bt.Publish(m)
		if err := bt.Wait(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	trigger("first")
	<-st.held
	for _, id := range lows() {
		trigger(id)
		f.triggersRouted() // one at a time: a router routes triggers concurrently
	}
	trigger("high")
	natstest.Eventually(t, 20*time.Second, func() bool { return worker.LaneWaiting(w, "default", 300) == 1 }, "the high run is not held")
	close(st.release)
	want := append([]string{"first", "high"}, lows()...)
	natstest.Eventually(t, 30*time.Second, func() bool { return len(st.seen()) >= len(want) }, "runs started: %v", st.seen())
	if got := st.seen(); !slices.Equal(got, want) {
		t.Errorf("runs started in the order\n%v\nwant\n%v", got, want)
	}
}
