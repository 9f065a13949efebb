package router

import (
	"context"
	"encoding/json"
	"errors"
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

// batchRunIDs are the ids of the events of each batch run of skill ingest
// published (its triggers on TriggerDebounced), in the order published.
func batchRunIDs(t *testing.T, ctx context.Context, b *bus.Bus) [][]string {
	t.Helper()
	c, err := b.OrderedConsumer(ctx, b.StreamTriggers(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{b.Subjects.TriggerDebounced("ingest")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.DeleteConsumer(context.WithoutCancel(ctx), b.StreamTriggers(), c.CachedInfo().Name) }()
	var out [][]string
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var run struct {
				Events []struct {
					ID string `json:"id"`
				} `json:"events"`
			}
			if err := json.Unmarshal(m.Data(), &run); err != nil {
				t.Fatalf("a batch run's data: %v: %s", err, m.Data())
			}
			var ids []string
			for _, e := range run.Events {
				ids = append(ids, e.ID)
			}
			out = append(out, ids)
		}
		if n == 0 {
			return out
		}
	}
}

// batchOnce waits for the one run of skill ingest and for every trigger and
// timer to be handled, then checks it is still the only run, with want.
func batchOnce(t *testing.T, ctx context.Context, b *bus.Bus, want ...string) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() bool { return len(batchRunIDs(t, ctx, b)) > 0 }, "no run")
	natstest.Eventually(t, 20*time.Second, func() bool {
		return consumerIdle(t, ctx, b) && count(t, ctx, b, b.StreamEvents(), b.Subjects.BatchTimer("*")) == 0
	}, "triggers or timers still pending")
	if got := batchRunIDs(t, ctx, b); fmt.Sprint(got) != fmt.Sprint([][]string{want}) {
		t.Fatalf("runs %v; want one, %v", got, want)
	}
}

// A router that dies after adding the trigger that opens a batch, before
// arming its timer: the trigger, delivered again, finds itself added and arms
// the timer, and the batch runs once, with every event, at its timeout.
func TestBatchRouterDiesBeforeArmingTheTimer(t *testing.T) {
	t.Parallel()
	bt := &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"}, Batch: &skill.Batch{MaxSize: 10, Timeout: skill.Duration(2 * time.Second)}}
	b, ctx, failed := faultRouter(t, "batch.opened", 50*time.Millisecond, bt)
	for i := 1; i <= 3; i++ {
		publishTrigger(t, ctx, b, fmt.Sprintf("o%d", i), "com.example.order", fmt.Sprintf(`{"n": %d}`, i))
	}
	batchOnce(t, ctx, b, "o1", "o2", "o3")
	if failed.Load() != 1 {
		t.Fatal("the fault was not injected")
	}
}

// A router that dies after ending a batch at its timeout, before publishing
// its run: the timer's message, delivered again, finds the batch ended and
// publishes the run, once, with every event.
func TestBatchRouterDiesBetweenTheEndAndTheRun(t *testing.T) {
	t.Parallel()
	bt := &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"}, Batch: &skill.Batch{MaxSize: 10, Timeout: skill.Duration(time.Second)}}
	b, ctx, failed := faultRouter(t, "batch.ended", 50*time.Millisecond, bt)
	for i := 1; i <= 3; i++ {
		publishTrigger(t, ctx, b, fmt.Sprintf("o%d", i), "com.example.order", fmt.Sprintf(`{"n": %d}`, i))
	}
	batchOnce(t, ctx, b, "o1", "o2", "o3")
	if failed.Load() != 1 {
		t.Fatal("the fault was not injected")
	}
	// The batch's log: three triggers, one end marker, nothing added twice.
	if n := count(t, ctx, b, b.StreamEvents(), b.Subjects.BatchItems("*")); n != 4 {
		t.Fatalf("%d messages in the batch's log; want 4", n)
	}
}

// A router that dies for good with a half-full batch, between two writes —
// after adding the trigger that opens it, before arming its timer — and is
// stopped: the router that takes over gets the trigger when its ack wait ends,
// and the batch runs once, with every event.
func TestBatchSurvivesItsRouter(t *testing.T) {
	t.Parallel()
	bt := &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"}, Batch: &skill.Batch{MaxSize: 10, Timeout: skill.Duration(2 * time.Second)}}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cfg := Config{Bus: b, Catalog: staticCatalog([]*skill.Skill{bt}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxEventBytes: 64 << 10, AckWait: 2 * time.Second, RetryBase: 50 * time.Millisecond, RetryMax: 50 * time.Millisecond}
	dying, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// It never writes again after that point: its handler stays there until
	// the test ends.
	died, release := make(chan struct{}), make(chan struct{})
	var once atomic.Int32
	dying.faults = func(p string) error {
		if p == "batch.opened" && once.CompareAndSwap(0, 1) {
			close(died)
			<-release
			return errors.New("injected: the router is dead")
		}
		return nil
	}
	if err := dying.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var stopped chan struct{} // closed when the stop below returns
	t.Cleanup(func() {
		close(release)
		if stopped != nil {
			<-stopped
		} else {
			dying.Stop(context.Background())
		}
	})
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		publishTrigger(t, ctx, b, id, "com.example.order", `{}`)
	}
	select {
	case <-died:
	case <-ctx.Done():
		t.Fatal("the batch was not opened")
	}
	dead, stop := context.WithCancel(context.Background())
	stop()
	stopped = make(chan struct{})
	go func() { // it takes no more triggers; it returns when released
		defer close(stopped)
		dying.Stop(dead)
	}()
	next, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Stop(context.Background()) })
	batchOnce(t, ctx, b, "c1", "c2", "c3", "c4")
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
