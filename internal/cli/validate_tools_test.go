package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// `tool: htp` passes an offline validate with a warning naming http, at its line; given the
// fleet's tools, it is an error.
func TestValidateWarnsOfAMisspeltTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "typo"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := "name: typo\ndescription: calls a misspelt tool\nsteps:\n  - id: get\n    tool: htp\n    args:\n      url: https://example.com\n  - id: say\n    tool: my_bus_tool\n"
	if err := os.WriteFile(filepath.Join(dir, "typo", "skill.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &natstest.Buffer{}
	if err := cli.Skillbus(context.Background(), []string{"skills", "validate", dir}, noEnv, out, out); err != nil {
		t.Fatalf("offline: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "typo/skill.yaml:5:11: warning: tool htp is not a built-in tool; did you mean http?") || strings.Contains(out.String(), "my_bus_tool") {
		t.Errorf("offline: want a warning for htp alone:\n%s", out)
	}
	out = &natstest.Buffer{}
	err := cli.Skillbus(context.Background(), []string{"skills", "validate", dir, "--known-tools", "http,exec,echo,my_bus_tool"}, noEnv, out, out)
	if err == nil || !strings.Contains(out.String(), "unknown tool htp (hint: did you mean http?)") {
		t.Errorf("with the fleet's tools: %v\n%s", err, out)
	}
}
