package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// A worker that sees another worker release a waiting run of a gate (its record
// deleted) counts the gate as busy, as after a release of its own: otherwise its
// check, a moment later, finds the slot the released run has not taken yet still
// free in KV and releases a second run for the same free, which then loses its
// place in line.
func TestSeenReleaseKeepsGateBusy(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	bs := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	w := &Worker{cfg: Config{Bus: bs, AckWait: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}}
	var err error
	if w.runs, err = bs.KV(ctx, bs.BucketRuns()); err != nil {
		t.Fatal(err)
	}
	if err := w.watchGates(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stopGates)
	gate := events.ConcGate("s", 0, events.KeyHash("k"))
	put := func(id string) uint64 {
		rec, err := json.Marshal(run.Held{ExecutionID: id, Skill: "s", Gate: gate, Limit: 1, At: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := w.runs.Put(ctx, events.RunHeldKey(id), rec)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	put("a")
	rev := put("b")
	g := &w.gates
	if !g.caughtUp(ctx, rev, 10*time.Second) {
		t.Fatal("the view did not read the waiting records")
	}
	long := time.Now().Add(-2 * w.cfg.AckWait)
	g.mu.Lock()
	g.seen[gate] = long
	g.mu.Unlock()
	// Another worker releases "a": its record is deleted.
	if err := w.runs.Delete(ctx, events.RunHeldKey("a")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		_, waits := g.where["a"]
		return !waits
	}, "the view did not see the release")
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.seen[gate]; !ok || !at.After(long) {
		t.Fatalf("gate last seen busy at %v after another worker's release, want now: its check would release a second run", at)
	}
}
