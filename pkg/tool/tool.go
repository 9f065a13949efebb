package tool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Call is one invocation of a tool by a workflow step.
type Call struct {
	// Args are the step's arguments, as JSON-like values: map[string]any, []any,
	// string, int64, float64, bool and nil.
	Args map[string]any
	// ExecutionID and Step name the execution and the workflow step making the call.
	ExecutionID string
	Step        string
	// IdempotencyKey is "<executionid>/<step>". Tools with side effects
	// pass it on so a redelivered job does not repeat them; the http tool sends it as
	// the Idempotency-Key header.
	IdempotencyKey string
}

// Tool is something a workflow step can call.
//
// Call returns a JSON-like result (see CheckValue) or an error. Every error is a
// *failure.Error whose class says what the worker does next: retry, fall back or
// repair. A Call cut short by its context returns an error that wraps ctx.Err().
// Tools are safe for concurrent use.
type Tool interface {
	Name() string
	Call(ctx context.Context, c Call) (any, error)
}

// ReadOnly is implemented by a tool that can tell whether a call only reads:
// making it again changes nothing anywhere — an HTTP GET, an echo. A workflow run at
// the default events level keeps no checkpoint after a step whose calls all only
// read: a redelivery after a crash calls them again instead of every execution
// paying a persisted write for them.
type ReadOnly interface {
	ReadOnly(c Call) bool
}

// IsReadOnly reports whether t says call c only reads.
func IsReadOnly(t Tool, c Call) bool {
	r, ok := t.(ReadOnly)
	return ok && r.ReadOnly(c)
}

// readOnlyFunc is a Func whose every call only reads.
type readOnlyFunc struct{ funcTool }

func (readOnlyFunc) ReadOnly(Call) bool { return true }

// Func adapts a function to Tool.
func Func(name string, fn func(ctx context.Context, c Call) (any, error)) Tool {
	return funcTool{name: name, fn: fn}
}

type funcTool struct {
	name string
	fn   func(ctx context.Context, c Call) (any, error)
}

func (f funcTool) Name() string                                  { return f.name }
func (f funcTool) Call(ctx context.Context, c Call) (any, error) { return f.fn(ctx, c) }

// ErrDuplicate is returned by NewSet when two tools share a name.
var ErrDuplicate = errors.New("duplicate tool name")

// Set is a collection of tools looked up by name. It cannot be changed after
// NewSet, so it is safe for concurrent use without locking.
type Set struct {
	tools map[string]Tool
	names []string
}

// NewSet returns a set of the given tools. Names must be non-empty, free of
// whitespace and unique.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{tools: make(map[string]Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool: tool %d is nil", i)
		}
		name := t.Name()
		if name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
			return nil, fmt.Errorf("tool: tool %d has an invalid name %q", i, name)
		}
		if _, ok := s.tools[name]; ok {
			return nil, fmt.Errorf("tool: %w %q", ErrDuplicate, name)
		}
		s.tools[name] = t
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	return s, nil
}

// Lookup returns the tool with the given name. A nil Set holds no tools.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.tools[name]
	return t, ok
}

// Names returns the names of the tools in the set, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}
