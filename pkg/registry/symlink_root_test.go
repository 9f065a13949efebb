package registry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/registry"
)

// The registry neither loads nor watches what a symlink outside the skills root
// leads to, unless it is a skill directory: a category linked to "/" must not make
// it walk and watch the whole host.
func TestRegistryDoesNotWalkOutOfTheRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	outside := t.TempDir()
	for _, d := range []string{"team/far", "team/far/scripts", "linked", "linked/scripts"} {
		if err := os.MkdirAll(filepath.Join(outside, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dir, name := range map[string]string{"team/far": "far", "linked": "linked"} {
		text := "---\nname: " + name + "\ndescription: The " + name + " skill, for a test of symlinks.\n---\nSay hello to the person named in the input, politely and briefly.\n"
		if err := os.WriteFile(filepath.Join(outside, dir, "SKILL.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"everything": outside, "host": "/", "linked": filepath.Join(outside, "linked")} {
		if err := os.Symlink(target, filepath.Join(e.dir, link)); err != nil {
			t.Skip("symlinks unsupported:", err)
		}
	}
	reg, _ := e.started(registry.Config{})
	defer reg.Stop()
	rep := reg.Last()
	if strings.Join(rep.Loaded, ",") != "linked" {
		t.Errorf("loaded %v, want only linked", rep.Loaded)
	}
	warned := 0
	for _, d := range rep.Diagnostics {
		if strings.Contains(d.Message, "outside the skills root") {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d warnings about links outside the root, want 2 (everything, host): %v", warned, rep.Diagnostics)
	}
	watched := registry.WatchList(reg)
	for _, w := range watched {
		if strings.HasPrefix(w, filepath.Join(e.dir, "everything")) || strings.HasPrefix(w, filepath.Join(e.dir, "host")) || strings.HasPrefix(w, outside) {
			t.Errorf("watches %s, outside the root", w)
		}
	}
	if len(watched) != 3 { // the root, linked and linked/scripts
		t.Errorf("watches %d directories, want 3 (the root, linked, linked/scripts): %v", len(watched), watched)
	}
}
