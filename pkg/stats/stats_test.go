package stats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

func bucket(t *testing.T) (context.Context, jetstream.KeyValue) {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(ctx, b.BucketStats())
	if err != nil {
		t.Fatal(err)
	}
	return ctx, kv
}

// clock is a settable time for recorders and windows.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func TestWindowSumsEveryWorkersMinutes(t *testing.T) {
	ctx, kv := bucket(t)
	clk := &clock{t: time.Now().UTC().Truncate(Slice).Add(10 * time.Second)}
	a, b := NewRecorder(kv, nil), NewRecorder(kv, nil)
	a.now, b.now = clk.now, clk.now

	// Worker a: two minutes of results; worker b: one.
	a.Add("greet", "1.0.0", true)
	a.Add("greet", "1.0.0", false)
	b.Add("greet", "1.0.0", true)
	b.Add("greet", "2.0.0", true)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.set(clk.now().Add(Slice))
	a.Add("greet", "1.0.0", true)
	for _, r := range []*Recorder{a, b} {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.slices) != 1 {
		t.Fatalf("worker a keeps %d slices after writing them, want only the current one", len(a.slices))
	}

	w, err := watch(ctx, kv, time.Hour, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	<-w.Ready()
	if ok, total := w.Success("greet", "1.0.0"); ok != 3 || total != 4 {
		t.Fatalf("greet 1.0.0: %d of %d, want 3 of 4", ok, total)
	}
	if ok, total := w.Success("greet", "2.0.0"); ok != 1 || total != 1 {
		t.Fatalf("greet 2.0.0: %d of %d, want 1 of 1", ok, total)
	}

	// A slice written again replaces its earlier counts rather than adding to them.
	a.Add("greet", "1.0.0", false)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, func() bool {
		ok, total := w.Success("greet", "1.0.0")
		return ok == 3 && total == 5
	}, "the rewritten minute was not summed once")

	// An hour on, the first minute has left the window; the second has not.
	clk.set(clk.now().Add(time.Hour))
	if ok, total := w.Success("greet", "1.0.0"); ok != 1 || total != 2 {
		t.Fatalf("after an hour greet 1.0.0: %d of %d, want 1 of 2 (the second minute only)", ok, total)
	}
	if ok, total := w.Success("greet", "2.0.0"); total != 0 {
		t.Fatalf("after an hour greet 2.0.0: %d of %d, want nothing", ok, total)
	}
}

func TestWindowIgnoresForeignKeysAndOldSlices(t *testing.T) {
	ctx, kv := bucket(t)
	if _, err := kv.Put(ctx, "not-a-slice", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "123.x", []byte(`not json`)); err != nil {
		t.Fatal(err)
	}
	old := NewRecorder(kv, nil)
	old.now = func() time.Time { return time.Now().Add(-3 * time.Hour) }
	old.Add("greet", "1.0.0", true)
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := Watch(ctx, kv, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	<-w.Ready()
	if ok, total := w.Success("greet", "1.0.0"); total != 0 {
		t.Fatalf("a slice from 3 hours ago counted in a 1-hour window: %d of %d", ok, total)
	}
}

func TestRunWritesOnStop(t *testing.T) {
	ctx, kv := bucket(t)
	r := NewRecorder(kv, nil)
	r.Add("greet", "1.0.0", true)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(rctx, time.Hour); close(done) }()
	cancel()
	<-done
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	if n != 1 {
		t.Fatalf("%d keys after Run stopped, want the one slice written on the way out", n)
	}
}

// TestSliceNumberIsTruncate: a slice's number and start are the minute an outcome
// falls in, as Truncate would give it, before the epoch as after.
func TestSliceNumberIsTruncate(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 23, 20, 59, 59, 999999999, time.UTC),
		time.Date(2026, 11, 23, 21, 0, 0, 0, time.FixedZone("x", 3600)),
		time.Unix(0, 0), time.Unix(-1, 0), time.Unix(-60, 0), time.Unix(-61, 5),
	} {
		if got, want := sliceStart(sliceNumber(tm)), tm.UTC().Truncate(Slice); !got.Equal(want) {
			t.Errorf("%v: slice starts %v, want %v", tm, got, want)
		}
	}
}
