package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/gateway"
)

func TestLoadHooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "hooks.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(k string) string { return map[string]string{"GH_SECRET": "s3cret"}[k] }
	hooks, err := gateway.LoadHooks(write("hooks:\n  github:\n    type_prefix: com.github.\n    type_header: X-GitHub-Event\n    id_header: X-GitHub-Delivery\n    secret_env: GH_SECRET\n"), env)
	if err != nil || hooks["github"].Secret != "s3cret" || hooks["github"].TypeHeader != "X-GitHub-Event" {
		t.Fatalf("%+v %v", hooks, err)
	}
	for text, want := range map[string]string{
		"hooks:\n  github:\n    secret_evn: GH_SECRET\n":  "secret_evn",
		"hooks:\n  github:\n    secret_env: NOPE\n":       "$NOPE is empty",
		"hooks:\n  git.hub: {}\n":                         "hook name",
		"hooks:\n  x:\n    skill: a.b\n":                  "skill",
		"hooks: [\n":                                      "hooks.yaml",
		"hooks:\n  x:\n    replay_window: soon\n":         "replay_window",
		"hooks:\n  x:\n    replay_window: 100ms\n":        "at least 1s",
		"hooks:\n  x:\n    source: /skillbus/scheduler\n": "are skillbus's own",
		"hooks:\n  x:\n    type_prefix: skill.\n":         "types beginning skill. are reserved",
	} {
		if _, err := gateway.LoadHooks(write(text), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", text, err, want)
		}
	}
}
