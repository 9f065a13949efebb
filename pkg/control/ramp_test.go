package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/skill"
)

const (
	current = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	next    = "beef0000beef0000beef0000beef0000beef0000beef0000beef0000beef0000"
	twin    = "beef0000ffff0000beef0000beef0000beef0000beef0000beef0000beef0000"
)

func TestParseRampPercent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"10": 1000, "10%": 1000, "0": 0, "100": 10000, "0.5": 50, " 12.25 ": 1225} {
		if got, err := control.ParseRampPercent(in); err != nil || got != want {
			t.Errorf("ParseRampPercent(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-1", "101", "0.125", "NaN", "1e3"} {
		if _, err := control.ParseRampPercent(in); !errors.Is(err, control.ErrRampPercent) {
			t.Errorf("ParseRampPercent(%q) = %v; want ErrRampPercent", in, err)
		}
	}
}

// Ramp checks its skill, digest and percent before it writes; Rollback removes
// the ramp, once.
func TestRampAndRollback(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, digest, version string) {
		v, _ := json.Marshal(skill.Skill{Name: "hello", Description: "d", Digest: digest, Version: version})
		if _, err := kv.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	put("hello", current, "1.0.0")
	put(catalog.VersionKey("hello", current), current, "1.0.0")
	put(catalog.VersionKey("hello", next), next, "1.1.0")
	put(catalog.VersionKey("hello", twin), twin, "1.1.1")
	ctl, err := control.New(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	req := control.Request{By: "ada"}

	for _, tt := range []struct {
		name, skill, digest, percent string
		is                           error
		says                         string
	}{
		{"unknown skill", "nobody", next, "10", catalog.ErrNotFound, "nobody"},
		{"short digest", "hello", "beef", "10", control.ErrRampVersion, "at least 8 characters"},
		{"not hex", "hello", "zzzzzzzzzz", "10", control.ErrRampVersion, "hex"},
		{"unknown version", "hello", "deadbeefdead", "10", control.ErrRampVersion, "hello version deadbeefdead"},
		{"ambiguous prefix", "hello", "beef0000", "10", nil, "names 2 versions"},
		{"current version", "hello", current[:12], "10", nil, "current version"},
		{"percent", "hello", next, "110", control.ErrRampPercent, `percent "110"`},
	} {
		_, err := ctl.Ramp(ctx, tt.skill, tt.digest, tt.percent, req)
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: Ramp = %v; want an error saying %q", tt.name, err, tt.says)
		}
	}
	if rp, _, err := ctl.LoadRamp(ctx, "hello"); err != nil || rp != nil {
		t.Fatalf("a refused ramp was written: %+v, %v", rp, err)
	}

	rp, err := ctl.Ramp(ctx, "hello", next[:12], "10%", req)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Digest != next || rp.Version != "1.1.0" || rp.Basis != 1000 || rp.By != "ada" {
		t.Fatalf("ramp = %+v", rp)
	}
	got, _, err := ctl.LoadRamp(ctx, "hello")
	if err != nil || got == nil || got.Digest != next {
		t.Fatalf("LoadRamp = %+v, %v", got, err)
	}
	if rp, err := ctl.Rollback(ctx, "hello", req); err != nil || rp == nil || rp.Digest != next {
		t.Fatalf("Rollback = %+v, %v; want the ramp ended", rp, err)
	}
	if rp, err := ctl.Rollback(ctx, "hello", req); err != nil || rp != nil {
		t.Fatalf("second Rollback = %+v, %v; want no ramp", rp, err)
	}
}

// A collection that removes the version between Ramp's check that it exists
// and its write of the ramp (it read the ramps before the write) leaves no
// ramp behind: Ramp reads the version again after writing and removes its ramp,
// failing with ErrRampVersion.
func TestRampRacingACollectionRollsBack(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	for key, digest := range map[string]string{"hello": current, catalog.VersionKey("hello", current): current, catalog.VersionKey("hello", next): next} {
		v, _ := json.Marshal(skill.Skill{Name: "hello", Description: "d", Digest: digest, Version: "1.0.0"})
		if _, err := kv.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	ctl, err := control.New(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	collected := 0
	defer control.SetRampCheckedHook(func() {
		// What a collection does to a version it removes.
		if err := kv.Purge(ctx, catalog.VersionKey("hello", next)); err != nil {
			t.Error(err)
		}
		collected++
	})()
	rp, err := ctl.Ramp(ctx, "hello", next, "10", control.Request{By: "ada"})
	if collected != 1 {
		t.Fatalf("the hook ran %d times, want 1", collected)
	}
	if !errors.Is(err, control.ErrRampVersion) || !strings.Contains(err.Error(), "collected") {
		t.Fatalf("Ramp = %+v, %v; want ErrRampVersion saying the version was collected", rp, err)
	}
	if got, _, err := ctl.LoadRamp(ctx, "hello"); err != nil || got != nil {
		t.Fatalf("a ramp to a collected version is left: %+v, %v", got, err)
	}
}
