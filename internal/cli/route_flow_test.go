package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// route --explain shows each filter's verdict on the request, and a skill whose
// filter is false joins no plan.
func TestRouteExplainsFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "big-orders"), 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: big-orders\ndescription: Reviews large orders before they ship.\ntriggers: [com.example.order]\nfilter: data.amount > 100\n---\nReview the order and flag anything unusual about it before it ships.\n"
	if err := os.WriteFile(filepath.Join(dir, "big-orders", "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "route", "--skills", dir, "--explain", "--type", "com.example.order", "--data", `{"amount": 250}`)
	if code != 0 || !strings.Contains(out, "primary:   big-orders") || !strings.Contains(out, "filter true") {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, code = run(t, "route", "--skills", dir, "--explain", "--type", "com.example.order", "--data", `{"amount": 5}`)
	// The headline says what kept the skill out, not that nothing scored enough.
	if code != 3 || !strings.Contains(out, "no plan: big-orders scores") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "but is kept out: trigger com.example.order; filter false: data.amount > 100") {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, code = run(t, "route", "--skills", dir, "--explain", "--type", "com.example.order", "--data", `{"total": 5}`)
	if code != 3 || !strings.Contains(out, "filter error: no such key: amount") {
		t.Fatalf("exit %d: %s", code, out)
	}
	// skills validate names a bad filter at its file:line:col.
	if err := os.WriteFile(filepath.Join(dir, "big-orders", "SKILL.md"), []byte(strings.Replace(md, "data.amount > 100", "data.amount >", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, "skills", "validate", dir)
	if code == 0 || !strings.Contains(out, "big-orders/SKILL.md:5:22: error: filter is not a valid expression: Syntax error") {
		t.Fatalf("exit %d: %s", code, out)
	}
}
