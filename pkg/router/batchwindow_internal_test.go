package router

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A trigger that filled a batch, delivered again after the duplicate window
// (here 1s; a router outage or a storage fault retried with backoff does it
// with the default 2m), is found in the batch's log and not added again: the
// batch it filled runs, once, with each trigger once.
func TestBatchRedeliveryAfterDuplicateWindow(t *testing.T) {
	bt := &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"}, Batch: &skill.Batch{MaxSize: 3, Timeout: skill.Duration(5 * time.Second)}}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{DuplicateWindow: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	r, err := New(Config{Bus: b, Catalog: staticCatalog([]*skill.Skill{bt}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxEventBytes: 64 << 10, RetryBase: 2500 * time.Millisecond, RetryMax: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	r.faults = func(p string) error {
		if p == "batch.full" && failed.CompareAndSwap(0, 1) {
			return fmt.Errorf("injected: the router died at %s", p)
		}
		return nil
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	for i := 1; i <= 3; i++ {
		publishTrigger(t, ctx, b, fmt.Sprintf("o%d", i), "com.example.order", fmt.Sprintf(`{"n": %d}`, i))
	}
	jobs := b.Subjects.Prefix + ".exec.default.ingest.>"
	natstest.Eventually(t, 30*time.Second, func() bool {
		return failed.Load() == 1 && consumerIdle(t, ctx, b) && count(t, ctx, b, b.StreamEvents(), b.Subjects.BatchTimer("*")) == 0 &&
			count(t, ctx, b, b.StreamJobs(), jobs) > 0
	}, "the batch never settled")
	items := count(t, ctx, b, b.StreamEvents(), b.Subjects.BatchItems("*"))
	// The run may be published twice (its timer comes after the window too):
	// it is started once.
	if nj := count(t, ctx, b, b.StreamJobs(), jobs); items != 3 || nj != 1 {
		t.Fatalf("%d items, %d jobs; want 3 items and one run of o1..o3", items, nj)
	}
}
