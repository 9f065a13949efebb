package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillMD(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n\n# " + name + "\n\nInstructions long enough to pass the length check of the validator.\n"
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is what a test of the registry needs.
type env struct {
	t   *testing.T
	ctx context.Context
	b   *bus.Bus
	dir string
	kv  jetstream.KeyValue
	obs func() jetstream.ObjectStore
}

func setup(t *testing.T) *env {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, b: b, dir: t.TempDir(), kv: kv}
	e.obs = func() jetstream.ObjectStore {
		obs, err := b.JS.ObjectStore(ctx, catalog.FilesBucket(b))
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	return e
}

func (e *env) registry(cfg registry.Config) *registry.Registry {
	e.t.Helper()
	cfg.Bus = e.b
	if cfg.Roots == nil {
		cfg.Roots = []string{e.dir}
	}
	if cfg.Log == nil {
		cfg.Log = quiet
	}
	reg, err := registry.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(reg.Stop)
	return reg
}

func (e *env) catalog() *catalog.Catalog {
	e.t.Helper()
	c, err := catalog.Watch(e.ctx, e.kv, quiet)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Stop)
	return c
}

func (e *env) entry(key string) *skill.Skill {
	e.t.Helper()
	en, err := e.kv.Get(e.ctx, key)
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	var s skill.Skill
	if err := json.Unmarshal(en.Value(), &s); err != nil {
		e.t.Fatal(err)
	}
	return &s
}

// sync syncs reg, failing the test on an error.
func (e *env) sync(reg *registry.Registry) *registry.Report {
	e.t.Helper()
	rep, err := reg.Sync(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// loggingRegistry is a registry whose log is returned.
func (e *env) loggingRegistry() (*registry.Registry, *natstest.Buffer) {
	e.t.Helper()
	var logs natstest.Buffer
	return e.registry(registry.Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}), &logs
}

// alpha writes skill alpha, valid, into the root, and beta beside it when
// others is set (so that the root is not empty of valid skills when alpha
// breaks); it returns alpha's SKILL.md.
func (e *env) alpha(others bool) string {
	e.t.Helper()
	path := filepath.Join(e.dir, "alpha", "SKILL.md")
	write(e.t, path, skillMD("alpha", "first"))
	if others {
		write(e.t, filepath.Join(e.dir, "beta", "SKILL.md"), skillMD("beta", "second"))
	}
	return path
}

// brokenMD is a SKILL.md named name whose front matter is invalid YAML.
func brokenMD(name string) string {
	return "---\nname: " + name + "\ndescription: [unclosed\n---\nbody\n"
}

// wait waits until cond holds for the catalog.
func wait(t *testing.T, c *catalog.Catalog, what string, cond func(*catalog.Catalog) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func has(name, desc string) func(*catalog.Catalog) bool {
	return func(c *catalog.Catalog) bool {
		s, ok := c.Get(name)
		return ok && s.Description == desc
	}
}

func TestSync(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	write(t, filepath.Join(e.dir, "alpha", "scripts", "run.sh"), "#!/bin/sh\necho hi\n")
	write(t, filepath.Join(e.dir, "alpha", "assets", "logo.png"), "\x89PNG\r\n\x1a\n\x00\x00binary")
	write(t, filepath.Join(e.dir, "beta", "SKILL.md"), skillMD("beta", "second"))
	write(t, filepath.Join(e.dir, "single.md"), skillMD("single", "a single file"))
	write(t, filepath.Join(e.dir, "broken", "SKILL.md"), brokenMD("broken"))
	reg := e.registry(registry.Config{})
	rep, err := reg.Sync(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"alpha", "beta", "single"}, rep.Published); d != "" {
		t.Fatalf("published (-want +got)\n%s", d)
	}
	if !slices.ContainsFunc(rep.Diagnostics.Errors(), func(d skill.Diagnostic) bool { return strings.Contains(d.File, "broken") && d.Line > 0 }) {
		t.Fatalf("the broken skill was not reported with a line: %v", rep.Diagnostics)
	}

	// The catalog entry: metadata, no body; the same under the version key.
	s := e.entry("alpha")
	if s.Description != "first" || s.Digest == "" || s.Body != "" || s.BodyLine == 0 || len(s.Resources) != 2 {
		t.Fatalf("catalog entry %+v", s)
	}
	if v := e.entry(catalog.VersionKey("alpha", s.Digest)); v.Digest != s.Digest {
		t.Fatalf("version entry %+v", v)
	}
	// The files: every one, binary too, and the body.
	obs := e.obs()
	for rel, want := range map[string]string{
		"SKILL.md":           skillMD("alpha", "first"),
		"scripts/run.sh":     "#!/bin/sh\necho hi\n",
		"assets/logo.png":    "\x89PNG\r\n\x1a\n\x00\x00binary",
		catalog.BodyFile:     "\n# alpha\n\nInstructions long enough to pass the length check of the validator.\n",
		"missing-never-made": "",
	} {
		got, err := obs.GetString(e.ctx, catalog.ObjectName("alpha", s.Digest, rel))
		if want == "" {
			if !errors.Is(err, jetstream.ErrObjectNotFound) {
				t.Errorf("%s: %v", rel, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("object %s = %q, %v; want %q", rel, got, err, want)
		}
	}
	single := e.entry("single")
	if got, err := obs.GetString(e.ctx, catalog.ObjectName("single", single.Digest, "single.md")); err != nil || got != skillMD("single", "a single file") {
		t.Errorf("single-file skill's file: %q, %v", got, err)
	}

	// Nothing changed: nothing is published again.
	if rep, err = reg.Sync(e.ctx); err != nil || len(rep.Published)+len(rep.Removed) != 0 {
		t.Fatalf("idle sync: %+v %v", rep, err)
	}
	// An edit publishes a new version and keeps the old one; a removal deletes the
	// current key only.
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "edited"))
	if err := os.RemoveAll(filepath.Join(e.dir, "beta")); err != nil {
		t.Fatal(err)
	}
	if rep, err = reg.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"alpha"}, rep.Published); d != "" {
		t.Errorf("published (-want +got)\n%s", d)
	}
	if d := cmp.Diff([]string{"beta"}, rep.Removed); d != "" {
		t.Errorf("removed (-want +got)\n%s", d)
	}
	if _, err := e.kv.Get(e.ctx, "beta"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("beta is still in the catalog: %v", err)
	}
	if s2 := e.entry("alpha"); s2.Description != "edited" || s2.Digest == s.Digest {
		t.Errorf("alpha after the edit: %+v", s2)
	}
	if old := e.entry(catalog.VersionKey("alpha", s.Digest)); old.Description != "first" {
		t.Errorf("the old version is not kept: %+v", old)
	}
	if got, err := obs.GetString(e.ctx, catalog.ObjectName("alpha", s.Digest, "SKILL.md")); err != nil || !strings.Contains(got, "first") {
		t.Errorf("the old version's files are not kept: %q, %v", got, err)
	}
}

// A registry restarted against a catalog it published earlier publishes nothing.
func TestSyncAfterRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	if _, err := e.registry(registry.Config{}).Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := e.registry(registry.Config{}).Sync(e.ctx)
	if err != nil || len(rep.Published)+len(rep.Removed) != 0 || !slices.Equal(rep.Loaded, []string{"alpha"}) {
		t.Fatalf("second registry: %+v, %v", rep, err)
	}
}

func TestGC(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	reg := e.registry(registry.Config{Now: clock, Retention: registry.Retention{Keep: 2, For: 24 * time.Hour, Max: 4}})
	p := filepath.Join(e.dir, "alpha", "SKILL.md")
	var digests []string
	for i := range 6 {
		write(t, p, skillMD("alpha", "version "+string(rune('a'+i))))
		if _, err := reg.Sync(e.ctx); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, e.entry("alpha").Digest)
	}
	write(t, filepath.Join(e.dir, "gone", "SKILL.md"), skillMD("gone", "removed soon"))
	if _, err := reg.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	gone := e.entry("gone").Digest
	os.RemoveAll(filepath.Join(e.dir, "gone"))
	if _, err := reg.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	kept := func(name, digest string) bool {
		_, err := e.kv.Get(e.ctx, catalog.VersionKey(name, digest))
		return err == nil
	}
	objects := func(name, digest string) int {
		objs, _ := e.obs().List(e.ctx)
		n := 0
		for _, o := range objs {
			if strings.HasPrefix(o.Name, catalog.ObjectName(name, digest, "")) {
				n++
			}
		}
		return n
	}

	// Young versions are kept, but no more than Max per skill.
	rep, err := reg.GC(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Versions) != 2 || kept("alpha", digests[0]) || kept("alpha", digests[1]) || !kept("alpha", digests[2]) {
		t.Fatalf("first gc: %+v", rep)
	}
	if objects("alpha", digests[0]) != 0 || objects("alpha", digests[2]) == 0 {
		t.Fatalf("files of collected versions remain, or of kept ones are gone")
	}
	// A day later, only the Keep newest of a live skill stay; a removed skill's
	// versions go a day after its removal.
	advance(25 * time.Hour)
	if _, err := reg.GC(e.ctx); err != nil {
		t.Fatal(err)
	}
	for i, d := range digests {
		if want := i >= 4; kept("alpha", d) != want {
			t.Errorf("version %d kept = %v, want %v", i, !want, want)
		}
	}
	if kept("gone", gone) || objects("gone", gone) != 0 {
		t.Error("the removed skill's version outlived the retention")
	}
	// The catalog still serves the current version with its files.
	files, _ := catalog.NewFiles(catalog.FilesConfig{Stores: e.b, Bucket: catalog.FilesBucket(e.b)})
	if body, err := files.Body(e.ctx, e.entry("alpha")); err != nil || !strings.Contains(body, "Instructions") {
		t.Fatalf("current body after gc: %q, %v", body, err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if _, err := registry.New(registry.Config{Roots: []string{"x"}}); err == nil {
		t.Error("no bus accepted")
	}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	if _, err := registry.New(registry.Config{Bus: b}); err == nil {
		t.Error("no roots accepted")
	}
	if _, err := registry.New(registry.Config{Bus: b, Roots: []string{"x"}, Retention: registry.Retention{Keep: 5, Max: 2}}); err == nil {
		t.Error("Max < Keep accepted")
	}
}

// A registry deletes only what it published from its own roots: a second registry
// started on an empty directory leaves the fleet's catalog alone, and a root that
// reads as empty on reload (an unmounted volume) wipes nothing.
func TestRegistryNeverWipesWhatIsNotItsOwn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	first := e.registry(registry.Config{})
	if _, err := first.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	other := e.registry(registry.Config{Roots: []string{t.TempDir()}})
	rep, err := other.Sync(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 {
		t.Fatalf("a registry with an empty root removed %v", rep.Removed)
	}
	e.entry("alpha")

	if err := os.RemoveAll(filepath.Join(e.dir, "alpha")); err != nil {
		t.Fatal(err)
	}
	rep, err = first.Sync(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 || !slices.Contains(rep.Invalid, "alpha") {
		t.Fatalf("emptied root: removed %v, invalid %v; want alpha kept and reported", rep.Removed, rep.Invalid)
	}
	e.entry("alpha")

	// With another skill left in the root, removing one is a real removal.
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	write(t, filepath.Join(e.dir, "beta", "SKILL.md"), skillMD("beta", "second"))
	if _, err := first.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(e.dir, "alpha")); err != nil {
		t.Fatal(err)
	}
	rep, err = first.Sync(e.ctx)
	if err != nil || !slices.Equal(rep.Removed, []string{"alpha"}) {
		t.Fatalf("removed %v (%v), want alpha", rep.Removed, err)
	}
}

// A skill made invalid is logged, and so is its return: restoring its last good
// files publishes nothing new, yet the log's last word on it must not stay the error.
func TestValidAgainIsLogged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	path := e.alpha(true)
	reg, logs := e.loggingRegistry()
	e.sync(reg)
	write(t, path, brokenMD("alpha"))
	e.sync(reg)
	if !strings.Contains(logs.String(), "skill is invalid; its last good version keeps serving") {
		t.Fatalf("breaking alpha was not logged:\n%s", logs.String())
	}
	write(t, path, skillMD("alpha", "first"))
	e.sync(reg)
	if !strings.Contains(logs.String(), `msg="registry: skill is valid again" skill=alpha`) {
		t.Fatalf("fixing alpha was not logged:\n%s", logs.String())
	}
}

// With Problems set (skillbus dev at a terminal), a skill file's problem is one
// line as a compiler prints it, its quotes as written, and not a log message.
func TestProblemsPrintLikeACompiler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "beta", "SKILL.md"), skillMD("beta", "second"))
	write(t, filepath.Join(e.dir, "s3", "SKILL.md"), "---\nname: S3 Tool\ndescription: Lists buckets.\n---\nList the buckets.\n")
	var logs, problems natstest.Buffer
	reg := e.registry(registry.Config{Log: slog.New(slog.NewTextHandler(&logs, nil)), Problems: &problems})
	e.sync(reg)
	if !regexp.MustCompile(`(?m)^\S*s3/SKILL.md:2:7: error: name "S3 Tool" `).MatchString(problems.String()) {
		t.Errorf("problems:\n%s", problems.String())
	}
	if strings.Contains(logs.String(), "S3 Tool") {
		t.Errorf("the problem was logged too:\n%s", logs.String())
	}
}

// A root whose one skill turns invalid reads as empty of valid skills, but its
// file is there: the log says the skill is invalid, not that the root is empty
// or unreadable.
func TestOnlySkillInvalidIsNotAnEmptyRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	path := e.alpha(false)
	reg, logs := e.loggingRegistry()
	e.sync(reg)
	write(t, path, brokenMD("alpha"))
	if rep := e.sync(reg); !slices.Equal(rep.Invalid, []string{"alpha"}) {
		t.Fatalf("invalid %v, want alpha", rep.Invalid)
	}
	if !strings.Contains(logs.String(), "skill is invalid; its last good version keeps serving") || strings.Contains(logs.String(), "empty or unreadable") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// A skill whose files turn invalid keeps its last good version in the catalog,
// marked with their first error, so that the router and trigger --wait can say
// so; the mark goes when the files are valid again, even as the very same
// version, and a registry started on invalid files marks it too.
func TestInvalidSkillIsMarkedInTheCatalog(t *testing.T) {
	t.Parallel()
	e := setup(t)
	path := e.alpha(true)
	current := func() skill.Skill { return *e.entry("alpha") }
	reg := e.registry(registry.Config{})
	e.sync(reg)
	good := current()
	if good.Invalid != "" {
		t.Fatalf("valid skill marked: %q", good.Invalid)
	}
	write(t, path, brokenMD("alpha"))
	e.sync(reg)
	s := current()
	if s.Digest != good.Digest || !strings.Contains(s.Invalid, filepath.Join("alpha", "SKILL.md")+":3:") || !strings.Contains(s.Invalid, "error:") {
		t.Fatalf("invalid skill: digest %s (was %s), mark %q", s.Digest, good.Digest, s.Invalid)
	}
	rev := func() uint64 {
		entry, err := e.kv.Get(e.ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		return entry.Revision()
	}
	// Kept versions never carry it.
	if entry, err := e.kv.Get(e.ctx, catalog.VersionKey("alpha", good.Digest)); err != nil || strings.Contains(string(entry.Value()), `"invalid"`) {
		t.Fatalf("kept version while marked: %v %s", err, entry.Value())
	}
	before := rev()
	e.sync(reg)
	if rev() != before {
		t.Errorf("a sync finding the same error wrote the entry again")
	}
	// A registry started on the invalid files keeps the mark, unchanged.
	reg.Stop()
	again := e.registry(registry.Config{})
	e.sync(again)
	if current().Invalid != s.Invalid || rev() != before {
		t.Errorf("after a restart: mark %q, revision %d (was %d)", current().Invalid, rev(), before)
	}
	// Fixed back to the very version serving: the mark goes.
	write(t, path, skillMD("alpha", "first"))
	e.sync(again)
	if s := current(); s.Invalid != "" || s.Digest != good.Digest {
		t.Errorf("fixed: digest %s, mark %q", s.Digest, s.Invalid)
	}
}

// The mark changes the entry's mark alone — what else the entry says (here the
// repair that made the version) stays — and only on the version this registry
// published: a newer one, another registry's, is not marked, nor rolled back.
func TestInvalidMarkChangesOnlyTheMark(t *testing.T) {
	t.Parallel()
	e := setup(t)
	path := e.alpha(true)
	reg := e.registry(registry.Config{})
	e.sync(reg)
	entry := func() map[string]any {
		t.Helper()
		en, err := e.kv.Get(e.ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(en.Value(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	put := func(m map[string]any) {
		t.Helper()
		v, _ := json.Marshal(m)
		if _, err := e.kv.Put(e.ctx, "alpha", v); err != nil {
			t.Fatal(err)
		}
	}
	m := entry()
	m["repaired_by"] = "rep-1" // as a repair's version says
	put(m)
	write(t, path, brokenMD("alpha"))
	e.sync(reg)
	if m := entry(); m["invalid"] == nil || m["repaired_by"] != "rep-1" {
		t.Fatalf("marked: %v", m)
	}
	write(t, path, skillMD("alpha", "first"))
	e.sync(reg)
	if m := entry(); m["invalid"] != nil || m["repaired_by"] != "rep-1" {
		t.Fatalf("unmarked: %v", m)
	}

	// Another registry publishes a newer version; this one, behind, finds the
	// files invalid: it writes nothing.
	m = entry()
	m["digest"] = strings.Repeat("b", 64)
	put(m)
	write(t, path, brokenMD("alpha"))
	e.sync(reg)
	if m := entry(); m["invalid"] != nil || m["digest"] != strings.Repeat("b", 64) {
		t.Errorf("another registry's newer version: %v", m)
	}
}
