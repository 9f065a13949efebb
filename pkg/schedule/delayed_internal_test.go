package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// failingDelete deletes delayed triggers as the bus does, refusing while fail
// is set.
type failingDelete struct {
	b    *bus.Bus
	fail atomic.Bool
}

func (f *failingDelete) Delete(ctx context.Context, key string, rev uint64) error {
	if f.fail.Load() {
		return errors.New("refused")
	}
	return f.b.DeleteDelayed(ctx, key, rev)
}

// A delayed trigger published whose key cannot be deleted stays in memory and
// its deletion is retried, without publishing it again.
func TestDelayedDeleteRetried(t *testing.T) {
	ctx := t.Context()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	// A synchronous subscription: once a flush returns, every message the
	// server sent before it is in the subscription's queue (an asynchronous
	// handler might not have run yet).
	watcher := srv.Conn(t)
	sub, err := watcher.SubscribeSync(b.Subjects.Triggers())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	clock := &stillClock{now: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}
	const lease = 3 * time.Second
	s, err := New(Config{Bus: b, Catalog: fixedCatalog{}, Clock: clock, Lease: lease, Name: "a", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if s.kv, err = b.KV(ctx, b.BucketSchedules()); err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(ctx, b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	s.later = kv
	flaky := &failingDelete{b: b}
	s.deleteLater = flaky.Delete
	s.step(ctx)
	if !s.Leader() {
		t.Fatal("a lone scheduler does not lead")
	}
	d := Delayed{At: clock.now.Add(-time.Second), Skill: "greet", Source: "test", ID: "one"}
	v, _ := json.Marshal(d)
	rev, err := kv.Put(ctx, atPfx+"one", v)
	if err != nil {
		t.Fatal(err)
	}
	s.delayed[atPfx+"one"] = pending{at: d.At, rev: rev} // as the watch has it

	flaky.fail.Store(true)
	if wait := s.step(ctx); wait <= 0 || wait > lease/3 {
		t.Errorf("after a failed delete the step waits %v; want a retry within %v", wait, lease/3)
	}
	if _, ok := s.delayed[atPfx+"one"]; !ok {
		t.Fatal("a delayed trigger whose key was not deleted is dropped from memory")
	}
	flaky.fail.Store(false)
	clock.now = clock.now.Add(lease / 3)
	s.step(ctx)
	if _, err := kv.Get(ctx, atPfx+"one"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the key after the retry: %v, want deleted", err)
	}
	if _, ok := s.delayed[atPfx+"one"]; ok {
		t.Error("still in memory once deleted")
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := sub.Pending(); err != nil || n != 1 {
		t.Errorf("published %d times (%v), want 1", n, err)
	}
}
