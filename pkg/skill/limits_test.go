package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPermissionLimits(t *testing.T) {
	t.Parallel()
	const head = "name: lim\ndescription: Limits.\nsteps:\n  - id: a\n    tool: noop\npermissions:\n  limits:\n"
	s, ds := ParseWorkflow("skill.yaml", []byte(head+"    processes: 64\n    open_files: 256\n    cpu: 2m\n    memory: 512MiB\n    output: 65536\n"))
	if len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	want := LimitPermissions{Processes: 64, OpenFiles: 256, CPU: Duration(2 * time.Minute), Memory: 512 << 20, Output: 65536}
	if diff := cmp.Diff(want, s.Permissions.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"    processes: 0\n", "permissions.limits.processes must be at least 1, not 0"},
		{"    open_files: many\n", "permissions.limits.open_files must be an integer"},
		{"    cpu: 1.5\n", "permissions.limits.cpu must be whole seconds, at least 1s, not 1.5s"},
		{"    memory: 12XB\n", `permissions.limits.memory: size "12XB": want bytes (1048576) or a number with a unit (512MiB, 2GB)`},
		{"    output: -1\n", `permissions.limits.output: size "-1" is negative`},
		{"    output: 0\n", "permissions.limits.output must be at least 1 byte, not 0"},
		{"    memroy: 1GiB\n", "unknown field permissions.limits.memroy; it is ignored"},
		{"    - 1\n", "permissions.limits must be a mapping"},
	} {
		_, ds := ParseWorkflow("skill.yaml", []byte(head+tc.yaml))
		if len(ds) != 1 || !strings.Contains(ds[0].Message, tc.want) {
			t.Errorf("%q: diagnostics %v, want one saying %q", tc.yaml, ds, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "1.5GiB": 3 << 29, "2GB": 2e9, "64 KiB": 64 << 10, "10B": 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1 XB", "-1", "1e30", "NaN"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}
