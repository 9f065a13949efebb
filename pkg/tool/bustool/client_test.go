package bustool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

func TestConformance(t *testing.T) {
	_, nc := start(t)
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		prefix := uniquePrefix()
		started := make(chan struct{}, 1)
		srv, err := bustool.Serve(nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: modal("modal", started)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// A cancelled call stops the waiting, not the tool, which runs until
			// the deadline it was given; end such calls at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = srv.Shutdown(ctx)
		})
		tl, err := bustool.New(nc, "modal", bustool.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		mode := func(m string) *tool.Call { return &tool.Call{Args: map[string]any{"mode": m}} }
		return tooltest.Fixture{
			Tool: tl,
			OK:   *mode("ok"),
			CheckOK: func(t *testing.T, res any) {
				want := map[string]any{"n": int64(1), "f": 1.5, "l": []any{"x", true, nil}, "s": "<&>"}
				if diff := cmp.Diff(want, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			},
			Retryable: mode("retry"),
			Fatal:     mode("fatal"),
			BadArg:    mode("nonsense"),
			Blocking:  mode("block"),
			Started:   func(t *testing.T) { <-started },
		}
	})
}

func TestCallClasses(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix, Log: discard()}, bustool.Def{Tool: modal("modal", nil)})
	tl, err := bustool.New(nc, "modal", bustool.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode  string
		class failure.Class
		msg   string // the error message must contain this
	}{
		{"retry", failure.Retryable, "bustool: modal: try later"},
		{"fatal", failure.Fatal, "bustool: modal: never"},
		{"repair", failure.Repairable, `argument "x" is wrong`},
		{"nonsense", failure.Repairable, `modal: argument "mode" must be a known mode`},
		{"plain-notfound", failure.Fatal, "bustool: tool modal: issue AAP-1 not found"},
		{"plain", failure.Retryable, "something broke"},
		{"multiline", failure.Fatal, "first line\nsecond line\r\nthird"},
		{"panic", failure.Fatal, "modal: the tool panicked: kaboom"},
		{"unencodable", failure.Fatal, "the result does not encode as JSON"},
		{"huge", failure.Fatal, "exceeds the NATS max payload"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			_, err := tl.Call(t.Context(), tool.Call{Args: map[string]any{"mode": tt.mode}})
			if got := failure.ClassOf(err); got != tt.class {
				t.Errorf("class = %q, want %q (error %v)", got, tt.class, err)
			}
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Errorf("error %v carries no class", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

func TestCallResults(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: modal("modal", nil)})
	tl, err := bustool.New(nc, "modal", bustool.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call tool.Call
		want any
	}{
		{"struct result", tool.Call{Args: map[string]any{"mode": "struct"}}, map[string]any{"a": int64(7), "b": "b"}},
		{"nil result", tool.Call{Args: map[string]any{"mode": "nil"}}, nil},
		{"call metadata", tool.Call{
			Args:        map[string]any{"mode": "call", "x": []any{int64(1), 2.5, "é"}},
			ExecutionID: "exec1", Step: "s1", IdempotencyKey: "exec1/s1",
		}, map[string]any{
			"execution_id": "exec1", "step": "s1", "key": "exec1/s1",
			"args": map[string]any{"mode": "call", "x": []any{int64(1), 2.5, "é"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tl.Call(t.Context(), tt.call)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeadlinePropagates(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: modal("modal", nil)})
	tests := []struct {
		name     string
		ctx      time.Duration // 0: no deadline on the call's context
		callTO   time.Duration
		min, max int64
	}{
		{"context deadline", 40 * time.Second, 0, 30_000, 40_000},
		{"call timeout without a deadline", 0, 7 * time.Second, 5_000, 7_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := bustool.New(nc, "modal", bustool.Config{Prefix: prefix, CallTimeout: tt.callTO})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			res, err := tl.Call(ctx, tool.Call{Args: map[string]any{"mode": "deadline"}})
			if err != nil {
				t.Fatal(err)
			}
			m := res.(map[string]any)
			in := m["in_ms"].(int64)
			if m["has"] != true || in < tt.min || in > tt.max {
				t.Errorf("the tool saw deadline %v in %dms, want one in %d..%dms", m["has"], in, tt.min, tt.max)
			}
		})
	}
}

func TestNotRunning(t *testing.T) {
	_, nc := start(t)
	tl, err := bustool.New(nc, "ghost", bustool.Config{Prefix: uniquePrefix()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tl.Call(t.Context(), tool.Call{})
	if failure.ClassOf(err) != failure.Retryable || !strings.Contains(err.Error(), "tool service ghost is not running") {
		t.Errorf("got %v (class %q), want a Retryable \"tool service ghost is not running\"", err, failure.ClassOf(err))
	}
}

func TestConnectionClosed(t *testing.T) {
	s, _ := start(t)
	nc := s.Conn(t)
	tl, err := bustool.New(nc, "x", bustool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	_, err = tl.Call(t.Context(), tool.Call{})
	if failure.ClassOf(err) != failure.Retryable || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("got %v (class %q), want a Retryable error wrapping ErrConnectionClosed", err, failure.ClassOf(err))
	}
}

func TestArgumentsTooLarge(t *testing.T) {
	_, nc := start(t)
	tl, err := bustool.New(nc, "x", bustool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tl.Call(t.Context(), tool.Call{Args: map[string]any{"s": strings.Repeat("x", int(nc.MaxPayload()))}})
	if failure.ClassOf(err) != failure.Fatal || !strings.Contains(err.Error(), "exceed the NATS max payload") {
		t.Errorf("got %v, want a Fatal max payload error", err)
	}
}

// TestForeignService calls services not written with this package: plain
// micro services and bare subscribers that answer in their own ways.
func TestForeignService(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	svc, err := micro.AddService(nc, micro.Config{Name: "foreign", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	reply := func(name string, h micro.HandlerFunc) {
		if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject(bustool.Subject(prefix, name))); err != nil {
			t.Fatal(err)
		}
	}
	reply("ok", func(r micro.Request) { _ = r.Respond([]byte(` {"a": 1e3, "b": 12345678901234567890} `)) })
	reply("empty", func(r micro.Request) { _ = r.Respond(nil) })
	reply("garbage", func(r micro.Request) { _ = r.Respond([]byte(`{"a":`)) })
	reply("code503", func(r micro.Request) { _ = r.Error("503", "overloaded", nil) })
	reply("code404", func(r micro.Request) { _ = r.Error("404", "no such thing", nil) })
	reply("code422", func(r micro.Request) { _ = r.Error("422", "bad input", nil) })
	reply("codeword", func(r micro.Request) { _ = r.Error("E_PERM", "permission denied for /x", nil) })
	reply("envelope", func(r micro.Request) {
		_ = r.Error("X", "short", []byte(`{"class":"repairable","message":"the long\nmessage"}`))
	})
	tests := []struct {
		name  string
		want  any
		class failure.Class
		msg   string
	}{
		{"ok", map[string]any{"a": 1000.0, "b": 1.2345678901234567e19}, "", ""},
		{"empty", nil, "", ""},
		{"garbage", nil, failure.Fatal, "replied with a result that is not JSON"},
		{"code503", nil, failure.Retryable, "bustool: tool code503: overloaded"},
		{"code404", nil, failure.Fatal, "no such thing"},
		{"code422", nil, failure.Repairable, "bad input"},
		{"codeword", nil, failure.Fatal, "permission denied for /x"},
		{"envelope", nil, failure.Repairable, "the long\nmessage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := bustool.New(nc, tt.name, bustool.Config{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tl.Call(t.Context(), tool.Call{})
			if failure.ClassOf(err) != tt.class {
				t.Fatalf("error %v has class %q, want %q", err, failure.ClassOf(err), tt.class)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("error %q does not contain %q", err, tt.msg)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRawRequests sends what other clients might: arguments that are not an
// object, or not JSON at all.
func TestRawRequests(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: tool.Echo()})
	tests := []struct {
		payload string
		code    string
		result  string
	}{
		{``, "", `{}`},
		{`null`, "", `{}`},
		{`{"a":[1,"x"]}`, "", `{"a":[1,"x"]}`},
		{`[1]`, "repairable", ""},
		{`{"a":`, "repairable", ""},
		{`{} {}`, "repairable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			msg, err := nc.RequestWithContext(t.Context(), bustool.Subject(prefix, "echo"), []byte(tt.payload))
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != tt.code {
				t.Errorf("error code %q, want %q (%s)", got, tt.code, msg.Header.Get(micro.ErrorHeader))
			}
			if tt.code == "" && string(msg.Data) != tt.result {
				t.Errorf("result %s, want %s", msg.Data, tt.result)
			}
		})
	}
}

func TestNewRejectsBadNames(t *testing.T) {
	_, nc := start(t)
	for _, name := range []string{"", "a.b", "a b", "a>", "*", strings.Repeat("x", 65)} {
		if _, err := bustool.New(nc, name, bustool.Config{}); !errors.Is(err, bustool.ErrInvalidName) {
			t.Errorf("New(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if _, err := bustool.New(nc, "ok", bustool.Config{Prefix: "a.b"}); err == nil {
		t.Error("New accepted the prefix a.b")
	}
}
