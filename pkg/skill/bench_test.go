package skill

import (
	"os"
	"testing"

	"github.com/skillbus/skillbus/internal/skillgen"
)

func writeSkills(tb testing.TB, root string, n int) {
	tb.Helper()
	if err := skillgen.Generate(root, n); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkDiscover10k loads and validates 10,000 generated skills from disk, the
// registry's cold start (issue 3's goal: ≤ 2 s on a 2-core machine).
func BenchmarkDiscover10k(b *testing.B) {
	root := b.TempDir()
	writeSkills(b, root, 10_000)
	for b.Loop() {
		cat, ds := Discover(root)
		if len(cat.Skills) != 10_000 || ds.HasErrors() {
			b.Fatalf("%d skills:\n%s", len(cat.Skills), ds.Errors())
		}
	}
}

func BenchmarkParseWorkflow(b *testing.B) {
	data, err := os.ReadFile(fixture("seeds/004/start_work/skill.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if s, ds := ParseWorkflow("skill.yaml", data); s == nil {
			b.Fatal(ds)
		}
	}
}

func BenchmarkParseSkillMD(b *testing.B) {
	data, err := os.ReadFile(fixture("good/triage-issue/SKILL.md"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if s, ds := ParseSkillMD("SKILL.md", data); s == nil {
			b.Fatal(ds)
		}
	}
}

// TestDiscoverMany checks the generated catalog used by the benchmark, small.
func TestDiscoverMany(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkills(t, root, 400)
	cat, ds := Discover(root)
	if len(cat.Skills) != 400 || len(ds) > 0 {
		t.Fatalf("%d skills:\n%s", len(cat.Skills), ds)
	}
}
