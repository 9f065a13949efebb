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
// measured within 10%: 10 per second, 31 runs queued at once, so 30 intervals of
// 100ms. The runs beyond the rate wait without holding a worker: with one slot per
// worker, another skill's run queued behind them completes long before they do.
func TestThrottleStartsRunsAtItsRate(t *testing.T) {
	t.Parallel()
	sk := oneStep("paced", "stamp", 0)
	sk.Digest = "d1" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Key: "data.who", Limit: 10, Period: skill.Duration(time.Second)}
	f := setup(t, sk, oneStep("other", "greet", 0))
	var mu sync.Mutex
	var starts []time.Time
	f.tools = mustSet(t, f.tools, tool.Func("stamp", func(context.Context, tool.Call) (any, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return "ok", nil
	}))
	oneSlot := func(c *worker.Config) { c.Concurrency = 1 }
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
	if before > n/2 {
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
	// The rate is the slope of the runs started against time (least squares), so
	// one start a few hundred milliseconds late on a loaded machine moves it
	// little, where first-to-last would blame the whole span on it.
	rate := startRate(starts)
	if rate < 9 || rate > 11 {
		t.Fatalf("%d runs started over %v: %.2f a second, want 10 ±10%%", n, starts[n-1].Sub(starts[0]), rate)
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
