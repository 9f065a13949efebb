package mcptool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/skillbus/skillbus/pkg/tool/mcptool"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"HOME": "/home/w", "TOKEN": "t0k", "PATH": "/usr/bin:/bin"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name string
		json string
		want mcptool.Config
		err  string
	}{
		{
			name: "claude desktop file",
			json: `{"mcpServers": {
				"jira": {"command": "npx", "args": ["-y", "mcp-jira", "--home=${HOME}"], "env": {"JIRA_TOKEN": "${TOKEN}", "PATH": "${PATH}"}, "prefix": "jira_", "timeout": "30s"},
				"search": {"type": "streamable-http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}, "tools": ["web_search"], "timeout": 5},
				"old": {"command": "x", "env": {"A": "${UNSET}"}, "disabled": true}
			}, "prefix": "mcp_"}`,
			want: mcptool.Config{Prefix: "mcp_", Servers: map[string]mcptool.ServerConfig{
				"jira": {Command: "npx", Args: []string{"-y", "mcp-jira", "--home=/home/w"},
					Env: map[string]string{"JIRA_TOKEN": "t0k", "PATH": "/usr/bin:/bin"}, Prefix: "jira_", Timeout: mcptool.Duration(30 * time.Second)},
				"search": {Type: "streamable-http", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"},
					Tools: []string{"web_search"}, Timeout: mcptool.Duration(5 * time.Second)},
				"old": {Command: "x", Env: map[string]string{"A": "${UNSET}"}, Disabled: true},
			}},
		},
		{name: "dollars", json: `{"mcpServers": {"a": {"command": "x", "args": ["$$HOME", "$HOME", "a$$b"]}}}`,
			want: mcptool.Config{Servers: map[string]mcptool.ServerConfig{"a": {Command: "x", Args: []string{"$HOME", "$HOME", "a$b"}}}}},
		{name: "empty", json: `{}`, want: mcptool.Config{}},
		{name: "unset variable", json: `{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}}}}`, err: "server a: env.K uses ${NOPE}, which is not set"},
		{name: "unknown field", json: `{"mcpServers": {"a": {"comand": "x"}}}`, err: `unknown field "comand"`},
		{name: "neither", json: `{"mcpServers": {"a": {}}}`, err: "server a: give a command (stdio) or a url"},
		{name: "both", json: `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, err: "not both"},
		{name: "bad url", json: `{"mcpServers": {"a": {"url": "ftp://h"}}}`, err: "url must be an http or https URL"},
		{name: "bad type", json: `{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}`, err: `type "sse": want stdio or http`},
		{name: "stdio without command", json: `{"mcpServers": {"a": {"type": "stdio", "url": "http://h"}}}`, err: "needs a command"},
		{name: "bad timeout", json: `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`, err: "duration"},
		{name: "bad env name", json: `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "c"}}}}`, err: `invalid name "A=B"`},
		{name: "spaces in a prefix", json: `{"prefix": "a b", "mcpServers": {}}`, err: "white space"},
		{name: "trailing", json: `{} {}`, err: "trailing data"},
		{name: "not JSON", json: `mcpServers:`, err: "mcp config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mcptool.ParseConfig([]byte(tt.json), getenv)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("ParseConfig = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(mcptool.ServerConfig{}, "Transport")); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"url": "${URL}"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcptool.LoadConfig(path, func(string) string { return "http://h/mcp" })
	if err != nil || cfg.Servers["a"].URL != "http://h/mcp" {
		t.Errorf("LoadConfig = %+v, %v", cfg, err)
	}
	_, err = mcptool.LoadConfig(path, nil)
	if err == nil || !strings.Contains(err.Error(), path+": mcp config: server a: url uses ${URL}") {
		t.Errorf("LoadConfig without the variable = %v", err)
	}
	if _, err := mcptool.LoadConfig(filepath.Join(t.TempDir(), "missing.json"), nil); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers": {"a": {"command": "x", "args": ["${A}"], "env": {"B": "$$${A}"}}}}`,
		`{"prefix": "p_", "mcpServers": {"b": {"url": "https://h/mcp", "headers": {"X": "${A}"}, "timeout": 1.5}}}`,
		`{"mcpServers": {"c": {"type": "http", "url": "http://[::1]:80/x", "tools": ["a"], "disabled": false}}}`,
		`{"mcpServers": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := mcptool.ParseConfig(data, func(k string) string {
			if k == "A" {
				return "value"
			}
			return ""
		})
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that Validate rejects: %v", err)
		}
	})
}
