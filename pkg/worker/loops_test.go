package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

// A worker serving a pool with queue priority lanes still releases the
// throttled runs it set aside: the consumer of their due messages keeps
// running beside the lanes.
func TestLanedPoolReleasesThrottledRunsSetAside(t *testing.T) {
	t.Parallel()
	sk := oneStep("slow-paced", "stamp", 0)
	sk.Digest = "d5" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(4 * time.Second)}
	f := setup(t, sk, ticket("tickets", "", "5"))
	var started atomic.Int64
	f.tools = mustSet(t, f.tools, tool.Func("stamp", func(context.Context, tool.Call) (any, error) {
		started.Add(1)
		return "ok", nil
	}))
	w := f.startWorkerOn(f.b, "one", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if !worker.ServesLanes(w, "default") {
		t.Fatal("the pool with a queue_priority skill is not served on its lanes")
	}
	const n = 3
	for i := range n {
		f.job("s"+strconv.Itoa(i), "slow-paced")
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return started.Load() == n },
		"the throttled runs did not all start: %d of %d", started.Load(), n)
	f.drained()
	f.noneWaiting()
}

// A worker serving two pools, the second with queue priority lanes, still
// runs the jobs of the first.
func TestLanesOfOnePoolLeaveTheOtherServed(t *testing.T) {
	t.Parallel()
	vip := oneStep("tickets", "greet", 0)
	vip.Pool, vip.QueuePriority = "vip", "60"
	f := setup(t, oneStep("plain", "greet", 0), vip)
	w := f.startWorkerOn(f.b, "two", slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(c *worker.Config) { c.Pools = []string{"default", "vip"} })
	if worker.ServesLanes(w, "default") || !worker.ServesLanes(w, "vip") {
		t.Fatal("want lanes on vip only")
	}
	plain := f.job("p", "plain")
	ticket := f.jobIn("vip", "v", "", "tickets")
	for _, id := range []string{plain, ticket} {
		natstest.Eventually(t, 20*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) > 0 },
			"%s did not complete", id)
	}
}

// A pool whose skill gains queue_priority while the worker runs is served by
// its lanes alone: its plain loop stops, and the pool never runs more than
// Concurrency jobs at once.
func TestPoolGainingLanesKeepsItsConcurrency(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("tickets", "busy", 0))
	var mu sync.Mutex
	running, most := 0, 0
	f.tools = mustSet(t, f.tools, tool.Func("busy", func(ctx context.Context, _ tool.Call) (any, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		// Long enough for a second loop on the pool to start another run.
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return "ok", nil
	}))
	w := f.startWorkerOn(f.b, "one", slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(c *worker.Config) { c.Concurrency = 1 })
	prio := oneStep("tickets", "busy", 0)
	prio.QueuePriority = "5"
	b, _ := json.Marshal(prio)
	if _, err := f.kv.Put(f.ctx, "tickets", b); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return worker.ServesLanes(w, "default") }, "the lanes did not start")
	const n = 6
	ids := make([]string, n)
	for i := range n {
		ids[i] = f.job("j"+strconv.Itoa(i), "tickets")
	}
	for _, id := range ids {
		natstest.Eventually(t, 30*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) > 0 },
			"%s did not complete", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Fatalf("%d runs of the pool at once, want at most its Concurrency 1", most)
	}
}
