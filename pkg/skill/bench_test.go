package skill

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeSkills generates n skills under root: a mix of instruction skills with a
// reference, workflows (SKILL.md + skill.yaml), script skills and single files, in
// categories of 100, with dependencies between neighbours.
func writeSkills(tb testing.TB, root string, n int) {
	tb.Helper()
	write := func(p, text string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("skill-%05d", i)
		cat := filepath.Join(root, fmt.Sprintf("cat-%03d", i/100))
		deps := ""
		if i%100 > 0 {
			deps = fmt.Sprintf("dependencies: [skill-%05d]\n", i-1)
		}
		front := fmt.Sprintf("---\nname: %s\ndescription: Generated skill number %d for the load benchmark.\nversion: 1.0.%d\n"+
			"triggers: [io.skillbus.bench.t%d]\ntags: [bench, generated]\n%s", name, i, i, i%50, deps)
		body := "# Instructions\n\nRead [the notes](references/notes.md), then do the work in three steps:\n\n" +
			"1. Gather the inputs.\n2. Do the thing.\n3. Report.\n\n```bash\necho done\n```\n"
		switch i % 4 {
		case 0: // instruction skill with a reference
			write(filepath.Join(cat, name, "SKILL.md"), front+"---\n"+body)
			write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n\nSome notes.\n")
		case 1: // workflow
			write(filepath.Join(cat, name, "SKILL.md"), front+"---\n"+body)
			write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n")
			write(filepath.Join(cat, name, "skill.yaml"), `inputs:
  - name: issue_key
    type: string
    required: true
    pattern: "^[A-Z]+-\\d+$"
  - name: prefix
    default: feature
    enum: [feature, fix]
steps:
  - id: get_issue
    tool: jira_view_issue
    args:
      issue_key: "{{ inputs.issue_key }}"
    output: issue_data
  - id: build_name
    compute: |
      result = inputs.prefix + "/" + inputs.issue_key
    output: branch_name
  - id: create_branch
    condition: "issue_data and branch_name"
    tool: git_create_branch
    args:
      branch: "{{ branch_name }}"
    on_error: retry:2
outputs:
  branch: "{{ branch_name }}"
`)
		case 2: // script skill
			write(filepath.Join(cat, name, "SKILL.md"), front+"entrypoints:\n  - name: default\n    command: scripts/run.sh\n---\n"+body)
			write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n")
			write(filepath.Join(cat, name, "scripts", "run.sh"), "#!/bin/sh\necho run\n")
		case 3: // single file
			write(filepath.Join(cat, name+".md"), front+"---\n"+"Do the work in three steps and report what you did, briefly.\n")
		}
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
