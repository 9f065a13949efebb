package mcptool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Client holds the connections to a worker's MCP servers and their tools.
type Client struct {
	servers []*server
	tools   []*Tool
	hc      *http.Client
	ownHC   bool
	once    sync.Once
}

// Open connects to every enabled server of cfg, lists its tools and returns
// them as tool.Tools. It fails, naming the server, if one cannot be reached
// or two tools end up with one name (give the servers a Prefix); a server that
// should not hold the worker up can be Disabled. Close ends the connections.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	c := &Client{hc: cfg.HTTPClient}
	if c.hc == nil {
		c.hc, c.ownHC = &http.Client{}, true
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			// W3C trace headers on every request to an HTTP server; the span's
			// url.full without the query's values (an API key often rides there).
			c.hc.Transport = otelhttp.NewTransport(telemetry.RedactURLs(t.Clone()))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		sc := cfg.Servers[name]
		if sc.Disabled {
			continue
		}
		c.servers = append(c.servers, &server{
			name:   name,
			cfg:    sc,
			prefix: cfg.Prefix + sc.Prefix,
			hc:     c.hc,
			log:    log,
			client: mcp.NewClient(&mcp.Implementation{Name: "skillbus", Version: "1"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
			}),
		})
	}

	lists := make([][]*Tool, len(c.servers))
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() { lists[i], errs[i] = s.listTools(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}

	seen := map[string]*Tool{}
	for _, list := range lists {
		for _, t := range list {
			if prev, ok := seen[t.name]; ok {
				c.Close()
				return nil, fmt.Errorf("mcp: tool name %s is both server %s's tool %s and server %s's tool %s; give the servers a prefix",
					t.name, prev.srv.name, prev.mcpName, t.srv.name, t.mcpName)
			}
			seen[t.name] = t
			c.tools = append(c.tools, t)
		}
	}
	slices.SortFunc(c.tools, func(a, b *Tool) int { return cmp.Compare(a.name, b.name) })
	return c, nil
}

// Tools returns the tools of all servers, sorted by name.
func (c *Client) Tools() []*Tool { return slices.Clone(c.tools) }

// Close ends every connection, stopping stdio servers; calls then fail. It is
// safe to call more than once.
func (c *Client) Close() error {
	var errs []error
	c.once.Do(func() {
		for _, s := range c.servers {
			errs = append(errs, s.close())
		}
		if c.ownHC {
			c.hc.CloseIdleConnections()
		}
	})
	return errors.Join(errs...)
}

// server is one MCP server and its current session, reconnected when lost.
type server struct {
	name   string
	cfg    ServerConfig
	prefix string
	hc     *http.Client
	log    *slog.Logger
	client *mcp.Client

	mu      sync.Mutex
	cs      *mcp.ClientSession
	stderr  *stderrLog
	closed  bool
	watches sync.WaitGroup
}

// session returns the current session, connecting first if there is none: at
// the start, and after the server died or the connection broke.
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, failure.Retry("mcp: server %s: the client is closed", s.name)
	}
	if s.cs != nil {
		return s.cs, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	tr, stderr, err := s.transport()
	if err != nil {
		return nil, failure.Wrap(failure.Fatal, fmt.Errorf("mcp: server %s: %w", s.name, err))
	}
	cs, err := s.client.Connect(cctx, tr, nil)
	if err != nil {
		msg := fmt.Errorf("mcp: server %s: connecting: %w", s.name, err)
		if tail := stderr.Tail(); tail != "" {
			msg = fmt.Errorf("%w (stderr: %s)", msg, tail)
		}
		if ctx.Err() != nil {
			msg = fmt.Errorf("%w: %w", msg, ctx.Err())
		}
		return nil, failure.Wrap(failure.Retryable, msg)
	}
	s.cs, s.stderr = cs, stderr
	s.watches.Add(1)
	go s.watch(cs)
	return cs, nil
}

// watch forgets a session once it ends, so the next call reconnects.
func (s *server) watch(cs *mcp.ClientSession) {
	defer s.watches.Done()
	err := cs.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != cs {
		return
	}
	s.cs = nil
	if !s.closed {
		s.log.Warn("mcp: the connection to a server ended; the next call reconnects", "server", s.name, "err", err, "stderr", s.stderr.Tail())
	}
}

// drop forgets a session that failed, unless it was replaced already, so the
// next call connects anew, and closes it.
func (s *server) drop(cs *mcp.ClientSession) {
	s.mu.Lock()
	current := s.cs == cs
	if current {
		s.cs = nil
	}
	s.mu.Unlock()
	if current {
		_ = cs.Close() // a server that died reports how; that was logged already
	}
}

func (s *server) close() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cs
	s.mu.Unlock()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	s.watches.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.As(err, &exit) {
		return fmt.Errorf("mcp: server %s: closing: %w", s.name, err)
	}
	return nil
}

// transport returns a fresh transport to the server.
func (s *server) transport() (mcp.Transport, *stderrLog, error) {
	if s.cfg.Transport != nil {
		return s.cfg.Transport(), nil, nil
	}
	switch s.cfg.kind() {
	case "http":
		hc := s.hc
		if len(s.cfg.Headers) > 0 {
			hc = &http.Client{Transport: headerTransport{base: transportOf(s.hc), headers: s.cfg.Headers}, Timeout: s.hc.Timeout}
		}
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: hc,
			// Calls are request-reply; nothing needs the server's own messages.
			DisableStandaloneSSE: true,
		}, nil, nil
	default:
		path, err := lookPath(s.cfg.Command, s.cfg.Env)
		if err != nil {
			return nil, nil, err
		}
		cmd := exec.Command(path, s.cfg.Args...)
		cmd.Args[0] = s.cfg.Command
		cmd.Env = []string{} // never nil: nil would pass the worker's environment
		for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
			cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
		}
		cmd.Dir = s.cfg.Dir
		stderr := &stderrLog{log: s.log, server: s.name}
		cmd.Stderr = stderr
		return &mcp.CommandTransport{Command: cmd}, stderr, nil
	}
}

// lookPath finds a command without a slash in the PATH of the server's own
// environment if it sets one, else in the worker's.
func lookPath(command string, env map[string]string) (string, error) {
	if strings.ContainsRune(command, filepath.Separator) {
		return command, nil
	}
	pathList, ok := env["PATH"]
	if !ok {
		p, err := exec.LookPath(command)
		if err != nil {
			return "", fmt.Errorf("command %s: %w", command, err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %s is not in the server's PATH %q", command, pathList)
}

// headerTransport adds configured headers to each request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}

// listTools connects and lists the server's tools, keeping those cfg.Tools
// names (all when it names none).
func (s *server) listTools(ctx context.Context) ([]*Tool, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	var out []*Tool
	found := map[string]bool{}
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: server %s: listing tools: %w", s.name, err)
		}
		found[t.Name] = true
		if len(s.cfg.Tools) > 0 && !slices.Contains(s.cfg.Tools, t.Name) {
			continue
		}
		tl, err := newTool(s, t)
		if err != nil {
			return nil, err
		}
		out = append(out, tl)
	}
	for _, want := range s.cfg.Tools {
		if !found[want] {
			s.log.Warn("mcp: a server lacks a tool its config names", "server", s.name, "tool", want)
		}
	}
	return out, nil
}
