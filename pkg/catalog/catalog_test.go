package catalog_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/skill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCatalogFollowsTheBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, _ := b.KV(ctx, b.BucketSkills())
	put := func(s *skill.Skill) {
		v, _ := json.Marshal(s)
		if _, err := kv.Put(ctx, s.Name, v); err != nil {
			t.Fatal(err)
		}
	}
	put(&skill.Skill{Name: "start_work", Description: "d", Triggers: []string{"jira.issue.assigned"}})
	cat, err := catalog.Watch(ctx, kv, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Stop()

	// Loaded before Watch returns; found by either separator.
	if _, ok := cat.Get("start-work"); !ok {
		t.Fatal("start_work not found as start-work")
	}
	if got := cat.ByTrigger("jira.issue.assigned"); len(got) != 1 {
		t.Fatalf("ByTrigger = %v", got)
	}
	// An entry that does not decode is skipped; the others stay.
	if _, err := kv.Put(ctx, "garbage", []byte("{")); err != nil {
		t.Fatal(err)
	}
	put(&skill.Skill{Name: "later", Description: "d", Triggers: []string{"jira.issue.assigned"}})
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { return len(c.ByTrigger("jira.issue.assigned")) == 2 }); err != nil {
		t.Fatal(err)
	}
	if len(cat.All()) != 2 {
		t.Fatalf("All = %v", cat.All())
	}
	// Deletions are followed.
	if err := kv.Delete(ctx, "start_work"); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { _, ok := c.Get("start_work"); return !ok }); err != nil {
		t.Fatal(err)
	}
	if got := cat.ByTrigger("jira.issue.assigned"); len(got) != 1 || got[0].Name != "later" {
		t.Fatalf("ByTrigger after delete = %v", got)
	}
	// Lookup reads the bucket for what the watch has not delivered yet... or does not exist.
	if _, err := cat.Lookup(ctx, "nosuch"); err == nil {
		t.Fatal("Lookup of a missing skill succeeded")
	}
	if s, err := cat.Lookup(ctx, "later"); err != nil || s.Name != "later" {
		t.Fatalf("Lookup = %v, %v", s, err)
	}
}
