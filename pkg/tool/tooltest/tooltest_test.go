package tooltest_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait is a tool whose calls fail by class on request and otherwise block until
// their context is done, exercising every check of the suite.
func wait(started chan<- struct{}) tool.Tool {
	return tool.Func("wait", func(ctx context.Context, c tool.Call) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
		a := tool.NewArgs("wait", c.Args)
		mode, err := a.String("mode")
		if err != nil {
			return nil, err
		}
		switch mode {
		case "ok":
			return map[string]any{"n": int64(1), "f": 1.0, "l": []any{"x"}}, nil
		case "retry":
			return nil, failure.Retry("wait: try later")
		case "fatal":
			return nil, failure.Fatalf("wait: never")
		case "block":
			started <- struct{}{}
			<-ctx.Done()
			return nil, failure.Wrap(failure.Retryable, ctx.Err())
		}
		return nil, a.Errorf("mode", "must be ok, retry, fatal or block, got %q", mode)
	})
}

func TestRun(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		started := make(chan struct{}, 1)
		call := func(mode string) *tool.Call { return &tool.Call{Args: map[string]any{"mode": mode}} }
		return tooltest.Fixture{
			Tool:      wait(started),
			OK:        *call("ok"),
			Retryable: call("retry"),
			Fatal:     call("fatal"),
			BadArg:    call("nonsense"),
			Blocking:  call("block"),
			Started:   func(t *testing.T) { <-started },
		}
	})
}
