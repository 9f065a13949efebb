package worker_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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
// 2 per second, 16 runs queued at once. The rate is read from the start times
// the runs reserved, fleet-wide: never more than 2 within a second, and 500ms
// apart (±10%) as they queued; no run starts before its reserved time. A loaded
// machine may start a run late, which says nothing of the throttle. The runs
// beyond the rate wait without holding a worker: with one slot per worker,
// another skill's run queued behind them completes before the last of them
// start. Were they held, each worker would wait out its throttled runs' times
// one by one, and the other run would be taken only after the 15th had started;
// handed back, it waits only for the workers to go once through the queue. (At 5
// a second and 31 runs, a machine at load 12 took that long to go through it: the
// slower rate leaves it seconds more.)
func TestThrottleStartsRunsAtItsRate(t *testing.T) {
	t.Parallel()
	sk := oneStep("paced", "stamp", 0)
	sk.Digest = "d1" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Key: "data.who", Limit: 2, Period: skill.Duration(time.Second)}
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
	// Every wait here (8 s at most) is shorter than the ack wait: the runs are
	// handed back until their time (a longer wait is set aside: see
	// TestLongThrottleWaitsHoldNoConsumerPlaces).
	oneSlot := func(c *worker.Config) { c.Concurrency = 1; c.AckWait = 10 * time.Second }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.startWorkerOn(f.b, "one", log, oneSlot)
	f.startWorkerOn(f.b, "two", log, oneSlot)
	const n = 16
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
	// A run reserves its start when it is first taken; one whose start has come
	// by then (the first, and any that a loaded machine takes late) runs at once and
	// records none. The others recorded theirs, and none started before it.
	var reserved []time.Time
	for _, id := range ids {
		e, err := f.runs.Get(f.ctx, events.RunThrottleKey(id))
		if err != nil {
			continue
		}
		ns, err := strconv.ParseInt(strings.SplitN(string(e.Value()), "/", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: reserved start %q: %v", id, e.Value(), err)
		}
		at := time.Unix(0, ns)
		if startOf[id].Before(at) {
			t.Fatalf("%s started %v before its reserved start", id, at.Sub(startOf[id]))
		}
		reserved = append(reserved, at)
	}
	if len(reserved) < n/2 {
		t.Fatalf("%d of %d runs waited for a start they reserved: the throttle let them through", len(reserved), n)
	}
	slices.SortFunc(reserved, func(a, b time.Time) int { return a.Compare(b) })
	// No more than the limit's starts are reserved within a period, fleet-wide:
	// each is at least an interval (500ms) after the one before.
	const limit = 2
	for i := 0; i+limit < len(reserved); i++ {
		if d := reserved[i+limit].Sub(reserved[i]); d < time.Second-time.Millisecond {
			t.Fatalf("%d starts reserved within %v, want at most %d a second", limit+1, d, limit)
		}
	}
	// The runs that recorded no reservation were no burst let through: the first
	// start and the last are the queue's intervals apart, but for how late the
	// first run started after taking its turn (1.5 s allowed, three intervals).
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	if span, least := starts[n-1].Sub(starts[0]), time.Duration(n-1)*500*time.Millisecond-1500*time.Millisecond; span < least {
		t.Fatalf("%d runs started within %v, want at least %v at 2 a second", n, span, least)
	}
	// And the throttle holds runs back no more than its rate asks: reserved one
	// after another while the runs queued, starts are an interval apart (a run
	// taken late leaves a longer gap, which says nothing of the throttle).
	gaps := make([]time.Duration, 0, len(reserved)-1)
	for i := 1; i < len(reserved); i++ {
		gaps = append(gaps, reserved[i].Sub(reserved[i-1]))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < 450*time.Millisecond || med > 550*time.Millisecond {
		t.Fatalf("reserved starts are %v apart (median of %d), want 500ms ±10%%", med, len(gaps))
	}
	for _, id := range ids {
		if k := f.outcomes(id); k != 1 {
			t.Fatalf("%s has %d outcomes", id, k)
		}
	}
}
