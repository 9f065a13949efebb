package worker_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

// A throttled skill's runs start at the throttle's rate, fleet-wide (two workers),
// measured within 10%: 5 per second, 31 runs queued at once, so 30 intervals of
// 200ms. The rate is measured on the start times the runs reserved, fleet-wide,
// and no run starts before its reserved time nor faster than the rate: a loaded
// machine may start a run late, which says nothing of the throttle. The runs
// beyond the rate wait without holding a worker: with one slot per worker,
// another skill's run queued behind them completes before the last of them
// start. Were they held, each worker would wait out its throttled runs' times
// one by one, and the other run would be taken only after the 30th had started;
// handed back, it waits only for the workers to go once through the queue,
// which a loaded machine may slow but not by seconds.
func TestThrottleStartsRunsAtItsRate(t *testing.T) {
	t.Parallel()
	sk := oneStep("paced", "stamp", 0)
	sk.Digest = "d1" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Key: "data.who", Limit: 5, Period: skill.Duration(time.Second)}
	f := setup(t, sk, oneStep("other", "greet", 0))
	var mu sync.Mutex
	var starts []time.Time
	startOf := map[string]time.Time{}
	f.tools = mustSet(t, f.tools, tool.Func("stamp", func(_ context.Context, c tool.Call) (any, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		startOf[c.ExecutionID] = time.Now()
		mu.Unlock()
		return "ok", nil
	}))
	// Every wait here (6 s at most) is shorter than the ack wait: the runs are
	// handed back until their time (a longer wait is set aside: see
	// TestLongThrottleWaitsHoldNoConsumerPlaces).
	oneSlot := func(c *worker.Config) { c.Concurrency = 1; c.AckWait = 10 * time.Second }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.startWorkerOn(f.b, "one", log, oneSlot)
	f.startWorkerOn(f.b, "two", log, oneSlot)
	const n = 31
	ids := make([]string, n)
	for i := range n {
		ids[i] = f.job("p"+strconv.Itoa(i), "paced")
	}
	other := f.job("o", "other")
	f.waitEvent(other, events.TypeExecutionCompleted)
	mu.Lock()
	before := len(starts)
	mu.Unlock()
	if before >= n-2 {
		t.Fatalf("the other skill's run completed only after %d of the %d throttled runs: they held the workers", before, n)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == n
	}, "the throttled runs did not all start")
	f.drained()
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// Every run but the first, which started at once, waited for a start time it
	// reserved, and recorded it.
	var reserved []time.Time
	for _, id := range ids {
		e, err := f.runs.Get(f.ctx, events.RunThrottleKey(id))
		if err != nil {
			continue
		}
		ns, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil {
			t.Fatalf("%s: reserved start %q: %v", id, e.Value(), err)
		}
		at := time.Unix(0, ns)
		if startOf[id].Before(at) {
			t.Fatalf("%s started %v before its reserved start", id, at.Sub(startOf[id]))
		}
		reserved = append(reserved, at)
	}
	if len(reserved) != n-1 {
		t.Fatalf("%d runs reserved a start to wait for, want %d", len(reserved), n-1)
	}
	slices.SortFunc(reserved, func(a, b time.Time) int { return a.Compare(b) })
	// The rate is the slope of the runs' starts against time (least squares).
	if rate := startRate(reserved); rate < 4.5 || rate > 5.5 {
		t.Fatalf("%d runs reserved starts over %v: %.2f a second, want 5 ±10%%", len(reserved), reserved[len(reserved)-1].Sub(reserved[0]), rate)
	}
	// However late some started, none started faster than the rate.
	if rate := startRate(starts); rate > 5.5 {
		t.Fatalf("%d runs started over %v: %.2f a second, want at most 5 +10%%", n, starts[n-1].Sub(starts[0]), rate)
	}
	for _, id := range ids {
		if k := f.outcomes(id); k != 1 {
			t.Fatalf("%s has %d outcomes", id, k)
		}
	}
}

// startRate is the least-squares slope of the i-th start against its time, in
// starts a second.
func startRate(starts []time.Time) float64 {
	var sx, sy, sxx, sxy float64
	for i, at := range starts {
		x, y := at.Sub(starts[0]).Seconds(), float64(i)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(starts))
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}
