package natsperm_test

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/natsperm"
)

var update = flag.Bool("update", false, "rewrite the files generated from the roles")

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Markers around the generated table in docs/operations.md.
const (
	beginTable = "<!-- BEGIN nats-users -->\n"
	endTable   = "<!-- END nats-users -->"
)

// TestGenerated fails when a file generated from the roles differs from what the
// roles generate now; `go generate ./internal/natsperm` rewrites them.
func TestGenerated(t *testing.T) {
	roles := natsperm.Roles("skillbus")
	files := map[string]func(old string) (string, error){
		"deploy/base/nats-accounts.conf":     func(string) (string, error) { return natsperm.Accounts(roles), nil },
		"deploy/nats/nats-accounts.conf":     func(string) (string, error) { return natsperm.Accounts(roles), nil },
		"deploy/overlays/dev/nats-users.env": func(string) (string, error) { return natsperm.DevSecret(roles), nil },
		"docs/operations.md": func(old string) (string, error) {
			i, j := strings.Index(old, beginTable), strings.Index(old, endTable)
			if i < 0 || j < i {
				t.Fatalf("docs/operations.md lacks the markers %q and %q", beginTable, endTable)
			}
			return old[:i+len(beginTable)] + natsperm.Markdown(roles) + old[j:], nil
		},
	}
	for name, gen := range files {
		path := filepath.Join(repoRoot(), name)
		old, err := os.ReadFile(path)
		if err != nil && !(*update && os.IsNotExist(err)) {
			t.Fatal(err)
		}
		want, _ := gen(string(old))
		if string(old) == want {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is out of date with internal/natsperm: run `go generate ./internal/natsperm`", name)
	}
}
