package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/skillbus/skillbus"

// TestPackageMapIsComplete fails when a package of the module is missing from
// the package map in docs/architecture.md, or the map lists one that does not
// exist: every package has a line saying what it owns and what it may import.
func TestPackageMapIsComplete(t *testing.T) {
	root := moduleRoot(t)
	pkgs := modulePackages(t, root)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := packageMap(t, string(doc))
	for _, p := range pkgs {
		if !listed[p] {
			t.Errorf("docs/architecture.md, ## Packages: no line for package %s; add one saying what it owns and what it may import", p)
		}
	}
	for p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("docs/architecture.md, ## Packages: %s is listed but is no package of the module", p)
		}
	}
	if !t.Failed() {
		t.Logf("%d packages, all in the map", len(pkgs))
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// modulePackages lists the module's packages by their path in it ("pkg/bus").
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}}\t{{.Dir}}", module+"/...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var pkgs []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, dir, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("go list: unexpected line %q", line)
		}
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			t.Fatalf("go list: %s is not in module %s", path, module)
		}
		pkgs = append(pkgs, rel)
		readAncestors(root, dir)
	}
	return pkgs
}

// readAncestors reads dir and every directory above it up to root. The test
// cache does not know what go list read; it hashes the listing of each
// directory a test reads, so a package added beside or below one of these
// makes the test run again.
func readAncestors(root, dir string) {
	for {
		_, _ = os.ReadDir(dir)
		if dir == root || len(dir) <= len(root) {
			return
		}
		dir = filepath.Dir(dir)
	}
}

var mapCell = regexp.MustCompile("`([^`]+)`")

// packageMap returns the packages the first cell of each row of the table
// under "## Packages" names.
func packageMap(t *testing.T, doc string) map[string]bool {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Packages\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Packages" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]bool{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		for _, m := range mapCell.FindAllStringSubmatch(cells[1], -1) {
			if listed[m[1]] {
				t.Errorf("docs/architecture.md, ## Packages: %s has two lines", m[1])
			}
			listed[m[1]] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("docs/architecture.md, ## Packages: no table rows found")
	}
	return listed
}
