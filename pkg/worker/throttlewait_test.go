package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

// Runs of a throttled key that wait longer than the ack wait do not hold places
// among the pool's unacknowledged jobs: with the pool's consumer allowing only 3
// (10,000 in production, where a flood of one key would stop the pool for hours),
// five waiting runs do not delay another skill's run of the same pool, which
// completes before the second throttled run starts. The waiting runs are set
// aside and released at their start times, never before them.
func TestLongThrottleWaitsHoldNoConsumerPlaces(t *testing.T) {
	t.Parallel()
	sk := oneStep("slow-paced", "stamp", 0)
	sk.Digest = "d2" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(3 * time.Second)}
	f := setup(t, sk, oneStep("other", "greet", 0))
	var mu sync.Mutex
	starts := map[string]time.Time{}
	f.tools = mustSet(t, f.tools, tool.Func("stamp", func(_ context.Context, c tool.Call) (any, error) {
		mu.Lock()
		starts[c.ExecutionID] = time.Now()
		mu.Unlock()
		return "ok", nil
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.startWorkerOn(f.b, "one", log, func(c *worker.Config) { c.Concurrency = 1 })
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	cfg.MaxAckPending = 3
	if _, err := f.b.JS.UpdateConsumer(f.ctx, f.b.StreamJobs(), cfg); err != nil {
		t.Fatal(err)
	}
	const n = 6
	ids := make([]string, n)
	for i := range n {
		ids[i] = f.job("s"+strconv.Itoa(i), "slow-paced")
	}
	other := f.job("o", "other")
	f.waitEvent(other, events.TypeExecutionCompleted)
	mu.Lock()
	before := len(starts)
	mu.Unlock()
	if before > 1 {
		t.Fatalf("the other skill's run completed only after %d throttled runs started: the waiting runs held the pool's places", before)
	}
	aside := 0
	for _, id := range ids {
		var h run.Held
		if e, err := f.runs.Get(f.ctx, events.RunHeldKey(id)); err == nil && json.Unmarshal(e.Value(), &h) == nil && !h.Until.IsZero() {
			aside++
		}
	}
	if aside < n-2 {
		t.Fatalf("%d throttled runs set aside, want at least %d", aside, n-2)
	}
	natstest.Eventually(t, 40*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == n
	}, "the throttled runs did not all start")
	f.drained()
	f.noneWaiting()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids[1:] {
		e, err := f.runs.Get(f.ctx, events.RunThrottleKey(id))
		if err != nil {
			t.Fatalf("%s: no reserved start: %v", id, err)
		}
		ns, err := strconv.ParseInt(strings.SplitN(string(e.Value()), "/", 2)[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if at := time.Unix(0, ns); starts[id].Before(at) {
			t.Fatalf("%s started %v before its reserved start", id, at.Sub(starts[id]))
		}
	}
	for _, id := range ids {
		if k := f.outcomes(id); k != 1 {
			t.Fatalf("%s has %d outcomes", id, k)
		}
	}
}

// A throttled run set aside until its start time is cancelled like a queued
// run: it ends cancelled once, never runs, and leaves no record behind.
func TestCancelAThrottledRunSetAside(t *testing.T) {
	t.Parallel()
	sk := oneStep("once-a-minute", "greet", 0)
	sk.Digest = "d3" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(time.Minute)}
	f := setup(t, sk)
	f.start()
	first := f.job("m0", "once-a-minute")
	f.waitEvent(first, events.TypeExecutionCompleted)
	second := f.job("m1", "once-a-minute")
	natstest.Eventually(t, 10*time.Second, func() bool {
		var h run.Held
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(second))
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && !h.Until.IsZero()
	}, "the second run was not set aside until its start")
	if res := f.cancel(second); res.State != "held" {
		t.Fatalf("cancel found the run %q, want held", res.State)
	}
	f.waitCancelled(second)
	f.drained()
	f.noneWaiting()
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1: the cancelled run ran", n)
	}
	if n := f.outcomes(second); n != 1 {
		t.Fatalf("%d outcomes of the cancelled run, want 1", n)
	}
}

// A run set aside for longer than the EVENTS stream keeps a message still
// starts at its time: its due message is scheduled within the retention and
// scheduled again until the start time is near.
func TestThrottledRunSetAsideBeyondTheEventsRetentionStarts(t *testing.T) {
	t.Parallel()
	sk := oneStep("twice-a-minute", "stamp", 0)
	sk.Digest = "d6" + sk.Digest[2:]
	sk.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(20 * time.Second)}
	f := setup(t, sk)
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxAge, cfg.Duplicates = 8*time.Second, 4*time.Second
	if _, err := f.b.JS.UpdateStream(f.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	starts := map[string]time.Time{}
	f.tools = mustSet(t, f.tools, tool.Func("stamp", func(_ context.Context, c tool.Call) (any, error) {
		mu.Lock()
		starts[c.ExecutionID] = time.Now()
		mu.Unlock()
		return "ok", nil
	}))
	f.startWorkerOn(f.b, "one", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	first := f.job("r0", "twice-a-minute")
	natstest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == 1
	}, "the first run did not start")
	second := f.job("r1", "twice-a-minute")
	natstest.Eventually(t, 10*time.Second, func() bool {
		var h run.Held
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(second))
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && !h.Until.IsZero()
	}, "the second run was not set aside until its start")
	natstest.Eventually(t, 45*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == 2
	}, "the run set aside did not start")
	mu.Lock()
	defer mu.Unlock()
	if gap := starts[second].Sub(starts[first]); gap < 19*time.Second {
		t.Fatalf("the second run started %v after the first, want about 20s", gap)
	}
	f.noneWaiting()
}
