package mcptool_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/pkg/tool/mcptool"
)

// serverBinary is testdata/mcpserver, built once for the stdio tests.
var serverBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcptool-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "mcpserver")
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	build := exec.Command(goCmd, "build", "-o", serverBinary, "./testdata/mcpserver")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/mcpserver: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type modalArgs struct {
	Mode string `json:"mode"`
}

type statsOut struct {
	Words int      `json:"words"`
	List  []string `json:"list"`
}

// testServer is an MCP server built with the SDK: its tools succeed, fail in
// each way a tool can, or block. started receives a value when a blocking call
// runs, which returns when its context is done or release is closed.
func testServer(started chan<- struct{}, release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			if in.Name == "" {
				return nil, nil, errors.New("missing parameter name")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "modal", Description: "Behaves as its mode says."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in modalArgs) (*mcp.CallToolResult, any, error) {
			switch in.Mode {
			case "ok":
				return nil, map[string]any{"n": 1, "f": 1.5, "l": []any{"x", nil}}, nil
			case "retry":
				return nil, nil, errors.New("connection reset by peer")
			case "fatal":
				return nil, nil, errors.New("issue AAP-1 not found")
			case "block":
				if started != nil {
					started <- struct{}{}
				}
				select {
				case <-ctx.Done():
				case <-release:
				}
				return nil, nil, errors.New("cancelled")
			}
			return nil, nil, fmt.Errorf("invalid parameter mode %q", in.Mode)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stats", Description: "Counts words.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, statsOut, error) {
			return nil, statsOut{Words: 2, List: []string{"a", "b"}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with the given message."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Message)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if started != nil {
				started <- struct{}{}
			}
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, errors.New("cancelled")
		})
	s.AddTool(&mcp.Tool{Name: "mixed", Description: "Returns several kinds of content.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "caption"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "hi"}},
				&mcp.ResourceLink{URI: "file:///b", Name: "b"},
			}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "meta", Description: "Returns the call's arguments and metadata.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				StructuredContent: map[string]any{"args": req.Params.Arguments, "key": req.Params.Meta["io.skillbus/idempotency-key"]},
				Content:           []mcp.Content{&mcp.TextContent{Text: "see structured content"}},
			}, nil
		})
	s.AddTool(&mcp.Tool{Name: "empty", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	return s
}

// inMemory returns a Transport func connecting to srv in the process.
func inMemory(t *testing.T, srv *mcp.Server) func() mcp.Transport {
	return func() mcp.Transport {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			t.Errorf("server Connect: %v", err)
		}
		return ct
	}
}

// httpServer serves srv over streamable HTTP, checking the Authorization
// header when token is set.
func httpServer(t *testing.T, srv *mcp.Server, token string) *httptest.Server {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// open opens cfg and closes it when the test ends.
func open(t *testing.T, cfg mcptool.Config) *mcptool.Client {
	t.Helper()
	c, err := mcptool.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func toolNamed(t *testing.T, c *mcptool.Client, name string) *mcptool.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}
