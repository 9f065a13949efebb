package tool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

func failureWrapCtx(err error) error {
	return failure.Wrap(failure.Retryable, fmt.Errorf("upper: %w", err))
}

func named(name string) tool.Tool {
	return tool.Func(name, func(context.Context, tool.Call) (any, error) { return name, nil })
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	set, err := tool.NewSet(named("b"), named("a"), named("c"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, set.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	got, ok := set.Lookup("b")
	if !ok {
		t.Fatal("Lookup(b) found nothing")
	}
	if res, _ := got.Call(t.Context(), tool.Call{}); res != "b" {
		t.Errorf("Lookup(b) returned the tool %v", res)
	}
	if _, ok := set.Lookup("zz"); ok {
		t.Error("Lookup(zz) found a tool")
	}
	names := set.Names()
	names[0] = "mutated"
	if set.Names()[0] != "a" {
		t.Error("changing the slice from Names changed the set")
	}
}

func TestNewSetErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tools []tool.Tool
		want  string
	}{
		{"duplicate", []tool.Tool{named("a"), named("b"), named("a")}, `tool: duplicate tool name "a"`},
		{"nil", []tool.Tool{named("a"), nil}, "tool: tool 1 is nil"},
		{"empty name", []tool.Tool{named("")}, `tool: tool 0 has an invalid name ""`},
		{"space in name", []tool.Tool{named("a b")}, `tool: tool 0 has an invalid name "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tool.NewSet(tc.tools...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("NewSet error = %v, want %q", err, tc.want)
			}
		})
	}
	_, err := tool.NewSet(named("x"), named("x"))
	if !errors.Is(err, tool.ErrDuplicate) {
		t.Errorf("duplicate error %v does not wrap ErrDuplicate", err)
	}
}

func TestNilSet(t *testing.T) {
	t.Parallel()
	var s *tool.Set
	if _, ok := s.Lookup("x"); ok {
		t.Error("a nil set found a tool")
	}
	if n := s.Names(); n != nil {
		t.Errorf("a nil set has names %v", n)
	}
}

func TestBuiltins(t *testing.T) {
	t.Parallel()
	set := tool.Builtins(tool.HTTPConfig{}, tool.ExecConfig{})
	if diff := cmp.Diff([]string{"echo", "exec", "http", "noop"}, set.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}

func TestCheckValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string // "" for no error
	}{
		{nil, ""},
		{map[string]any{"a": []any{int64(1), 1.5, "s", true, nil, map[string]any{}}}, ""},
		{1, "int is not a JSON-like value"},
		{[]string{"a"}, "[]string is not a JSON-like value"},
		{map[string]any{"a": []any{"x", float32(1)}}, "a[1]: float32 is not a JSON-like value"},
		{"\xff", "string is not valid UTF-8"},
		{map[string]any{"n": nanValue()}, "n: number NaN has no JSON form"},
	} {
		err := tool.CheckValue(tc.v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckValue(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestReadOnlyCalls(t *testing.T) {
	h := tool.NewHTTP(tool.HTTPConfig{})
	for _, c := range []struct {
		args map[string]any
		want bool
	}{
		{map[string]any{"url": "http://x"}, true},
		{map[string]any{"url": "http://x", "method": "head"}, true},
		{map[string]any{"url": "http://x", "method": "OPTIONS"}, true},
		{map[string]any{"url": "http://x", "method": "POST"}, false},
		{map[string]any{"url": "http://x", "method": "DELETE"}, false},
		{map[string]any{"url": "http://x", "json": map[string]any{"a": 1}}, false}, // a POST
		{map[string]any{"url": "http://x", "body": "b"}, false},
		{map[string]any{"url": "http://x", "method": "GET", "body": "b"}, true}, // an odd GET is still a GET
	} {
		if got := tool.IsReadOnly(h, tool.Call{Args: c.args}); got != c.want {
			t.Errorf("http %v: read-only %v, want %v", c.args, got, c.want)
		}
	}
	if !tool.IsReadOnly(tool.Echo(), tool.Call{}) || !tool.IsReadOnly(tool.Noop(), tool.Call{}) {
		t.Error("echo and noop only read")
	}
	if tool.IsReadOnly(tool.Func("act", func(context.Context, tool.Call) (any, error) { return nil, nil }), tool.Call{}) {
		t.Error("a Func tool says nothing about its calls: it is taken to act")
	}
	if tool.IsReadOnly(tool.NewExec(tool.ExecConfig{}), tool.Call{}) {
		t.Error("exec acts")
	}
}
