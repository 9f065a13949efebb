package registry_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
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

func TestSync(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "alpha", "SKILL.md"), skillMD("alpha", "first"))
	write(t, filepath.Join(dir, "beta", "SKILL.md"), skillMD("beta", "second"))
	write(t, filepath.Join(dir, "broken", "SKILL.md"), "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
	reg, err := registry.New(registry.Config{Bus: b, Roots: []string{dir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reg.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"alpha", "beta"}, rep.Published); d != "" {
		t.Fatalf("published (-want +got)\n%s", d)
	}
	var broken []string
	for _, d := range rep.Diagnostics.Errors() {
		if strings.Contains(d.File, "broken") && d.Line > 0 {
			broken = append(broken, d.String())
		}
	}
	if len(broken) == 0 {
		t.Fatalf("the broken skill was not reported with a line: %v", rep.Diagnostics)
	}
	kv, _ := b.KV(ctx, b.BucketSkills())
	e, err := kv.Get(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	var s skill.Skill
	if err := json.Unmarshal(e.Value(), &s); err != nil || s.Description != "first" || s.Digest == "" {
		t.Fatalf("catalog entry %s (%v)", e.Value(), err)
	}

	// Nothing changed: nothing is published again.
	if rep, err = reg.Sync(ctx); err != nil || len(rep.Published)+len(rep.Removed) != 0 {
		t.Fatalf("idle sync: %+v %v", rep, err)
	}
	// An edit republishes that skill; a removal deletes it.
	write(t, filepath.Join(dir, "alpha", "SKILL.md"), skillMD("alpha", "edited"))
	if err := os.RemoveAll(filepath.Join(dir, "beta")); err != nil {
		t.Fatal(err)
	}
	if rep, err = reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"alpha"}, rep.Published); d != "" {
		t.Errorf("published (-want +got)\n%s", d)
	}
	if d := cmp.Diff([]string{"beta"}, rep.Removed); d != "" {
		t.Errorf("removed (-want +got)\n%s", d)
	}
	if _, err := kv.Get(ctx, "beta"); err == nil {
		t.Error("beta is still in the catalog")
	}
}
