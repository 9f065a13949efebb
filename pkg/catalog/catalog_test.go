package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
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

// published starts a registry over dir and returns a catalog following it.
func published(t *testing.T, dir string) (context.Context, *bus.Bus, *registry.Registry, *catalog.Catalog) {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	reg, err := registry.New(registry.Config{Bus: b, Roots: []string{dir}, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	kv, _ := b.KV(ctx, b.BucketSkills())
	cat, err := catalog.Watch(ctx, kv, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Stop)
	return ctx, b, reg, cat
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func md(name, desc, body string) []byte {
	return []byte("---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body)
}

const body = "\n# Steps\n\nInstructions long enough to pass the length check of the validator.\n"

func TestLookupVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "start_work", "SKILL.md"), md("start_work", "first", body))
	ctx, _, reg, cat := published(t, dir)
	first, ok := cat.Get("start-work")
	if !ok || first.Body != "" {
		t.Fatalf("catalog entry %+v (the body stays in the object store)", first)
	}
	writeFile(t, filepath.Join(dir, "start_work", "SKILL.md"), md("start_work", "second", body))
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { s, _ := c.Get("start_work"); return s.Description == "second" }); err != nil {
		t.Fatal(err)
	}
	// A run pinned to the first version still gets it, by either separator.
	for _, name := range []string{"start_work", "start-work"} {
		s, err := cat.LookupVersion(ctx, name, first.Digest)
		if err != nil || s.Description != "first" || s.Digest != first.Digest {
			t.Fatalf("LookupVersion(%s, first) = %+v, %v", name, s, err)
		}
	}
	if s, err := cat.LookupVersion(ctx, "start_work", ""); err != nil || s.Description != "second" {
		t.Fatalf("LookupVersion(current) = %+v, %v", s, err)
	}
	cur, _ := cat.Get("start_work")
	if s, err := cat.LookupVersion(ctx, "start_work", cur.Digest); err != nil || s != cur {
		t.Fatalf("LookupVersion(current digest) = %+v, %v", s, err)
	}
	// Versions not kept, skills never there.
	if _, err := cat.LookupVersion(ctx, "start_work", strings.Repeat("0", 64)); !errors.Is(err, catalog.ErrVersionNotFound) {
		t.Errorf("unknown version: %v", err)
	}
	if _, err := cat.LookupVersion(ctx, "start_work", "a.b"); !errors.Is(err, catalog.ErrVersionNotFound) {
		t.Errorf("a digest with a dot: %v", err)
	}
	if _, err := cat.Lookup(ctx, "nosuch"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("unknown skill: %v", err)
	}
	// The catalog holds current versions only, not the version keys.
	if n := len(cat.All()); n != 1 {
		t.Errorf("catalog holds %d entries", n)
	}
	// A removed skill's kept versions stay readable. (Another skill stays in the
	// root: a root that reads as empty keeps its skills.)
	writeFile(t, filepath.Join(dir, "other", "SKILL.md"), md("other", "stays", body))
	if err := os.RemoveAll(filepath.Join(dir, "start_work")); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { _, ok := c.Get("start_work"); return !ok }); err != nil {
		t.Fatal(err)
	}
	if s, err := cat.LookupVersion(ctx, "start_work", first.Digest); err != nil || s.Description != "first" {
		t.Fatalf("a removed skill's version: %+v, %v", s, err)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := make([]byte, 300<<10) // three chunks
	for i := range big {
		big[i] = byte(i % 251)
	}
	writeFile(t, filepath.Join(dir, "report", "SKILL.md"), md("report", "makes a report", body+"See [style](references/style.md).\n"))
	writeFile(t, filepath.Join(dir, "report", "references", "style.md"), []byte("# Style\n"))
	writeFile(t, filepath.Join(dir, "report", "assets", "font.bin"), big)
	writeFile(t, filepath.Join(dir, "report", "skill.yaml"), []byte("steps:\n  - id: a\n    tool: echo\n"))
	writeFile(t, filepath.Join(dir, "single.md"), md("single", "one file", body))
	ctx, b, reg, cat := published(t, dir)
	files, err := catalog.NewFiles(catalog.FilesConfig{Stores: b, Bucket: catalog.FilesBucket(b), CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cat.Get("report")
	got, err := files.Body(ctx, s)
	if err != nil || got != body+"See [style](references/style.md).\n" {
		t.Fatalf("Body = %q, %v", got, err)
	}
	for path, want := range map[string][]byte{
		"references/style.md": []byte("# Style\n"),
		"assets/font.bin":     big,
		"SKILL.md":            md("report", "makes a report", body+"See [style](references/style.md).\n"),
		"skill.yaml":          []byte("steps:\n  - id: a\n    tool: echo\n"),
	} {
		data, err := files.ReadFile(ctx, s, path)
		if err != nil || !bytes.Equal(data, want) {
			t.Errorf("ReadFile(%s) = %d bytes, %v", path, len(data), err)
		}
	}
	if n, size := files.Cached(); n != 5 || size < int64(len(big)) {
		t.Errorf("cache holds %d files, %d bytes", n, size)
	}
	single, _ := cat.Get("single")
	if data, err := files.ReadFile(ctx, single, "single.md"); err != nil || !bytes.Equal(data, md("single", "one file", body)) {
		t.Errorf("single file: %q, %v", data, err)
	}
	for _, bad := range []string{"references/nosuch.md", "../report/SKILL.md", "/etc/passwd", ".body", "", "references/../SKILL.md"} {
		if _, err := files.ReadFile(ctx, s, bad); !errors.Is(err, catalog.ErrFileNotFound) {
			t.Errorf("ReadFile(%q): %v", bad, err)
		}
	}
	// Files of a version that is no longer kept.
	gone := *s
	gone.Digest = strings.Repeat("f", 64)
	if _, err := files.ReadFile(ctx, &gone, "references/style.md"); !errors.Is(err, catalog.ErrVersionNotFound) {
		t.Errorf("collected version: %v", err)
	}
	if _, err := files.Body(ctx, &gone); !errors.Is(err, catalog.ErrVersionNotFound) {
		t.Errorf("collected version's body: %v", err)
	}
	_ = reg
}

// The trigger index stays ordered by name through edits, and lists handed out
// before an edit do not change under their holder.
func TestByTriggerOrder(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, _ := b.KV(ctx, b.BucketSkills())
	put := func(name string, triggers ...string) {
		v, _ := json.Marshal(&skill.Skill{Name: name, Description: "d", Triggers: triggers})
		if _, err := kv.Put(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := catalog.Watch(ctx, kv, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Stop()
	names := func(ss []*skill.Skill) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	put("c", "t")
	put("a", "t", "u")
	put("b", "t")
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { return len(c.ByTrigger("t")) == 3 }); err != nil {
		t.Fatal(err)
	}
	held := cat.ByTrigger("t")
	if names(held) != "a,b,c" {
		t.Fatalf("ByTrigger = %s", names(held))
	}
	put("a", "u") // a leaves t
	if err := kv.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(ctx, func(c *catalog.Catalog) bool { return names(c.ByTrigger("t")) == "b" }); err != nil {
		t.Fatalf("ByTrigger after edits = %s", names(cat.ByTrigger("t")))
	}
	if names(held) != "a,b,c" || names(cat.ByTrigger("u")) != "a" {
		t.Errorf("held %s, u %s", names(held), names(cat.ByTrigger("u")))
	}
}

// Ready is the readiness check of routers and workers: loaded once Watch returns,
// not ready once the watch has ended.
func TestReady(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Watch(ctx, kv, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Ready(ctx); err != nil {
		t.Fatalf("Ready after Watch returned: %v", err)
	}
	cat.Stop()
	if err := cat.Ready(ctx); !errors.Is(err, catalog.ErrNotWatching) {
		t.Fatalf("Ready after Stop = %v, want ErrNotWatching", err)
	}
}
