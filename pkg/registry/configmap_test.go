package registry_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillbus/skillbus/pkg/registry"
)

// configMapVersion writes one version of a Kubernetes ConfigMap volume the way the
// kubelet does: the files in a hidden timestamped directory, the ..data link pointing
// at it (replaced atomically by renaming ..data_tmp over it), and one top-level link
// per entry into ..data. Returns the timestamped directory.
func configMapVersion(t *testing.T, root, stamp string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, stamp)
	for rel, text := range files {
		write(t, filepath.Join(dir, rel), text)
	}
	tmp := filepath.Join(root, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, "..data")); err != nil {
		t.Fatal(err)
	}
	for rel := range files {
		top := filepath.Join(root, firstElem(rel))
		if _, err := os.Lstat(top); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", firstElem(rel)), top); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func firstElem(rel string) string {
	for {
		d := filepath.Dir(rel)
		if d == "." {
			return rel
		}
		rel = d
	}
}

// A skills directory mounted from a ConfigMap changes by the kubelet swapping the
// ..data link; the registry publishes the new version.
func TestWatchConfigMapSwap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first := configMapVersion(t, e.dir, "..2026_01_01_00_00_00.1", map[string]string{"hello/SKILL.md": skillMD("hello", "first")})
	_, _ = e.started(registry.Config{})
	cat := e.catalog()
	wait(t, cat, "the first version", has("hello", "first"))

	configMapVersion(t, e.dir, "..2026_01_01_00_01_00.2", map[string]string{"hello/SKILL.md": skillMD("hello", "second"), "bye/SKILL.md": skillMD("bye", "new")})
	if err := os.RemoveAll(first); err != nil { // the kubelet removes the old version
		t.Fatal(err)
	}
	wait(t, cat, "the swapped version", has("hello", "second"))
	wait(t, cat, "a skill added by the swap", has("bye", "new"))

	// And again: the directories watched after the first swap are gone too.
	configMapVersion(t, e.dir, "..2026_01_01_00_02_00.3", map[string]string{"hello/SKILL.md": skillMD("hello", "third"), "bye/SKILL.md": skillMD("bye", "new")})
	wait(t, cat, "the second swap", has("hello", "third"))
}
