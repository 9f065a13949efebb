// Package skillgen writes generated skill catalogs for benchmarks and tests: the
// same corpus for pkg/skill's load benchmark and skillbus bench's registry figures.
package skillgen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the name of generated skill i.
func Name(i int) string { return fmt.Sprintf("skill-%05d", i) }

// Category is the directory holding generated skill i (categories of 100).
func Category(i int) string { return fmt.Sprintf("cat-%03d", i/100) }

// Generate writes n valid skills under root: in equal parts instruction skills
// with a reference, workflows (SKILL.md beside skill.yaml), script skills and
// single-file skills, in categories of 100, each depending on its predecessor in the
// category.
func Generate(root string, n int) error {
	write := func(p, text string) error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(text), 0o644)
	}
	for i := range n {
		name := Name(i)
		cat := filepath.Join(root, Category(i))
		deps := ""
		if i%100 > 0 {
			deps = fmt.Sprintf("dependencies: [%s]\n", Name(i-1))
		}
		front := fmt.Sprintf("---\nname: %s\ndescription: Generated skill number %d for the benchmarks.\nversion: 1.0.%d\n"+
			"triggers: [io.skillbus.bench.t%d]\ntags: [bench, generated]\n%s", name, i, i, i%50, deps)
		body := "# Instructions\n\nRead [the notes](references/notes.md), then do the work in three steps:\n\n" +
			"1. Gather the inputs.\n2. Do the thing.\n3. Report.\n\n```bash\necho done\n```\n"
		var err error
		switch i % 4 {
		case 0:
			err = errors.Join(
				write(filepath.Join(cat, name, "SKILL.md"), front+"---\n"+body),
				write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n\nSome notes.\n"))
		case 1:
			err = errors.Join(
				write(filepath.Join(cat, name, "SKILL.md"), front+"---\n"+body),
				write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n"),
				write(filepath.Join(cat, name, "skill.yaml"), benchWorkflow))
		case 2:
			err = errors.Join(
				write(filepath.Join(cat, name, "SKILL.md"), front+"entrypoints:\n  - name: default\n    command: scripts/run.sh\n---\n"+body),
				write(filepath.Join(cat, name, "references", "notes.md"), "# Notes\n"),
				write(filepath.Join(cat, name, "scripts", "run.sh"), "#!/bin/sh\necho run\n"))
		case 3:
			err = write(filepath.Join(cat, name+".md"), front+"---\nDo the work in three steps and report what you did, briefly.\n")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const benchWorkflow = `inputs:
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
`
