package natsperm_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/skillbus/skillbus/internal/natsperm"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestGenerated fails when a file generated from the roles differs from what the
// roles generate now; `go generate ./internal/natsperm` rewrites them.
func TestGenerated(t *testing.T) {
	files := natsperm.Generated(natsperm.Roles("skillbus"))
	for name, gen := range files {
		old, err := os.ReadFile(filepath.Join(repoRoot(), name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := gen(string(old))
		if err != nil {
			t.Fatal(err)
		}
		if string(old) != want {
			t.Errorf("%s is out of date with internal/natsperm: run `go generate ./internal/natsperm`", name)
		}
	}
}
