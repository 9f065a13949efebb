package skill

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func names(ss []*Skill) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestDiscoverCatalog(t *testing.T) {
	t.Parallel()
	roots := []string{
		fixture("catalog/root1"),
		fixture("catalog/missing-root"), // skipped
		fixture("catalog/root2"),
		fixture("catalog/root1"), // listed twice: counted once
		fixture("catalog/claude/skills"),
	}
	cat, ds := Discover(roots...)
	checkFiles(t, ds)
	base := fixture("catalog")
	want := []diag{
		{"claude/subagents/no-capabilities.md:1:1", SeverityError, "a subagent needs capabilities"},
		{"claude/subagents/researcher.md:2:7", SeverityWarning, "subagent researcher is shadowed by"},
		{"root1/cycle-a/SKILL.md:5:5", SeverityError, "dependency cycle: cycle-a → cycle-b → cycle-c → cycle-a"},
		{"root1/cycle-b/SKILL.md:5:5", SeverityError, "dependency cycle: cycle-a → cycle-b → cycle-c → cycle-a"},
		{"root1/cycle-c/SKILL.md:5:5", SeverityError, "dependency cycle: cycle-a → cycle-b → cycle-c → cycle-a"},
		{"root1/on-cycle/SKILL.md:5:5", SeverityError, "skill on-cycle depends on cycle-b, which was rejected"},
		{"root1/self-loop/SKILL.md:5:5", SeverityError, "dependency cycle: self-loop → self-loop"},
		{"root1/twice/SKILL.md:2:7", SeverityError, "skill twice is defined twice in one root"},
		{"root1/uses_missing/SKILL.md:6:5", SeverityError, "skill uses_missing depends on not-there, which is not in the catalog"},
		{"root2/broken/SKILL.md:1:1", SeverityError, "description is required"},
		{"root2/broken/SKILL.md:4", SeverityWarning, "instructions are 14 characters"},
		{"root2/fix_build/SKILL.md:2:7", SeverityError, "skill fix_build conflicts with skill fix-build"},
		{"root2/needs-broken/SKILL.md:5:5", SeverityError, "skill needs-broken depends on broken, which was rejected"},
		{"root2/shared/SKILL.md:2:7", SeverityWarning, "skill shared is shadowed by " + filepath.Join(base, "root1/shared/SKILL.md")},
	}
	if diff := cmp.Diff(want, project(ds, base, want)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
	}
	wantSkills := []string{"base", "fix-build", "twice", "shared", "uses-base", "only-in-two", "agent-user"}
	if diff := cmp.Diff(wantSkills, names(cat.Skills)); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
	if len(cat.Subagents) != 1 || cat.Subagents[0].Name != "researcher" || filepath.Base(filepath.Dir(cat.Subagents[0].Source)) != "subagents" {
		t.Errorf("subagents = %+v", cat.Subagents)
	}
	if len(cat.Roots) != 3 {
		t.Errorf("roots = %q", cat.Roots)
	}
	if s := cat.Get("FIX_build"); s == nil || s.Name != "fix-build" {
		t.Errorf("Get(FIX_build) = %v", s)
	}
	if s := cat.Get("shared"); s == nil || filepath.Dir(s.Source) != filepath.Join(base, "root1/shared") {
		t.Errorf("Get(shared) = %v; want root1's", s)
	}
	if cat.Get("cycle-a") != nil || cat.Subagent("researcher") == nil {
		t.Error("lookups")
	}
}

// TestDiscoverFixtures discovers the good and seed fixtures as roots: every skill
// format in one catalog.
func TestDiscoverFixtures(t *testing.T) {
	t.Parallel()
	cat, ds := Discover(fixture("good"), fixture("seeds"))
	checkFiles(t, ds)
	want := []diag{
		{"seeds/000/self-improvement/error-analyzer.md:16:3", SeverityError, "invalid YAML"},
		{"seeds/000/self-improvement/error-analyzer.md:20:3", SeverityError, "max_retries is indented"},
		{"seeds/000/subagents/researcher.md:22", SeverityWarning, "instructions are 0 characters"},
		{"seeds/004/start_work/skill.yaml:4:10", SeverityWarning, "not a semantic version"},
	}
	if diff := cmp.Diff(want, project(ds, fixtures, want)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
	}
	wantSkills := []string{"explicit-only", "lint-repo", "pdf-report", "crlf-bom", "release-notes", "rotate_keys", "triage-issue",
		"my-custom-skill", "repo_stats", "weather_report", "deploy-staging", "k8s_pods", "parallel_cache", "start_work"}
	if diff := cmp.Diff(wantSkills, names(cat.Skills)); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
	kinds := map[string]Kind{}
	for _, s := range cat.Skills {
		kinds[s.Name] = s.Kind
	}
	for name, k := range map[string]Kind{"lint-repo": KindScript, "triage-issue": KindWorkflow, "rotate_keys": KindWorkflow,
		"pdf-report": KindInstruction, "repo_stats": KindScript, "start_work": KindWorkflow} {
		if kinds[name] != k {
			t.Errorf("kind of %s = %s, want %s", name, kinds[name], k)
		}
	}
}

func TestDiscoverRootForms(t *testing.T) {
	t.Parallel()
	// A root may be a skill directory or a single file.
	cat, ds := Discover(fixture("good/lint-repo"), fixture("good/single-files/release-notes.md"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if diff := cmp.Diff([]string{"lint-repo", "release-notes"}, names(cat.Skills)); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
	// Nested roots find each skill once.
	cat, ds = Discover(fixture("seeds/004"), fixture("seeds"))
	if n := len(cat.Skills); n != 7 {
		t.Errorf("%d skills: %q\n%s", n, names(cat.Skills), ds)
	}
}

// TestDiscoverSymlinkedSkill follows a symlinked skill directory in a root, the way
// people install skills they develop elsewhere.
func TestDiscoverSymlinkedSkill(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target, err := filepath.Abs(fixture("good/explicit-only"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "explicit-only")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	// A link back to the root must not loop.
	if err := os.Symlink(root, filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	cat, ds := Discover(root)
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if diff := cmp.Diff([]string{"explicit-only"}, names(cat.Skills)); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
}

func TestDefaultRoots(t *testing.T) {
	t.Parallel()
	got := DefaultRoots("/w", "/h")
	want := []string{"/w/skills", "/w/.agents/skills", "/w/.claude/skills", "/h/.agents/skills", "/h/.claude/skills", "/etc/agent/skills"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{filepath.FromSlash("/etc/agent/skills")}, DefaultRoots("", "")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		deps [][]int
		want [][]int
	}{
		{deps: [][]int{{1}, {2}, {}}, want: nil},
		{deps: [][]int{{0}}, want: [][]int{{0}}},
		{deps: [][]int{{1}, {2}, {0}}, want: [][]int{{0, 1, 2}}},
		{deps: [][]int{{}, {2}, {1}, {3}}, want: [][]int{{1, 2}, {3}}},
		// Two cycles through 0: the shortest is named.
		{deps: [][]int{{1, 3}, {2}, {0}, {0}}, want: [][]int{{0, 3}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, cycles(tt.deps), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycles(%v) (-want +got):\n%s", tt.deps, diff)
		}
	}
	// A long chain does not exhaust the stack.
	long := make([][]int, 100_000)
	for i := range long {
		long[i] = []int{(i + 1) % len(long)}
	}
	if c := cycles(long); len(c) != 1 || len(c[0]) != len(long) {
		t.Errorf("long cycle: %d cycles", len(c))
	}
}
