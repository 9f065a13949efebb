package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// skills ramp refuses a bad percent or digest with the reason, ramps to a kept
// version, and skills rollback ends the ramp in one command.
func TestSkillsRampAndRollback(t *testing.T) {
	t.Parallel()
	url, reg, dir := catalogServer(t, false)
	run := func(args ...string) (string, error) {
		return skillbus(t, append(args, "--nats-url", url)...)
	}
	out, err := run("skills", "show", "hello", "--json")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, out)
	}
	first := digestIn(t, out)
	// A second version makes the first an old, kept one.
	p := filepath.Join(dir, "hello", "SKILL.md")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, "\nOne more line.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"hello", first[:12], "110"}, `percent "110"`},
		{[]string{"hello", "zz", "10"}, "at least 8 characters"},
		{[]string{"hello", "deadbeefdead", "10"}, "no such version"},
		{[]string{"nobody", first[:12], "10"}, "not in the catalog"},
	} {
		out, err := run(append([]string{"skills", "ramp"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error()+out, tt.says) {
			t.Errorf("ramp %v: %v\n%s; want an error saying %q", tt.args, err, out, tt.says)
		}
	}
	out, err = run("skills", "ramp", "hello", first[:12], "10")
	if err != nil || !strings.Contains(out, "ramped hello: 10% of new runs to version") || !strings.Contains(out, first) {
		t.Fatalf("ramp: %v\n%s", err, out)
	}
	out, err = run("skills", "rollback", "hello")
	if err != nil || !strings.Contains(out, "rolled back hello") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	out, err = run("skills", "rollback", "hello")
	if err != nil || !strings.Contains(out, "hello has no ramp") {
		t.Fatalf("second rollback: %v\n%s", err, out)
	}
}

// digestIn finds the first "digest" value in JSON output.
func digestIn(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, `"digest": "`)
	if !ok {
		t.Fatalf("no digest in\n%s", out)
	}
	d, _, _ := strings.Cut(rest, `"`)
	return d
}
