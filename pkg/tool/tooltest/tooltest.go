// Package tooltest is the conformance suite of the tool.Tool seam: every tool
// provider, built in or served from elsewhere, runs it in its tests.
//
//	func TestConformance(t *testing.T) {
//		tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
//			return tooltest.Fixture{
//				Tool:   myTool(t),
//				OK:     tool.Call{Args: map[string]any{"x": "y"}},
//				BadArg: &tool.Call{Args: map[string]any{"x": int64(1)}},
//			}
//		})
//	}
//
// The suite checks that the name is usable and stable; that results are JSON-like
// and survive encoding/json unchanged; that calls leave their arguments alone; that
// every error is a *failure.Error of the expected class; that a cancelled or
// expired context ends a call promptly with an error wrapping ctx.Err(); and that
// concurrent calls are safe (run it with -race).
package tooltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Fixture is a tool under test and calls that exercise it.
type Fixture struct {
	// Tool is the tool under test.
	Tool tool.Tool
	// OK is a call that succeeds.
	OK tool.Call
	// CheckOK, if set, checks the result of OK further.
	CheckOK func(t *testing.T, result any)
	// Retryable, Fatal and BadArg are calls that fail with a Retryable, Fatal and
	// Repairable error. Nil: the tool cannot fail that way, and the suite has no
	// such check (no subtest, rather than a skipped one).
	Retryable, Fatal, BadArg *tool.Call
	// Blocking is a call that does not return before its context is done. Nil:
	// the suite has no checks of cancellation and deadline during a call.
	Blocking *tool.Call
	// Started, if set, returns once a Blocking call is under way, so the suite
	// cancels during the call rather than possibly before it.
	Started func(t *testing.T)
}

// Prompt is how soon a call must return once its context is done.
const Prompt = 5 * time.Second

// Run runs the conformance suite. newTool is called for each subtest and must
// return a fresh fixture; register any cleanup with t.Cleanup.
func Run(t *testing.T, newTool func(t *testing.T) Fixture) {
	t.Helper()

	t.Run("Name", func(t *testing.T) {
		f := newTool(t)
		name := f.Tool.Name()
		if name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
			t.Fatalf("Name() = %q, want a non-empty name without spaces", name)
		}
		if again := f.Tool.Name(); again != name {
			t.Errorf("Name() changed from %q to %q", name, again)
		}
		if _, err := tool.NewSet(f.Tool); err != nil {
			t.Errorf("NewSet rejects the tool: %v", err)
		}
		if other := newTool(t).Tool.Name(); other != name {
			t.Errorf("a second instance is named %q, the first %q", other, name)
		}
	})

	t.Run("OK", func(t *testing.T) {
		f := newTool(t)
		checkOK(t, f, f.OK)
	})

	t.Run("Classes", func(t *testing.T) {
		f := newTool(t)
		for _, tc := range []struct {
			name  string
			call  *tool.Call
			class failure.Class
		}{
			{"Retryable", f.Retryable, failure.Retryable},
			{"Fatal", f.Fatal, failure.Fatal},
			{"BadArg", f.BadArg, failure.Repairable},
		} {
			if tc.call == nil {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				_, err := call(t.Context(), t, f.Tool, *tc.call)
				checkClass(t, err, tc.class)
			})
		}
	})

	t.Run("CancelledBefore", func(t *testing.T) {
		f := newTool(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := call(ctx, t, f.Tool, f.OK)
		checkCtxErr(t, err, context.Canceled)
	})

	if newTool(t).Blocking != nil {
		cancelledDuring(t, newTool)
	}

	t.Run("Concurrent", func(t *testing.T) {
		f := newTool(t)
		const workers, rounds = 8, 3
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					res, err := f.Tool.Call(t.Context(), f.OK)
					if err != nil {
						t.Errorf("OK call failed: %v", err)
						return
					}
					if err := tool.CheckValue(res); err != nil {
						t.Errorf("result is not JSON-like: %v", err)
					}
					for _, c := range []struct {
						call  *tool.Call
						class failure.Class
					}{{f.Retryable, failure.Retryable}, {f.Fatal, failure.Fatal}, {f.BadArg, failure.Repairable}} {
						if c.call == nil {
							continue
						}
						if _, err := f.Tool.Call(t.Context(), *c.call); failure.ClassOf(err) != c.class {
							t.Errorf("call failed with %v (class %q), want class %q", err, failure.ClassOf(err), c.class)
						}
					}
				}
			})
		}
		wg.Wait()
	})
}

// call calls the tool and fails the test if it does not return within Prompt
// after ctx is done.
func call(ctx context.Context, t *testing.T, tl tool.Tool, c tool.Call) (any, error) {
	t.Helper()
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := tl.Call(ctx, c)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(Prompt):
		t.Fatalf("the call did not return within %s of its context being done", Prompt)
		return nil, nil
	}
}

func checkOK(t *testing.T, f Fixture, c tool.Call) {
	t.Helper()
	before := clone(c.Args)
	res, err := call(t.Context(), t, f.Tool, c)
	if err != nil {
		t.Fatalf("OK call failed: %v", err)
	}
	if diff := cmp.Diff(before, c.Args); diff != "" {
		t.Errorf("the call changed its arguments (-before +after):\n%s", diff)
	}
	if err := tool.CheckValue(res); err != nil {
		t.Fatalf("result is not JSON-like: %v", err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("result does not marshal: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var back any
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("result does not unmarshal: %v", err)
	}
	if diff := cmp.Diff(asJSONNumbers(res), back); diff != "" {
		t.Errorf("result changed in a JSON round trip (-want +got):\n%s", diff)
	}
	if f.CheckOK != nil {
		f.CheckOK(t, res)
	}
}

func checkClass(t *testing.T, err error, want failure.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("the call succeeded, want a %s error", want)
	}
	var fe *failure.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %q (%T) carries no failure class; want a *failure.Error of class %q", err, err, want)
	}
	if fe.Class != want {
		t.Errorf("error %q has class %q, want %q", err, fe.Class, want)
	}
	if err.Error() == "" {
		t.Error("the error has an empty message")
	}
}

func checkCtxErr(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatal("the call succeeded although its context was done")
	}
	if !errors.Is(err, want) {
		t.Errorf("error %q does not wrap %v", err, want)
	}
	var fe *failure.Error
	if !errors.As(err, &fe) {
		t.Errorf("error %q (%T) carries no failure class", err, err)
	}
}

// asJSONNumbers replaces the numbers in v by the json.Number encoding/json
// writes for them, so v compares equal to its decoding with UseNumber.
func asJSONNumbers(v any) any {
	switch v := v.(type) {
	case int64, float64:
		b, _ := json.Marshal(v)
		return json.Number(b)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = asJSONNumbers(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = asJSONNumbers(e)
		}
		return out
	}
	return v
}

func clone(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = clone(e)
		}
		return out
	}
	return v
}

// cancelledDuring checks that a Blocking call ends promptly when its context is
// cancelled, or expires, during the call.
func cancelledDuring(t *testing.T, newTool func(t *testing.T) Fixture) {
	t.Helper()
	t.Run("CancelledDuring", func(t *testing.T) {
		f := newTool(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := f.Tool.Call(ctx, *f.Blocking)
			done <- err
		}()
		if f.Started != nil {
			f.Started(t)
		}
		cancel()
		select {
		case err := <-done:
			checkCtxErr(t, err, context.Canceled)
		case <-time.After(Prompt):
			t.Fatalf("the call did not return within %s of its context being cancelled", Prompt)
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		f := newTool(t)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := call(ctx, t, f.Tool, *f.Blocking)
		checkCtxErr(t, err, context.DeadlineExceeded)
		checkClass(t, err, failure.Retryable)
	})
}
