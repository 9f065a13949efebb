package registry_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/run"
)

// A version a ramp sends runs to is kept, with its files, past its retention,
// for as long as the ramp lasts; once rolled back it is collected.
func TestGCKeepsRampedVersion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := e.registry(registry.Config{Retention: registry.Retention{Keep: 1, For: time.Nanosecond, Max: 2}})
	p := filepath.Join(e.dir, "alpha", "SKILL.md")
	var digests []string
	for i := range 3 {
		write(t, p, skillMD("alpha", "version "+string(rune('a'+i))))
		if _, err := reg.Sync(e.ctx); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, e.entry("alpha").Digest)
	}
	runs, err := e.b.KV(e.ctx, e.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(run.Ramp{Skill: "alpha", Digest: digests[0], Basis: 1000, By: "ada"})
	if _, err := runs.Put(e.ctx, events.SkillRampKey("alpha"), rec); err != nil {
		t.Fatal(err)
	}
	kept := func(digest string) bool {
		_, err := e.kv.Get(e.ctx, catalog.VersionKey("alpha", digest))
		return err == nil
	}
	files := func(digest string) int {
		objs, _ := e.obs().List(e.ctx)
		n := 0
		for _, o := range objs {
			if strings.HasPrefix(o.Name, catalog.ObjectName("alpha", digest, "")) {
				n++
			}
		}
		return n
	}
	if _, err := reg.GC(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !kept(digests[0]) || files(digests[0]) == 0 {
		t.Fatal("the ramped version was collected")
	}
	if kept(digests[1]) {
		t.Fatal("a version neither ramped nor retained was kept: the test proves nothing")
	}
	if err := runs.Delete(e.ctx, events.SkillRampKey("alpha")); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.GC(e.ctx); err != nil {
		t.Fatal(err)
	}
	if kept(digests[0]) {
		t.Fatal("the version was kept after its ramp was rolled back")
	}
}

// A ramp written while a collection runs, after it listed the ramps and before
// it removes the version the ramp names (control checked that the version
// exists, as it did then), keeps that version: the collection reads the ramp
// again just before it removes a version.
func TestGCKeepsAVersionRampedDuringTheCollection(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := e.registry(registry.Config{Retention: registry.Retention{Keep: 1, For: time.Nanosecond, Max: 3}})
	digests, c := e.twoVersions(t, reg)
	ramped := 0
	registry.SetGCHook(reg, func() {
		if _, err := c.Ramp(e.ctx, "alpha", digests[0], "10", control.Request{By: "ada"}); err != nil {
			t.Errorf("ramp during the collection: %v", err)
		}
		ramped++
	})
	rep, err := reg.GC(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ramped != 1 {
		t.Fatalf("the hook ran %d times, want 1", ramped)
	}
	if len(rep.Versions) != 0 {
		t.Fatalf("collected %v, want nothing: the old version is ramped", rep.Versions)
	}
	e.versionKept(t, digests[0], "during the collection")
	registry.SetGCHook(reg, nil)
}

// A ramp written after a collection read the ramps one last time and before it
// removes the version (the ramp found the version there, before and after its
// write) keeps the version: the collection reads the ramps again after the
// removal and puts the version back, files and all.
func TestGCPutsBackAVersionRampedAsItIsRemoved(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := e.registry(registry.Config{Retention: registry.Retention{Keep: 1, For: time.Nanosecond, Max: 3}})
	digests, c := e.twoVersions(t, reg)
	ramped := 0
	registry.SetGCPurgeHook(reg, func(name, digest string) {
		if name != "alpha" || digest != digests[0] {
			return
		}
		if _, err := c.Ramp(e.ctx, "alpha", digests[0], "10", control.Request{By: "ada"}); err != nil {
			t.Errorf("ramp as the version is removed: %v", err)
		}
		ramped++
	})
	rep, err := reg.GC(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ramped != 1 {
		t.Fatalf("the hook ran %d times, want 1", ramped)
	}
	if len(rep.Versions) != 0 {
		t.Fatalf("collected %v, want nothing: the old version is ramped", rep.Versions)
	}
	e.versionKept(t, digests[0], "as it was removed")
	if rp, _, err := c.LoadRamp(e.ctx, "alpha"); err != nil || rp == nil || rp.Digest != digests[0] {
		t.Fatalf("ramp = %+v, %v; want the ramp to the old version", rp, err)
	}
}

// twoVersions publishes two versions of skill alpha through reg and returns
// their digests, oldest first, and a control client.
func (e *env) twoVersions(t *testing.T, reg *registry.Registry) ([]string, *control.Controller) {
	t.Helper()
	p := filepath.Join(e.dir, "alpha", "SKILL.md")
	var digests []string
	for i := range 2 {
		write(t, p, skillMD("alpha", "version "+string(rune('a'+i))))
		if _, err := reg.Sync(e.ctx); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, e.entry("alpha").Digest)
	}
	c, err := control.New(e.ctx, e.b)
	if err != nil {
		t.Fatal(err)
	}
	return digests, c
}

// versionKept fails the test unless alpha's version digest still has its key
// and its files; when says which ramp kept it.
func (e *env) versionKept(t *testing.T, digest, when string) {
	t.Helper()
	if _, err := e.kv.Get(e.ctx, catalog.VersionKey("alpha", digest)); err != nil {
		t.Fatalf("the version ramped %s was collected: %v", when, err)
	}
	objs, _ := e.obs().List(e.ctx)
	for _, o := range objs {
		if strings.HasPrefix(o.Name, catalog.ObjectName("alpha", digest, "")) {
			return
		}
	}
	t.Fatalf("the files of the version ramped %s were deleted", when)
}
