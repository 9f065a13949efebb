package schedule

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

type stillClock struct{ now time.Time }

func (c *stillClock) Now() time.Time                       { return c.now }
func (c *stillClock) After(time.Duration) <-chan time.Time { return nil }

type fixedCatalog []*skill.Skill

func (c fixedCatalog) All() []*skill.Skill { return c }
func (fixedCatalog) Revision() uint64      { return 1 }
func (fixedCatalog) Changed(ctx context.Context, _ uint64) error {
	<-ctx.Done()
	return ctx.Err()
}

// A tick that cannot be published is retried after a pause, not at once: a
// leader whose writes JetStream refuses must not spin.
func TestStepWaitsAfterFailedPublish(t *testing.T) {
	ctx := t.Context()
	b := natstest.Start(t).Bus(t, bus.Config{})
	clock := &stillClock{now: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}
	cat := fixedCatalog{{Name: "nightly", Description: "d", Kind: skill.KindInstruction, Body: "b", Schedule: &skill.Schedule{Cron: "* * * * *"}}}
	const lease = 3 * time.Second
	s, err := New(Config{Bus: b, Catalog: cat, Clock: clock, Lease: lease, Name: "a", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if s.kv, err = b.KV(ctx, b.BucketSchedules()); err != nil {
		t.Fatal(err)
	}
	s.step(ctx)
	if !s.Leader() {
		t.Fatal("a lone scheduler does not lead")
	}
	if err := b.JS.DeleteStream(ctx, b.StreamTriggers()); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(45 * time.Second) // the 00:01:00 tick is due
	for i := range 3 {
		if wait := s.step(ctx); wait < lease/3/2 {
			t.Fatalf("step %d after a failed publish waits %v; want about %v", i, wait, lease/3)
		}
		if st := s.ticks["nightly"]; st == nil || !st.tick.Before(clock.now.Add(-30*time.Second)) {
			t.Fatalf("the failed tick was recorded as fired: %+v", st)
		}
	}
}
