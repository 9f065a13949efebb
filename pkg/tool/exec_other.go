//go:build !linux

package tool

import (
	"context"
	"runtime"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Call reports that the exec sandbox (process groups, prlimit under ptrace) is
// built for Linux only.
func (e *execTool) Call(ctx context.Context, c Call) (any, error) {
	if err := cancelled(ctx, "exec"); err != nil {
		return nil, err
	}
	return nil, failure.Fatalf("exec: capability not available on %s: the exec tool runs on Linux only", runtime.GOOS)
}

func protectWorker() {}

func warnNotRoot(*ExecConfig) {}
