package tool_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

func TestCheckPrerequisites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tools, _ := tool.NewSet(tool.Echo())
	env := map[string]string{"GITHUB_TOKEN": "t", "EMPTY": ""}
	host := tool.Host{
		Tools:     tools,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	}
	pr := func(kind skill.PrerequisiteKind, name string) skill.Prerequisite {
		return skill.Prerequisite{Kind: kind, Name: name}
	}
	for _, tc := range []struct {
		name string
		prs  []skill.Prerequisite
		want string // "" for no error
	}{
		{"none", nil, ""},
		{"all met", []skill.Prerequisite{
			pr(skill.PrerequisiteEnv, "GITHUB_TOKEN"), pr(skill.PrerequisiteCommand, "sh"),
			pr(skill.PrerequisiteCommand, "/bin/sh"), pr(skill.PrerequisiteTool, "echo"), pr(skill.PrerequisiteFile, file),
		}, ""},
		{"all unmet", []skill.Prerequisite{
			{Kind: skill.PrerequisiteEnv, Name: "JIRA_TOKEN", Description: "to read issues"},
			pr(skill.PrerequisiteEnv, "EMPTY"),
			pr(skill.PrerequisiteCommand, "no-such-command"),
			pr(skill.PrerequisiteCommand, "bin/sh"),
			pr(skill.PrerequisiteTool, "github"),
			pr(skill.PrerequisiteFile, filepath.Join(dir, "missing")),
		}, "skill s cannot run on this worker: prerequisites not met: " +
			"env JIRA_TOKEN is not set on this worker (needed to read issues); " +
			"env EMPTY is not set on this worker; " +
			"command no-such-command is not found in the PATH exec steps get (/usr/local/bin:/usr/bin:/bin); " +
			"command bin/sh is a relative path; name a command or give an absolute path; " +
			"tool github is not a tool of this worker (it has: echo); " +
			"file " + filepath.Join(dir, "missing") + " is not there: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tool.CheckPrerequisites(&skill.Skill{Name: "s", Prerequisites: tc.prs}, host)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n %v\nwant\n %s", err, tc.want)
			}
			if !errors.Is(err, tool.ErrPrerequisites) || failure.ClassOf(err) != failure.Fatal {
				t.Errorf("error %v is not a fatal ErrPrerequisites", err)
			}
		})
	}
	// The command is looked for where exec steps look.
	err := tool.CheckPrerequisites(&skill.Skill{Name: "s", Prerequisites: []skill.Prerequisite{pr(skill.PrerequisiteCommand, "sh")}},
		tool.Host{Exec: tool.ExecConfig{BaseEnv: []string{"PATH=" + dir}}})
	if !errors.Is(err, tool.ErrPrerequisites) {
		t.Errorf("sh outside the exec PATH: error %v", err)
	}
}
