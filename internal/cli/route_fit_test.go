package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// route fit warns when no case expects no skill: without such requests nothing
// holds the threshold up.
func TestRouteFitWarnsWithoutOffTopicCases(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/phrasestyle/skills"
	tmp := t.TempDir()
	in := filepath.Join(tmp, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"query":"please review this code","expect":"code_review"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const warning = `no case expects no skill ("expect": null)`
	got, code := run(t, "route", "fit", "--skills", dir, "--cases", in, "--out", filepath.Join(tmp, "a.yaml"))
	if code != 0 || !strings.Contains(got, warning) {
		t.Fatalf("fit without off-topic cases: exit %d, want a warning: %s", code, got)
	}
	got, code = run(t, "route", "fit", "--skills", dir, "--cases", "../../testdata/routing/phrasestyle/cases.jsonl", "--out", filepath.Join(tmp, "b.yaml"))
	if code != 0 || strings.Contains(got, warning) {
		t.Fatalf("fit with off-topic cases: exit %d, want no warning: %s", code, got)
	}
}
