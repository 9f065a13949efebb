package bustool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

type described struct {
	Name, Subject, Description string
	Schema                     map[string]any
}

func describe(tools []*bustool.Tool) []described {
	var out []described
	for _, t := range tools {
		out = append(out, described{t.Name(), t.Subject(), t.Description(), t.InputSchema()})
	}
	return out
}

func TestDiscover(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	serve(t, nc, bustool.ServerConfig{Name: "text", Prefix: prefix},
		bustool.Def{Tool: modal("slugify", nil), Description: "Slugs.", Schema: schema},
		bustool.Def{Tool: modal("word_stats", nil), Description: "Counts words."})
	// A second instance of a service, and another service serving the same tool
	// alike: each tool is listed once.
	serve(t, nc, bustool.ServerConfig{Name: "text", Prefix: prefix},
		bustool.Def{Tool: modal("slugify", nil), Description: "Slugs.", Schema: schema},
		bustool.Def{Tool: modal("word_stats", nil), Description: "Counts words."})
	serve(t, nc, bustool.ServerConfig{Name: "more", Prefix: prefix},
		bustool.Def{Tool: modal("word_stats", nil), Description: "Counts words."},
		bustool.Def{Tool: tool.Echo(), Schema: map[string]any{"type": "object", "additionalProperties": true}})
	// Neither a tool of this prefix nor a skillbus tool service.
	serve(t, nc, bustool.ServerConfig{Name: "elsewhere", Prefix: uniquePrefix()}, bustool.Def{Tool: modal("other", nil)})
	plain, err := micro.AddService(nc, micro.Config{Name: "plain", Version: "1.0.0",
		Endpoint: &micro.EndpointConfig{Subject: prefix + ".tool.plain", Handler: micro.HandlerFunc(func(micro.Request) {})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Stop() })

	tools, err := bustool.Discover(t.Context(), nc, bustool.Config{Prefix: prefix, DiscoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := []described{
		{"echo", prefix + ".tool.echo", "", map[string]any{"type": "object", "additionalProperties": true}},
		{"slugify", prefix + ".tool.slugify", "Slugs.", map[string]any{
			"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"},
		}},
		{"word_stats", prefix + ".tool.word_stats", "Counts words.", map[string]any{"type": "object"}},
	}
	if diff := cmp.Diff(want, describe(tools)); diff != "" {
		t.Errorf("discovered tools (-want +got):\n%s", diff)
	}
	res, err := tools[1].Call(t.Context(), tool.Call{Args: map[string]any{"mode": "nil"}})
	if err != nil || res != nil {
		t.Errorf("calling a discovered tool: %v, %v", res, err)
	}
}

// TestDiscoverNothing returns at once when no service runs: the request has no
// responders, so the long DiscoverTimeout is never waited out.
func TestDiscoverNothing(t *testing.T) {
	_, nc := start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tools, err := bustool.Discover(ctx, nc, bustool.Config{DiscoverTimeout: time.Hour})
	if err != nil || len(tools) != 0 {
		t.Errorf("Discover = %v, %v; want nothing", tools, err)
	}
}

func TestDiscoverCancelled(t *testing.T) {
	_, nc := start(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := bustool.Discover(ctx, nc, bustool.Config{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Discover with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestServeRejects(t *testing.T) {
	_, nc := start(t)
	tests := []struct {
		name string
		cfg  bustool.ServerConfig
		defs []bustool.Def
		msg  string
	}{
		{"no tools", bustool.ServerConfig{}, nil, "at least one tool"},
		{"nil tool", bustool.ServerConfig{}, []bustool.Def{{}}, "has no Tool"},
		{"bad name", bustool.ServerConfig{}, []bustool.Def{{Tool: modal("a.b", nil)}}, "invalid tool name"},
		{"twice", bustool.ServerConfig{}, []bustool.Def{{Tool: tool.Echo()}, {Tool: tool.Echo()}}, "defined twice"},
		{"schema not an object", bustool.ServerConfig{}, []bustool.Def{{Tool: tool.Echo(), Schema: []string{"x"}}}, "must be a JSON object"},
		{"schema not JSON", bustool.ServerConfig{}, []bustool.Def{{Tool: tool.Echo(), Schema: make(chan int)}}, "does not marshal"},
		{"bad prefix", bustool.ServerConfig{Prefix: "a.b"}, []bustool.Def{{Tool: tool.Echo()}}, "subject prefix"},
		{"bad service name", bustool.ServerConfig{Name: "a b"}, []bustool.Def{{Tool: tool.Echo()}}, "starting service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := bustool.Serve(nc, tt.cfg, tt.defs...)
			if err == nil {
				_ = srv.Shutdown(t.Context())
				t.Fatal("Serve succeeded")
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// TestShutdownWaits lets a running call finish, and turns calls that arrive
// during the shutdown away as Retryable.
func TestShutdownWaits(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	started, release := make(chan struct{}), make(chan struct{})
	slow := tool.Func("slow", func(ctx context.Context, c tool.Call) (any, error) {
		close(started)
		<-release
		return "done", nil
	})
	srv, err := bustool.Serve(nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: slow})
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := bustool.New(nc, "slow", bustool.Config{Prefix: prefix})
	var res any
	var callErr error
	var wg sync.WaitGroup
	wg.Go(func() { res, callErr = tl.Call(t.Context(), tool.Call{}) })
	<-started

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(t.Context()) }()
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := tl.Call(t.Context(), tool.Call{})
		return err != nil && strings.Contains(err.Error(), "not running")
	}, "the stopped service still takes calls")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a call was running", err)
	default:
	}
	close(release)
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	wg.Wait()
	if res != "done" || callErr != nil {
		t.Errorf("the running call ended with %v, %v; want done", res, callErr)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Errorf("a second Shutdown: %v", err)
	}
}
