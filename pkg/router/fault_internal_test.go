package router

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// faultRouter is a started router over skills that fails once at point, as if
// it died there: the trigger in hand is not acked, and comes back after retry.
func faultRouter(t *testing.T, point string, retry time.Duration, skills ...*skill.Skill) (*bus.Bus, context.Context, *atomic.Int32) {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r, err := New(Config{Bus: b, Catalog: staticCatalog(skills), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxEventBytes: 64 << 10, RetryBase: retry, RetryMax: retry})
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	r.faults = func(p string) error {
		if p == point && failed.CompareAndSwap(0, 1) {
			return fmt.Errorf("injected: the router died at %s", p)
		}
		return nil
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return b, ctx, &failed
}

func publishTrigger(t *testing.T, ctx context.Context, b *bus.Bus, id, typ, data string) {
	t.Helper()
	m := nats.NewMsg(b.Subjects.Trigger(typ))
	for k, v := range ceHeaders(id, typ) {
		m.Header.Set(k, v)
	}
	m.Data = []byte(data)
	if _, err := b.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// count is how many messages stream holds on subject.
func count(t *testing.T, ctx context.Context, b *bus.Bus, stream, subject string) uint64 {
	t.Helper()
	s, err := b.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// A router that dies between arming a burst's timer and making its trigger
// the burst's latest: the timer may come due with no trigger to run; the
// trigger, delivered again, opens the burst again, and the run happens once,
// with its data.
func TestDebounceRouterDiesBetweenItsWrites(t *testing.T) {
	t.Parallel()
	db := &skill.Skill{Name: "digest", Description: "digests changes", Kind: skill.KindWorkflow, Digest: "d1gest0123456789",
		Triggers: []string{"com.example.change"},
		Debounce: &skill.Debounce{Key: "data.doc", Period: skill.Duration(time.Second), Timeout: skill.Duration(10 * time.Second)}}
	// Delivered again after the timer it armed came due: the worst case.
	b, ctx, failed := faultRouter(t, "debounce.armed", 2500*time.Millisecond, db)
	publishTrigger(t, ctx, b, "d1", "com.example.change", `{"doc": "readme", "n": 1}`)
	jobs := b.Subjects.Prefix + ".exec.default.digest.>"
	natstest.Eventually(t, 20*time.Second, func() bool { return count(t, ctx, b, b.StreamJobs(), jobs) == 1 }, "no run")
	if failed.Load() != 1 {
		t.Fatal("the fault was not injected")
	}
	// Nothing more comes: no timer left, no trigger unacked, still one run.
	natstest.Eventually(t, 20*time.Second, func() bool {
		return count(t, ctx, b, b.StreamEvents(), b.Subjects.DebounceTimer("*")) == 0 && consumerIdle(t, ctx, b)
	}, "the burst is not over")
	if n := count(t, ctx, b, b.StreamJobs(), jobs); n != 1 {
		t.Fatalf("%d runs; want 1", n)
	}
}

// A router that dies after adding the trigger that fills a batch, before
// starting its run: the trigger, delivered again, finds itself added (not
// added twice) and starts the run, once, with every event — long before the
// batch's timeout.
func TestBatchRouterDiesBeforeTheRun(t *testing.T) {
	t.Parallel()
	bt := &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"}, Batch: &skill.Batch{MaxSize: 3, Timeout: skill.Duration(time.Hour)}}
	b, ctx, failed := faultRouter(t, "batch.full", 50*time.Millisecond, bt)
	for i := 1; i <= 3; i++ {
		publishTrigger(t, ctx, b, fmt.Sprintf("o%d", i), "com.example.order", fmt.Sprintf(`{"n": %d}`, i))
	}
	jobs := b.Subjects.Prefix + ".exec.default.ingest.>"
	natstest.Eventually(t, 20*time.Second, func() bool { return count(t, ctx, b, b.StreamJobs(), jobs) == 1 }, "no run")
	natstest.Eventually(t, 20*time.Second, func() bool { return consumerIdle(t, ctx, b) }, "triggers still pending")
	if failed.Load() != 1 {
		t.Fatal("the fault was not injected")
	}
	if n := count(t, ctx, b, b.StreamEvents(), b.Subjects.BatchItems("*")); n != 3 {
		t.Fatalf("%d triggers in the batch's log; want 3, none added twice", n)
	}
	if n := count(t, ctx, b, b.StreamTriggers(), b.Subjects.TriggerDebounced("ingest")); n != 1 {
		t.Fatalf("%d runs published; want 1", n)
	}
}

func consumerIdle(t *testing.T, ctx context.Context, b *bus.Bus) bool {
	t.Helper()
	c, err := b.JS.Consumer(ctx, b.StreamTriggers(), "router")
	if err != nil {
		return false
	}
	ci, err := c.Info(ctx)
	return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
}
