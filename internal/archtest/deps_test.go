package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// core are the packages that parse, validate, route and evaluate: plain Go that
// builds and tests without the messaging plumbing. Tracing reaches them through
// package telemetry, which holds no NATS either; the bus's side of it is in
// pkg/bus/bustrace.
var core = []string{
	"github.com/skillbus/skillbus/pkg/workflow",
	"github.com/skillbus/skillbus/pkg/selector",
	"github.com/skillbus/skillbus/pkg/skill",
	"github.com/skillbus/skillbus/pkg/expr",
	"github.com/skillbus/skillbus/pkg/tool",
	"github.com/skillbus/skillbus/pkg/telemetry",
}

// plumbing are the import path parts none of core may depend on.
var plumbing = []string{"nats-io", "cloudevents"}

// TestCoreImportsNoPlumbing fails when a core package depends, directly or not,
// on NATS or the CloudEvents SDK.
func TestCoreImportsNoPlumbing(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}\t{{.Module}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .Imports \" \"}}"}, core...)
	out, err := exec.Command(gobin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		deps++
		pkg, mod, dir := f[0], f[1], f[2]
		if strings.HasPrefix(mod, "github.com/skillbus/skillbus") {
			// The test cache does not know what go list read: looking at the
			// module's own files makes it run again when one of them changes.
			for name := range strings.FieldsSeq(f[3]) {
				os.Stat(filepath.Join(dir, name))
			}
		}
		for imp := range strings.FieldsSeq(f[4]) {
			for _, p := range plumbing {
				if strings.Contains(imp, p) && !strings.Contains(pkg, p) { // name where it comes in
					t.Errorf("a core package depends on %s: %s imports %s", p, pkg, imp)
				}
			}
		}
	}
	t.Logf("%d packages in the core's dependency graph", deps)
}
