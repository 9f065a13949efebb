package tool

import (
	"context"
	"fmt"
	"maps"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Echo returns the "echo" tool: its result is its arguments, unchanged (a shallow
// copy of the map). Arguments that are not JSON-like are a Repairable error. Its
// calls only read (ReadOnly).
func Echo() Tool {
	return readOnlyFunc{funcTool{name: "echo", fn: func(ctx context.Context, c Call) (any, error) {
		if err := cancelled(ctx, "echo"); err != nil {
			return nil, err
		}
		for _, k := range sortedKeys(c.Args) {
			if err := CheckValue(c.Args[k]); err != nil {
				return nil, failure.Repair("echo: argument %q is not a JSON value: %v", k, err)
			}
		}
		return maps.Clone(c.Args), nil
	}}}
}

// Noop returns the "noop" tool: it ignores its arguments and returns nil; its calls
// only read.
func Noop() Tool {
	return readOnlyFunc{funcTool{name: "noop", fn: func(ctx context.Context, _ Call) (any, error) {
		if err := cancelled(ctx, "noop"); err != nil {
			return nil, err
		}
		return nil, nil
	}}}
}

// Builtins returns the built-in tools: http, exec, echo and noop.
func Builtins(http HTTPConfig, exec ExecConfig) *Set {
	s, err := NewSet(NewHTTP(http), NewExec(exec), Echo(), Noop())
	if err != nil {
		panic(err) // the names are fixed and distinct
	}
	return s
}

// cancelled returns a Retryable error wrapping ctx.Err() if ctx is done: the work
// was not done and may be tried again.
func cancelled(ctx context.Context, tool string) error {
	if err := ctx.Err(); err != nil {
		return failure.Wrap(failure.Retryable, fmt.Errorf("%s: %w", tool, err))
	}
	return nil
}
