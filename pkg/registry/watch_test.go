package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

// started starts a watching registry whose syncs arrive on the returned channel.
func (e *env) started(cfg registry.Config) (*registry.Registry, <-chan *registry.Report) {
	e.t.Helper()
	syncs := make(chan *registry.Report, 100)
	cfg.OnSync = func(r *registry.Report) { syncs <- r }
	if cfg.Debounce == 0 {
		cfg.Debounce = 50 * time.Millisecond
	}
	reg := e.registry(cfg)
	if err := reg.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	return reg, syncs
}

// next returns the next sync report.
func next(t *testing.T, syncs <-chan *registry.Report) *registry.Report {
	t.Helper()
	select {
	case r := <-syncs:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no sync within 20s")
		return nil
	}
}

// until returns the first sync report for which cond holds, skipping the others (a
// write seen in two halves by a slow machine syncs twice).
func until(t *testing.T, syncs <-chan *registry.Report, what string, cond func(*registry.Report) bool) *registry.Report {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-syncs:
			if cond(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no sync %s within 20s", what)
			return nil
		}
	}
}

func published(name string) func(*registry.Report) bool {
	return func(r *registry.Report) bool { return slices.Contains(r.Published, name) }
}

func TestWatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	write(t, filepath.Join(e.dir, "cat", "beta.md"), skillMD("beta", "single file"))
	reg, syncs := e.started(registry.Config{})
	if l := reg.Last(); l == nil || !slices.Equal(l.Loaded, []string{"alpha", "beta"}) {
		t.Fatalf("first sync: %+v", l)
	}
	cat := e.catalog()
	wait(t, cat, "the first sync", has("alpha", "first"))

	t.Run("edit", func(t *testing.T) {
		old, _ := cat.Get("alpha")
		write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "edited"))
		wait(t, cat, "the edit", has("alpha", "edited"))
		// Only alpha was read again, and the old version is still there for pinned runs.
		if r := until(t, syncs, "publishing alpha", published("alpha")); !r.Incremental || !slices.Equal(r.Published, []string{"alpha"}) {
			t.Errorf("sync after an edit: %+v", r)
		}
		if s, err := cat.LookupVersion(e.ctx, "alpha", old.Digest); err != nil || s.Description != "first" {
			t.Errorf("old version: %v, %v", s, err)
		}
	})
	t.Run("edit of a single file and a new resource", func(t *testing.T) {
		write(t, filepath.Join(e.dir, "cat", "beta.md"), skillMD("beta", "edited too"))
		wait(t, cat, "the single-file edit", has("beta", "edited too"))
		write(t, filepath.Join(e.dir, "alpha", "references", "deep", "guide.md"), "# Guide\n")
		wait(t, cat, "the new resource", func(c *catalog.Catalog) bool {
			s, _ := c.Get("alpha")
			return s != nil && len(s.Resources) == 1 && s.Resources[0].Path == "references/deep/guide.md"
		})
	})
	t.Run("new skill in a new directory", func(t *testing.T) {
		write(t, filepath.Join(e.dir, "group", "gamma", "SKILL.md"), skillMD("gamma", "new"))
		wait(t, cat, "the new skill", has("gamma", "new"))
		// The new directories are watched too.
		write(t, filepath.Join(e.dir, "group", "gamma", "SKILL.md"), skillMD("gamma", "newer"))
		wait(t, cat, "the edit of the new skill", has("gamma", "newer"))
	})
	t.Run("made invalid keeps the last good version", func(t *testing.T) {
		write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), brokenMD("alpha"))
		r := until(t, syncs, "finding alpha invalid", func(r *registry.Report) bool { return len(r.Invalid) > 0 })
		if !slices.Equal(r.Invalid, []string{"alpha"}) || slices.Contains(r.Removed, "alpha") {
			t.Fatalf("sync after breaking alpha: %+v", r)
		}
		if s, ok := cat.Get("alpha"); !ok || s.Description != "edited" {
			t.Fatalf("alpha no longer serves its last good version: %v", s)
		}
		info := find(reg.List().Skills, "alpha")
		if info == nil || info.State != registry.StateInvalid || info.Errors == 0 || !strings.Contains(info.Diagnostics[0].File, "alpha") {
			t.Fatalf("list does not report alpha as invalid: %+v", info)
		}
		// Fixed again: serving the fix, state ok.
		write(t, filepath.Join(e.dir, "alpha", "SKILL.md"), skillMD("alpha", "fixed"))
		wait(t, cat, "the fix", has("alpha", "fixed"))
		until(t, syncs, "publishing the fix", published("alpha"))
		if info := find(reg.List().Skills, "alpha"); info.State != registry.StateOK || info.Errors != 0 {
			t.Fatalf("after the fix: %+v", info)
		}
	})
	t.Run("atomic save", func(t *testing.T) {
		// Editors write a temporary file and rename it over the original.
		tmp := filepath.Join(e.dir, "alpha", ".SKILL.md.swp")
		write(t, tmp, skillMD("alpha", "saved atomically"))
		if err := os.Rename(tmp, filepath.Join(e.dir, "alpha", "SKILL.md")); err != nil {
			t.Fatal(err)
		}
		wait(t, cat, "the atomic save", has("alpha", "saved atomically"))
	})
	t.Run("delete", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(e.dir, "group")); err != nil {
			t.Fatal(err)
		}
		wait(t, cat, "the deletion", func(c *catalog.Catalog) bool { _, ok := c.Get("gamma"); return !ok })
		until(t, syncs, "removing gamma", func(r *registry.Report) bool { return slices.Equal(r.Removed, []string{"gamma"}) })
	})
}

func find(infos []registry.SkillInfo, name string) *registry.SkillInfo {
	for i := range infos {
		if infos[i].Name == name {
			return &infos[i]
		}
	}
	return nil
}

// A burst of writes is one sync.
func TestWatchDebounces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := filepath.Join(e.dir, "alpha", "SKILL.md")
	write(t, p, skillMD("alpha", "v0"))
	_, syncs := e.started(registry.Config{Debounce: 500 * time.Millisecond})
	cat := e.catalog()
	for i := range 20 {
		write(t, p, skillMD("alpha", "v"+strings.Repeat("x", i+1)))
	}
	final := "v" + strings.Repeat("x", 20)
	wait(t, cat, "the last write", has("alpha", final))
	// Mark the end of the burst with a change of its own, then count the syncs
	// before it.
	write(t, filepath.Join(e.dir, "marker", "SKILL.md"), skillMD("marker", "end"))
	var burst []*registry.Report
	for {
		r := next(t, syncs)
		if slices.Contains(r.Published, "marker") {
			break
		}
		burst = append(burst, r)
	}
	if len(burst) != 1 || !slices.Equal(burst[0].Published, []string{"alpha"}) {
		t.Fatalf("%d syncs for a burst of 20 writes: %+v", len(burst), burst)
	}
}

// Roots that do not exist yet are loaded when they appear, and a root removed and
// made again is followed. A root that disappears does not wipe its skills (an
// unmounted volume is not a decision to delete them); once it is back, what it no
// longer holds is removed.
func TestWatchMissingRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root := filepath.Join(e.dir, "not", "yet", "skills")
	_, syncs := e.started(registry.Config{Roots: []string{root}})
	cat := e.catalog()
	write(t, filepath.Join(root, "late", "SKILL.md"), skillMD("late", "arrived"))
	wait(t, cat, "the skill of the new root", has("late", "arrived"))
	write(t, filepath.Join(root, "late", "SKILL.md"), skillMD("late", "edited"))
	wait(t, cat, "an edit in the new root", has("late", "edited"))

	if err := os.RemoveAll(filepath.Join(e.dir, "not")); err != nil {
		t.Fatal(err)
	}
	for {
		r := next(t, syncs)
		if slices.Contains(r.Invalid, "late") {
			if len(r.Removed) != 0 {
				t.Fatalf("a vanished root removed %v", r.Removed)
			}
			break
		}
	}
	if _, ok := cat.Get("late"); !ok {
		t.Fatal("the skills of a vanished root were wiped")
	}
	write(t, filepath.Join(root, "again", "SKILL.md"), skillMD("again", "back"))
	wait(t, cat, "the root made again", func(c *catalog.Catalog) bool {
		_, late := c.Get("late")
		return has("again", "back")(c) && !late
	})
}

// A skill file given as a root is watched.
func TestWatchFileRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := filepath.Join(e.dir, "solo.md")
	write(t, p, skillMD("solo", "one"))
	write(t, filepath.Join(e.dir, "other.md"), skillMD("other", "not a root"))
	e.started(registry.Config{Roots: []string{p}})
	cat := e.catalog()
	wait(t, cat, "the file root", has("solo", "one"))
	write(t, p, skillMD("solo", "two"))
	wait(t, cat, "the edit of the file root", has("solo", "two"))
	if _, ok := cat.Get("other"); ok {
		t.Error("a file beside the root was loaded")
	}
}

// A change that touches the catalog as a whole (a rename, a dependency) is a full
// sync, and its rules hold: a skill whose dependency disappears is invalid and keeps
// its last good version.
func TestWatchCatalogRules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.dir, "base", "SKILL.md"), skillMD("base", "the base"))
	write(t, filepath.Join(e.dir, "user", "SKILL.md"), strings.Replace(skillMD("user", "uses base"), "---\n\n", "dependencies: [base]\n---\n\n", 1))
	reg, syncs := e.started(registry.Config{})
	cat := e.catalog()
	wait(t, cat, "both", func(c *catalog.Catalog) bool { return len(c.All()) == 2 })

	// Renaming base breaks user: user stays (last good), base goes, based arrives.
	write(t, filepath.Join(e.dir, "base", "SKILL.md"), skillMD("based", "renamed"))
	r := until(t, syncs, "publishing based", published("based"))
	if r.Incremental || !slices.Equal(r.Removed, []string{"base"}) || !slices.Equal(r.Invalid, []string{"user"}) {
		t.Fatalf("sync after the rename: %+v", r)
	}
	wait(t, cat, "the renamed skill", has("based", "renamed"))
	info := find(reg.List().Skills, "user")
	if info == nil || info.State != registry.StateInvalid ||
		!slices.ContainsFunc(info.Diagnostics, func(d skill.Diagnostic) bool { return strings.Contains(d.Message, "depends on base") }) {
		t.Fatalf("user: %+v", info)
	}
	if _, ok := cat.Get("user"); !ok {
		t.Fatal("user is no longer served")
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := e.registry(registry.Config{})
	reg.Stop() // before Start: harmless
	if err := reg.Start(e.ctx); err == nil {
		t.Fatal("a stopped registry started")
	}
	reg2, _ := e.started(registry.Config{})
	if err := reg2.Start(e.ctx); err == nil {
		t.Error("started twice")
	}
	reg2.Stop()
	reg2.Stop()

	// A start that cannot reach NATS fails and leaves nothing running.
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	reg3 := e.registry(registry.Config{})
	if err := reg3.Start(ctx); err == nil {
		t.Error("Start with a cancelled context succeeded")
	}
}
