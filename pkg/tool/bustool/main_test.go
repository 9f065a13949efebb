package bustool_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var prefixes atomic.Int64

// uniquePrefix returns a subject prefix no other test uses, so tests sharing a
// server do not answer each other's calls.
func uniquePrefix() string {
	return fmt.Sprintf("t%d", prefixes.Add(1))
}

// modal is a tool whose behaviour the call chooses with its "mode" argument;
// started receives a value once a "block" call is under way.
func modal(name string, started chan<- struct{}) tool.Tool {
	return tool.Func(name, func(ctx context.Context, c tool.Call) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
		a := tool.NewArgs(name, c.Args)
		mode, err := a.String("mode")
		if err != nil {
			return nil, err
		}
		switch mode {
		case "ok":
			return map[string]any{"n": int64(1), "f": 1.5, "l": []any{"x", true, nil}, "s": "<&>"}, nil
		case "call":
			return map[string]any{"execution_id": c.ExecutionID, "step": c.Step, "key": c.IdempotencyKey, "args": c.Args}, nil
		case "deadline":
			d, ok := ctx.Deadline()
			return map[string]any{"has": ok, "in_ms": time.Until(d).Milliseconds()}, nil
		case "retry":
			return nil, failure.Retry("%s: try later", name)
		case "fatal":
			return nil, failure.Fatalf("%s: never", name)
		case "repair":
			return nil, failure.Repair("%s: argument \"x\" is wrong", name)
		case "plain-notfound":
			return nil, fmt.Errorf("issue AAP-1 not found")
		case "plain":
			return nil, fmt.Errorf("something broke")
		case "multiline":
			return nil, failure.Fatalf("first line\nsecond line\r\nthird")
		case "panic":
			panic("kaboom")
		case "unencodable":
			return make(chan int), nil
		case "huge":
			return strings.Repeat("x", 9<<20), nil
		case "struct":
			return struct {
				A int    `json:"a"`
				B string `json:"b"`
			}{7, "b"}, nil
		case "nil":
			return nil, nil
		case "block":
			if started != nil {
				started <- struct{}{}
			}
			<-ctx.Done()
			return nil, failure.Wrap(failure.Retryable, ctx.Err())
		}
		return nil, a.Errorf("mode", "must be a known mode, got %q", mode)
	})
}

// serve serves defs under prefix until the test ends.
func serve(t *testing.T, nc *nats.Conn, cfg bustool.ServerConfig, defs ...bustool.Def) *bustool.Server {
	t.Helper()
	srv, err := bustool.Serve(nc, cfg, defs...)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// start starts a NATS server and connects to it.
func start(t *testing.T) (*natstest.Server, *nats.Conn) {
	t.Helper()
	s := natstest.Start(t)
	return s, s.Conn(t)
}
