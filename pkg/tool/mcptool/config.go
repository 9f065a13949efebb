package mcptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is a worker's MCP configuration: the servers whose tools it offers.
// Its JSON form is the "mcpServers" file that Claude Desktop, Cursor and most
// MCP clients read, with a few fields of skillbus's own (see ParseConfig).
type Config struct {
	// Prefix is put before the name of every MCP tool ("mcp_"), before the
	// server's own prefix. Default none.
	Prefix string `json:"prefix,omitempty"`
	// Servers by name. The name appears in errors and logs.
	Servers map[string]ServerConfig `json:"mcpServers"`

	// HTTPClient sends the requests of streamable HTTP servers; wrap its
	// Transport for tracing. Nil: a client of its own.
	HTTPClient *http.Client `json:"-"`
	// Log receives connection events and the stderr of stdio servers.
	// Default slog.Default().
	Log *slog.Logger `json:"-"`
}

// ServerConfig is one MCP server: a command to run (stdio) or a URL
// (streamable HTTP).
type ServerConfig struct {
	// Type is "stdio" or "http" ("streamable-http" and "streamableHttp" are
	// accepted too); "" infers it: stdio with Command, http with URL.
	Type string `json:"type,omitempty"`

	// Command and Args start a stdio server, without a shell.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is the server process's whole environment: nothing of the worker's
	// own is passed, since it holds the worker's credentials. Give what the
	// server needs, such as "PATH": "${PATH}" or "GITHUB_TOKEN": "${GITHUB_TOKEN}".
	Env map[string]string `json:"env,omitempty"`
	// Dir is the server process's working directory; "" is the worker's.
	Dir string `json:"cwd,omitempty"`

	// URL is the endpoint of a streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to it, such as Authorization.
	Headers map[string]string `json:"headers,omitempty"`

	// Prefix is put before the names of this server's tools ("jira_" makes
	// view_issue jira_view_issue), after Config.Prefix.
	Prefix string `json:"prefix,omitempty"`
	// Tools, if not empty, are the only tools of the server offered (by their
	// MCP names).
	Tools []string `json:"tools,omitempty"`
	// Timeout bounds a call whose context has no deadline, and connecting.
	// Default 60s.
	Timeout Duration `json:"timeout,omitempty"`
	// Disabled servers are left out.
	Disabled bool `json:"disabled,omitempty"`

	// Transport, if set, connects to the server instead of Command or URL: an
	// in-process server (mcp.NewInMemoryTransports) or a custom transport. It
	// is called for each connection, so it must return a fresh transport.
	Transport func() mcp.Transport `json:"-"`
}

// DefaultTimeout bounds calls without a deadline, and connecting.
const DefaultTimeout = 60 * time.Second

// Duration is a time.Duration written in JSON as a Go duration string ("30s")
// or a number of seconds.
type Duration time.Duration

// UnmarshalJSON reads "1m30s" or 90.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		if f < 0 {
			return fmt.Errorf("duration %v is negative", f)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"30s\" or a number of seconds, got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a positive Go duration such as \"30s\"", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadConfig reads a config file (see ParseConfig).
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	cfg, err := ParseConfig(data, getenv)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig reads a JSON config:
//
//	{
//	  "prefix": "",
//	  "mcpServers": {
//	    "jira": {
//	      "command": "npx", "args": ["-y", "mcp-jira"],
//	      "env": {"PATH": "${PATH}", "JIRA_TOKEN": "${JIRA_TOKEN}"},
//	      "prefix": "jira_", "timeout": "30s"
//	    },
//	    "search": {
//	      "url": "https://mcp.example.com/mcp",
//	      "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
//	      "tools": ["web_search"]
//	    }
//	  }
//	}
//
// ${NAME} in command, args, env, url and headers is replaced by getenv(NAME),
// so secrets stay out of the file; a variable that is not set is an error ($$
// writes a $). Unknown fields are errors, so a misspelt one is not ignored.
func ParseConfig(data []byte, getenv func(string) string) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("mcp config: %v", err)
	}
	if dec.More() {
		return Config{}, errors.New("mcp config: trailing data after the JSON object")
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		s := cfg.Servers[name]
		if s.Disabled {
			continue // may be half written, or name variables this worker lacks
		}
		x := expander{getenv: getenv, server: name}
		s.Command = x.expand("command", s.Command)
		for i := range s.Args {
			s.Args[i] = x.expand(fmt.Sprintf("args[%d]", i), s.Args[i])
		}
		s.Env = x.expandMap("env", s.Env)
		s.URL = x.expand("url", s.URL)
		s.Headers = x.expandMap("headers", s.Headers)
		if x.err != nil {
			return Config{}, x.err
		}
		cfg.Servers[name] = s
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

var varRe = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

type expander struct {
	getenv func(string) string
	server string
	err    error
}

func (x *expander) expand(field, s string) string {
	return varRe.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v := x.getenv(name)
		if v == "" && x.err == nil {
			x.err = fmt.Errorf("mcp config: server %s: %s uses ${%s}, which is not set", x.server, field, name)
		}
		return v
	})
}

func (x *expander) expandMap(field string, m map[string]string) map[string]string {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		m[k] = x.expand(field+"."+k, m[k])
	}
	return m
}

// Validate reports the first problem of the config, naming the server and
// field.
func (c Config) Validate() error {
	if strings.ContainsFunc(c.Prefix, isSpace) {
		return fmt.Errorf("mcp config: prefix %q has white space", c.Prefix)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		if c.Servers[name].Disabled {
			continue
		}
		if err := c.Servers[name].validate(); err != nil {
			return fmt.Errorf("mcp config: server %s: %w", name, err)
		}
	}
	return nil
}

func (s ServerConfig) validate() error {
	if strings.ContainsFunc(s.Prefix, isSpace) {
		return fmt.Errorf("prefix %q has white space", s.Prefix)
	}
	if s.Transport != nil {
		return nil
	}
	switch s.kind() {
	case "stdio":
		if s.Command == "" {
			return errors.New("a stdio server needs a command")
		}
		if s.URL != "" {
			return errors.New("give a command or a url, not both")
		}
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("env has an invalid name %q", k)
			}
		}
	case "http":
		if s.URL == "" {
			return errors.New("an http server needs a url")
		}
		if s.Command != "" {
			return errors.New("give a command or a url, not both")
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("url must be an http or https URL")
		}
	case "":
		return errors.New("give a command (stdio) or a url (streamable HTTP)")
	default:
		return fmt.Errorf("type %q: want stdio or http", s.Type)
	}
	return nil
}

// kind is "stdio", "http", "" (unknown) or the unrecognised Type.
func (s ServerConfig) kind() string {
	switch s.Type {
	case "stdio":
		return "stdio"
	case "http", "streamable-http", "streamableHttp", "streamable_http":
		return "http"
	case "":
		switch {
		case s.Command != "":
			return "stdio"
		case s.URL != "":
			return "http"
		}
		return ""
	}
	return s.Type
}

func (s ServerConfig) timeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return time.Duration(s.Timeout)
}

func isSpace(r rune) bool { return unicode.IsSpace(r) }
