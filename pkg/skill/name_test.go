package skill

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		valid   bool
		suggest string
	}{
		{"start_work", true, "start_work"},
		{"error-analyzer", true, "error-analyzer"},
		{"a", true, "a"},
		{"7zip", true, "7zip"},
		{"x-1_y", true, "x-1_y"},
		{"", false, ""},
		{"Start_Work", false, "start_work"},
		{"Weather Report!", false, "weather-report"},
		{"-lead", false, "lead"},
		{"trail_", false, "trail"},
		{"dou--ble", false, "dou-ble"},
		{"mix-_ed", false, "mix-ed"},
		{"café au lait", false, "caf-au-lait"},
		{"名前", false, ""},
		{string(make([]byte, 65)), false, ""},
		{"abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij", false, "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghi"},
	}
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.valid {
			t.Errorf("ValidName(%q) = %v", tt.name, got)
		}
		got := suggestName(tt.name)
		if got != tt.suggest {
			t.Errorf("suggestName(%q) = %q, want %q", tt.name, got, tt.suggest)
		}
		if got != "" && !ValidName(got) {
			t.Errorf("suggestName(%q) = %q is not valid", tt.name, got)
		}
	}
	if NormalizeName("Start_Work") != "start-work" || NormalizeName("fix-build") != NormalizeName("fix_build") {
		t.Error("NormalizeName")
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	keys := []string{"triggers", "anti_triggers", "max_retries", "timeout", "timeout_ms", "tags"}
	for in, want := range map[string]string{
		"trigers":       "triggers",
		"anti-triggers": "anti_triggers",
		"Max-Retries":   "max_retries",
		"timout":        "timeout",
		"tgas":          "tags",
		"colour":        "",
		"x":             "",
	} {
		if got := closest(in, keys); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := closest("get_isue", []string{"inputs", "get_issue", "issue_data"}); got != "get_issue" {
		t.Errorf("closest(get_isue) = %q", got)
	}
}

func TestUnclosedFence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want int
	}{
		{"", 0},
		{"```\ncode\n```\n", 0},
		{"```go\ncode\n", 10},
		{"text\n~~~\n```\n~~~\n", 0},
		{"````\n```\n````\n", 0},
		{"````\n```\n", 10},
		{"```\n~~~\n", 10},
		{"inline ```code``` is not a fence\n", 0},
		{"```python\nx\n```   \n", 0},
		{"```\nx\n``` not a close\n", 10},
		{"  ```\n  indented\n  ```\n", 0},
		{"``\nnot a fence\n", 0},
	}
	for _, tt := range tests {
		if got := unclosedFence(tt.body, 10); got != tt.want {
			t.Errorf("unclosedFence(%q) = %d, want %d", tt.body, got, tt.want)
		}
	}
}

func TestSplitTools(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"Read Write":                     {"Read", "Write"},
		"Bash(git add:*), Read,Grep":     {"Bash(git add:*)", "Read", "Grep"},
		"  ":                             nil,
		"Bash(jq:*) Bash(git:*)\tRead\n": {"Bash(jq:*)", "Bash(git:*)", "Read"},
	} {
		if diff := cmp.Diff(want, splitTools(in)); diff != "" {
			t.Errorf("splitTools(%q) (-want +got):\n%s", in, diff)
		}
	}
	if toolName("Bash(git:*)") != "Bash" || toolName("read") != "read" {
		t.Error("toolName")
	}
}

func TestEntrypointScript(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cmd     []string
		script  string
		problem bool
	}{
		{[]string{"scripts/run.sh"}, "scripts/run.sh", false},
		{[]string{"./run.sh", "--fast"}, "./run.sh", false},
		{[]string{"python3", "-u", "scripts/x.py", "arg"}, "scripts/x.py", false},
		{[]string{"run.py"}, "run.py", false},
		{[]string{"/bin/sh", "x.sh"}, "/bin/sh", true},
		{[]string{"bash", "../x.sh"}, "../x.sh", true},
		{[]string{"bash", "~/x.sh"}, "~/x.sh", true},
		{[]string{"make"}, "", true},
		{[]string{"scripts/../../x"}, "scripts/../../x", true},
	} {
		if got := entrypointScript(tt.cmd); got != tt.script {
			t.Errorf("entrypointScript(%q) = %q, want %q", tt.cmd, got, tt.script)
		}
		if p, _ := entrypointProblem(tt.cmd); (p != "") != tt.problem {
			t.Errorf("entrypointProblem(%q) = %q", tt.cmd, p)
		}
	}
}

func TestDiagnosticString(t *testing.T) {
	t.Parallel()
	d := Diagnostic{File: "skills/a/SKILL.md", Line: 3, Col: 7, Severity: SeverityError, Field: "name",
		Message: "name must be lowercase", Hint: "write a"}
	if got, want := d.String(), "skills/a/SKILL.md:3:7: error: name must be lowercase (hint: write a)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	d = Diagnostic{File: "x.yaml", Severity: SeverityWarning, Message: "m"}
	if got := d.String(); got != "x.yaml: warning: m" {
		t.Errorf("got %q", got)
	}
	ds := Diagnostics{d}
	if ds.HasErrors() || ds.Err() != nil {
		t.Error("warnings are not errors")
	}
	ds = append(ds, Diagnostic{File: "a", Line: 1, Severity: SeverityError, Message: "bad"})
	err := ds.Err()
	if err == nil || err.Error() != "a:1: error: bad" || !errors.Is(err, ErrInvalid) {
		t.Errorf("Err() = %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"30": "30s", "1.5": "1.5s", "1m30s": "1m30s", " 2m ": "2m0s"} {
		d, err := ParseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, d, err)
		}
	}
	for _, in := range []string{"-1", "soon", "", "-1s"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", in)
		}
	}
}
