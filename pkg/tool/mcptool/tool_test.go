package mcptool_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/mcptool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

// transports connect the same test server in each way the worker can.
var transports = []struct {
	name   string
	server func(t *testing.T, started chan<- struct{}, release <-chan struct{}) mcptool.ServerConfig
}{
	{"in-memory", func(t *testing.T, started chan<- struct{}, release <-chan struct{}) mcptool.ServerConfig {
		return mcptool.ServerConfig{Transport: inMemory(t, testServer(started, release))}
	}},
	{"streamable-http", func(t *testing.T, started chan<- struct{}, release <-chan struct{}) mcptool.ServerConfig {
		hs := httpServer(t, testServer(started, release), "s3cret")
		return mcptool.ServerConfig{URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}
	}},
}

func TestConformance(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
				started, release := make(chan struct{}, 1), make(chan struct{})
				c := open(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"test": tr.server(t, started, release)}})
				// A cancelled call ends on the server when the cancellation
				// notice arrives, which the SDK sends on a goroutine of its own
				// and may not get to before the test closes the connection.
				t.Cleanup(func() { close(release) })
				mode := func(m any) *tool.Call { return &tool.Call{Args: map[string]any{"mode": m}} }
				return tooltest.Fixture{
					Tool: toolNamed(t, c, "modal"),
					OK:   *mode("ok"),
					CheckOK: func(t *testing.T, res any) {
						check(t, map[string]any{"n": int64(1), "f": 1.5, "l": []any{"x", nil}}, res)
					},
					Retryable: mode("retry"),
					Fatal:     mode("fatal"),
					BadArg:    mode(int64(5)), // the SDK's schema check rejects it
					Blocking:  mode("block"),
					Started:   func(t *testing.T) { <-started },
				}
			})
		})
	}
}

func check(t *testing.T, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResults(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := open(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"test": tr.server(t, nil, nil)}})
			tests := []struct {
				tool string
				call tool.Call
				want any
			}{
				{"greet", tool.Call{Args: map[string]any{"name": "Ada"}}, "Hello, Ada!"},
				{"stats", tool.Call{Args: map[string]any{"text": "a b"}}, map[string]any{"words": int64(2), "list": []any{"a", "b"}}},
				{"mixed", tool.Call{}, []any{
					"caption",
					map[string]any{"type": "image", "mime_type": "image/png", "data": "AQID"},
					map[string]any{"type": "resource", "uri": "file:///a.txt", "mime_type": "text/plain", "text": "hi"},
					map[string]any{"type": "resource_link", "uri": "file:///b", "name": "b"},
				}},
				{"meta", tool.Call{Args: map[string]any{"x": []any{int64(1), "é"}}, IdempotencyKey: "e1/s1"}, map[string]any{
					"args": map[string]any{"x": []any{int64(1), "é"}},
					"key":  "e1/s1",
				}},
				{"empty", tool.Call{}, nil},
			}
			for _, tt := range tests {
				t.Run(tt.tool, func(t *testing.T) {
					got, err := toolNamed(t, c, tt.tool).Call(t.Context(), tt.call)
					if err != nil {
						t.Fatal(err)
					}
					check(t, tt.want, got)
				})
			}
		})
	}
}

func TestErrors(t *testing.T) {
	srv := testServer(nil, nil)
	c := open(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"jira": {Transport: inMemory(t, srv)}}})
	fail := func(msg string) tool.Call { return tool.Call{Args: map[string]any{"message": msg}} }
	tests := []struct {
		name  string
		tool  string
		call  tool.Call
		class failure.Class
		msg   string
	}{
		{"not found", "fail", fail("issue AAP-1 not found"), failure.Fatal, "mcp: server jira: tool fail: issue AAP-1 not found"},
		{"permission", "fail", fail("Permission denied for project X"), failure.Fatal, "Permission denied"},
		{"parameter", "fail", fail("missing parameter issue_key"), failure.Repairable, "missing parameter issue_key"},
		{"transient", "fail", fail("upstream returned 503"), failure.Retryable, "upstream returned 503"},
		{"no message", "fail", fail(""), failure.Retryable, "failed without a message"},
		{"schema", "greet", tool.Call{Args: map[string]any{"name": int64(3)}}, failure.Repairable, `validating "arguments"`},
		{"not JSON-like", "greet", tool.Call{Args: map[string]any{"name": make(chan int)}}, failure.Repairable, `argument "name" is not a JSON value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toolNamed(t, c, tt.tool).Call(t.Context(), tt.call)
			if failure.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v (class %q), want a %s error containing %q", err, failure.ClassOf(err), tt.class, tt.msg)
			}
		})
	}

	// A tool the server no longer offers.
	greet := toolNamed(t, c, "greet")
	srv.RemoveTools("greet")
	_, err := greet.Call(t.Context(), tool.Call{Args: map[string]any{"name": "x"}})
	if failure.ClassOf(err) != failure.Fatal || !strings.Contains(err.Error(), "does not offer it") {
		t.Errorf("calling a removed tool: %v (class %q), want Fatal", err, failure.ClassOf(err))
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		msg  string
		want failure.Class
	}{
		{`validating "arguments": validating root: required: missing properties: ["name"]`, failure.Repairable},
		{`unmarshaling arguments: json: cannot unmarshal number into Go struct field`, failure.Repairable},
		{`Invalid arguments for tool greet`, failure.Repairable},
		{`MCP error -32602: Invalid params`, failure.Repairable},
		{`Input validation error: 'name' is a required property`, failure.Repairable},
		{`issue not found`, failure.Fatal},
		{`rate limited, try again`, failure.Retryable},
	}
	for _, tt := range tests {
		if got := mcptool.Classify(tt.msg); got != tt.want {
			t.Errorf("Classify(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestOpen(t *testing.T) {
	names := func(c *mcptool.Client) []string {
		var out []string
		for _, tl := range c.Tools() {
			out = append(out, tl.Server()+":"+tl.Name())
		}
		return out
	}
	t.Run("prefixes and filters", func(t *testing.T) {
		c := open(t, mcptool.Config{Prefix: "mcp_", Log: slog.New(slog.DiscardHandler), Servers: map[string]mcptool.ServerConfig{
			"a":   {Transport: inMemory(t, testServer(nil, nil)), Prefix: "a_", Tools: []string{"greet", "stats", "nope"}},
			"b":   {Transport: inMemory(t, testServer(nil, nil)), Tools: []string{"greet"}},
			"off": {Disabled: true, Command: "/does/not/exist"},
		}})
		check(t, []string{"a:mcp_a_greet", "a:mcp_a_stats", "b:mcp_greet"}, names(c))
		tl := toolNamed(t, c, "mcp_a_greet")
		if tl.MCPName() != "greet" || tl.Description() != "Greets someone." {
			t.Errorf("tool %s: MCP name %q, description %q", tl.Name(), tl.MCPName(), tl.Description())
		}
		// A tool annotated readOnlyHint only reads; the others are taken to act.
		if tool.IsReadOnly(tl, tool.Call{}) || !tool.IsReadOnly(toolNamed(t, c, "mcp_a_stats"), tool.Call{}) {
			t.Errorf("read-only: greet %v, stats %v; want false, true (stats is annotated readOnlyHint)",
				tool.IsReadOnly(tl, tool.Call{}), tool.IsReadOnly(toolNamed(t, c, "mcp_a_stats"), tool.Call{}))
		}
		props, _ := tl.InputSchema()["properties"].(map[string]any)
		if props["name"] == nil {
			t.Errorf("schema %v has no name property", tl.InputSchema())
		}
		if _, err := tool.NewSet(toolsOf(c)...); err != nil {
			t.Errorf("the tools do not make a set: %v", err)
		}
	})
	t.Run("name clash", func(t *testing.T) {
		_, err := mcptool.Open(t.Context(), mcptool.Config{Servers: map[string]mcptool.ServerConfig{
			"a": {Transport: inMemory(t, testServer(nil, nil))},
			"b": {Transport: inMemory(t, testServer(nil, nil))},
		}})
		if err == nil || !strings.Contains(err.Error(), "tool name block is both server a's tool block and server b's tool block; give the servers a prefix") {
			t.Errorf("Open = %v, want a name clash", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		hs := httpServer(t, testServer(nil, nil), "right")
		_, err := mcptool.Open(t.Context(), mcptool.Config{Servers: map[string]mcptool.ServerConfig{
			"search": {URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer wrong"}, Timeout: mcptool.Duration(5 * time.Second)},
		}})
		if err == nil || !strings.Contains(err.Error(), "mcp: server search: connecting") {
			t.Errorf("Open = %v, want a connection error naming the server", err)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		_, err := mcptool.Open(t.Context(), mcptool.Config{Servers: map[string]mcptool.ServerConfig{"x": {}}})
		if err == nil || !strings.Contains(err.Error(), "server x: give a command") {
			t.Errorf("Open = %v", err)
		}
	})
}

func TestClosed(t *testing.T) {
	c, err := mcptool.Open(t.Context(), mcptool.Config{Servers: map[string]mcptool.ServerConfig{"a": {Transport: inMemory(t, testServer(nil, nil))}}})
	if err != nil {
		t.Fatal(err)
	}
	greet := toolNamed(t, c, "greet")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err = greet.Call(t.Context(), tool.Call{Args: map[string]any{"name": "x"}})
	if failure.ClassOf(err) != failure.Retryable || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a call after Close: %v", err)
	}
}

func toolsOf(c *mcptool.Client) []tool.Tool {
	var out []tool.Tool
	for _, tl := range c.Tools() {
		out = append(out, tl)
	}
	return out
}
