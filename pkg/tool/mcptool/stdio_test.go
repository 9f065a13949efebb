package mcptool_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/mcptool"
)

func TestStdio(t *testing.T) {
	dir := t.TempDir()
	c := open(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"local": {Command: serverBinary, Env: map[string]string{"GREETING": "hi", "EMPTY": ""}, Dir: dir},
	}})
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Name())
	}
	check(t, []string{"crash", "env", "greet"}, names)

	t.Run("greet", func(t *testing.T) {
		res, err := toolNamed(t, c, "greet").Call(t.Context(), tool.Call{Args: map[string]any{"name": "Ada"}})
		if err != nil || res != "Hello, Ada!" {
			t.Errorf("greet = %v, %v", res, err)
		}
	})

	// The server sees exactly the configured environment: none of the
	// worker's, which holds its credentials.
	t.Setenv("WORKER_SECRET", "do-not-leak")
	res, err := toolNamed(t, c, "env").Call(t.Context(), tool.Call{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.(map[string]any)
	check(t, []any{"EMPTY=", "GREETING=hi"}, m["env"])
	if m["wd"] != dir {
		t.Errorf("working directory %v, want %s", m["wd"], dir)
	}
	pid := m["pid"]

	// The server dies during a call: Retryable, with what it said on stderr;
	// the next call starts it again.
	_, err = toolNamed(t, c, "crash").Call(t.Context(), tool.Call{})
	if failure.ClassOf(err) != failure.Retryable {
		t.Errorf("a crashing server gave %v (class %q), want Retryable", err, failure.ClassOf(err))
	}
	if err != nil && !strings.Contains(err.Error(), "crashing on purpose") {
		t.Errorf("the error %q does not show the server's stderr", err)
	}
	res, err = toolNamed(t, c, "env").Call(t.Context(), tool.Call{})
	if err != nil {
		t.Fatalf("calling after the crash: %v", err)
	}
	if res.(map[string]any)["pid"] == pid {
		t.Error("the server was not restarted")
	}
}

func TestStdioStartFails(t *testing.T) {
	tests := []struct {
		name string
		cfg  mcptool.ServerConfig
		msg  []string
	}{
		{"exits at once", mcptool.ServerConfig{Command: serverBinary, Env: map[string]string{"MCPSERVER_FAIL": "1"}},
			[]string{"mcp: server local: connecting", "refusing to start: MCPSERVER_FAIL is set"}},
		{"not found", mcptool.ServerConfig{Command: "no-such-mcp-server-xyz"},
			[]string{"mcp: server local: command no-such-mcp-server-xyz"}},
		{"not in the server's PATH", mcptool.ServerConfig{Command: "sh", Env: map[string]string{"PATH": "/nonexistent"}},
			[]string{`command sh is not in the server's PATH "/nonexistent"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mcptool.Open(t.Context(), mcptool.Config{Servers: map[string]mcptool.ServerConfig{"local": tt.cfg}})
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}
