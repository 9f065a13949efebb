package skill

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A symlink from a root to a directory outside it is followed only to a skill
// directory: a category outside the root (or "/") is not walked, and a warning
// says so. Links inside the root are followed as before.
func TestDiscoverDoesNotWalkOutOfTheRoot(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	skillMD := func(dir, name string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, SkillMDFile), []byte("---\nname: "+name+"\ndescription: The "+name+" skill, for a test of symlinks.\n---\nSay hello to the person named in the input, politely and briefly.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skillMD(filepath.Join(outside, "team", "far"), "far")
	skillMD(filepath.Join(outside, "linked"), "linked")
	root := t.TempDir()
	skillMD(filepath.Join(root, "cat", "near"), "near")
	skillMD(filepath.Join(root, ".store", "inner", "deep"), "deep") // hidden: only reached by a link
	for link, target := range map[string]string{
		"everything": outside,                                // a category outside: not walked
		"team":       filepath.Join(outside, "team"),         // nor this one
		"linked":     filepath.Join(outside, "linked"),       // a skill outside: loaded
		"inner":      filepath.Join(root, ".store", "inner"), // inside the root: followed
		"host":       string(filepath.Separator),             // the whole host: not walked
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Skip("symlinks unsupported:", err)
		}
	}
	cat, ds := Discover(root)
	got := names(cat.Skills)
	slices.Sort(got)
	if diff := cmp.Diff([]string{"deep", "linked", "near"}, got); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
	skipped := map[string]bool{}
	for _, d := range ds {
		if d.Severity == SeverityWarning && strings.Contains(d.Message, "outside the skills root") {
			skipped[filepath.Base(d.File)] = true
		} else {
			t.Errorf("unexpected diagnostic: %v", d)
		}
	}
	if diff := cmp.Diff(map[string]bool{"everything": true, "team": true, "host": true}, skipped); diff != "" {
		t.Errorf("links skipped with a warning (-want +got):\n%s", diff)
	}
}
