package skill

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// fixtures is the shared fixture tree (testdata/skills-fixtures at the module root).
const fixtures = "../../testdata/skills-fixtures"

func fixture(parts ...string) string {
	return filepath.Join(append([]string{fixtures}, parts...)...)
}

// diag is a diagnostic as golden tests state it: where, how bad, and a substring of
// the message.
type diag struct {
	Pos string // file:line:col relative to the fixtures, or file alone
	Sev Severity
	Msg string
}

func (d diag) String() string { return fmt.Sprintf("%s: %s: %s", d.Pos, d.Sev, d.Msg) }

// project turns diagnostics into diags comparable with want: positions relative to
// base, and each message replaced by want's substring when it contains it, so that
// cmp.Diff shows only real differences.
func project(ds Diagnostics, base string, want []diag) []diag {
	got := make([]diag, len(ds))
	for i, d := range ds {
		file := filepath.ToSlash(d.File)
		if rel, err := filepath.Rel(base, d.File); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.ToSlash(rel)
		}
		pos := file
		if d.Line > 0 {
			pos = fmt.Sprintf("%s:%d", pos, d.Line)
			if d.Col > 0 {
				pos = fmt.Sprintf("%s:%d", pos, d.Col)
			}
		}
		got[i] = diag{Pos: pos, Sev: d.Severity, Msg: d.Message}
		if i < len(want) && want[i].Msg != "" && strings.Contains(d.Message, want[i].Msg) {
			got[i].Msg = want[i].Msg
		}
	}
	return got
}

// checkFiles asserts that every diagnostic names a file and a plausible position.
func checkFiles(t testing.TB, ds Diagnostics) {
	t.Helper()
	for _, d := range ds {
		if d.File == "" {
			t.Errorf("diagnostic without a file: %v", d)
		}
		if d.Line < 0 || d.Col < 0 || d.Line == 0 && d.Col != 0 {
			t.Errorf("diagnostic with a bad position: %v", d)
		}
		if d.Severity != SeverityError && d.Severity != SeverityWarning {
			t.Errorf("diagnostic with severity %q: %v", d.Severity, d)
		}
		if d.Message == "" {
			t.Errorf("diagnostic without a message: %v", d)
		}
	}
}
