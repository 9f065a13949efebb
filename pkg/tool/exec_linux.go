package tool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/skillbus/skillbus/pkg/failure"
)

func (e *execTool) Call(ctx context.Context, c Call) (any, error) {
	if err := cancelled(ctx, "exec"); err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	r, err := e.parse(c)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(r.argv[0], r.env)
	if err != nil {
		return nil, err
	}
	root, cleanup, err := e.workDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	dir, err := confine(root, r.dir)
	if err != nil {
		return nil, err
	}
	return e.run(ctx, r, path, dir)
}

func (e *execTool) run(parent context.Context, r *execRequest, path, dir string) (any, error) {
	ctx, cancel := context.WithTimeout(parent, r.timeout)
	defer cancel()
	name := r.argv[0]

	cmd := exec.CommandContext(ctx, path)
	cmd.Args = r.argv
	cmd.Env = r.env
	cmd.Dir = dir
	if r.stdin != "" {
		cmd.Stdin = strings.NewReader(r.stdin)
	}
	stdout := &capWriter{max: e.cfg.MaxOutputBytes}
	stderr := &capWriter{max: e.cfg.MaxOutputBytes, tail: stderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	limited := e.cfg.Limits.any()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Ptrace: limited}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay

	if started, err := e.start(cmd, limited); err != nil {
		if started {
			_ = killGroup(cmd.Process.Pid)
			_ = cmd.Wait()
		}
		return nil, startError(name, err, limited)
	}
	pid := cmd.Process.Pid

	// Wait for the process to exit without reaping it. While it is a zombie its
	// pid, which is also its process group's id, cannot be reused, so killing the
	// group now reaches the descendants it left behind and nobody else.
	var info unix.Siginfo
	_ = waitid(pid, unix.WEXITED|unix.WNOWAIT, &info)
	_ = killGroup(pid)
	werr := cmd.Wait()

	tail := excerpt(stderr.last, stderrTail, true, stderr.seen > int64(len(stderr.last)))
	switch {
	case werr == nil || errors.Is(werr, exec.ErrWaitDelay):
		// ErrWaitDelay: the process succeeded, but a descendant that left the
		// process group kept its output open.
		res := map[string]any{
			"exit_code": int64(0),
			"stdout":    text(stdout.buf),
			"stderr":    text(stderr.buf),
			"truncated": stdout.truncated() || stderr.truncated(),
		}
		if out := bytes.TrimSpace(stdout.buf); len(out) > 0 && !stdout.truncated() {
			if v, err := DecodeJSON(out); err == nil {
				res["json"] = v
			}
		}
		return res, nil
	case parent.Err() != nil:
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q: %w", name, parent.Err()))
	case ctx.Err() != nil:
		msg := fmt.Sprintf("exec: %q timed out after %s and its process group was killed", name, r.timeout)
		if tail != "" {
			msg += "; stderr: " + tail
		}
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("%s: %w", msg, ctx.Err()))
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q: %w", name, werr))
	}
	xe := &ExitError{Command: name, Code: ee.ExitCode(), Stderr: tail}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		xe.Code, xe.Signal = -1, ws.Signal()
	}
	class := failure.Fatal
	if xe.Code == ExitTempFail {
		class = failure.Retryable
	}
	return nil, failure.Wrap(class, xe)
}

// start starts cmd. With limits, the process is started traced (PTRACE_TRACEME),
// so the kernel stops it right after execve, before the program's first
// instruction; the limits are set on it with prlimit(2) while it is stopped, and
// then it is let go (PTRACE_DETACH). A prlimit after a plain Start would leave a
// window in which the program runs, and forks, without limits. started reports
// whether the process exists, so that the caller must reap it.
func (e *execTool) start(cmd *exec.Cmd, limited bool) (started bool, err error) {
	if !limited {
		return false, cmd.Start()
	}
	// ptrace requests must come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	var info unix.Siginfo
	if err := waitid(pid, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, &info); err != nil {
		return true, fmt.Errorf("waiting for the process to stop: %w", err)
	}
	if info.Code != cldTrapped && info.Code != cldStopped {
		return true, nil // killed before it ran, by Cancel; Wait reports it
	}
	if err := setLimits(pid, e.cfg.Limits); err != nil {
		return true, err
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return true, fmt.Errorf("ptrace detach: %w", err)
	}
	return true, nil
}

// si_code values of SIGCHLD (not exported by x/sys/unix).
const (
	cldTrapped = 4 // CLD_TRAPPED
	cldStopped = 5 // CLD_STOPPED
)

func setLimits(pid int, l Limits) error {
	for _, x := range []struct {
		name     string
		resource int
		value    uint64
		grace    uint64
	}{
		// The hard CPU limit is a second above the soft one, so the process first
		// gets SIGXCPU, whose name tells what happened, rather than a bare SIGKILL.
		{"CPUSeconds", unix.RLIMIT_CPU, l.CPUSeconds, 1},
		{"MemoryBytes", unix.RLIMIT_AS, l.MemoryBytes, 0},
		{"OpenFiles", unix.RLIMIT_NOFILE, l.OpenFiles, 0},
		{"Processes", unix.RLIMIT_NPROC, l.Processes, 0},
	} {
		if x.value == 0 {
			continue
		}
		var old unix.Rlimit
		if err := unix.Prlimit(pid, x.resource, nil, &old); err != nil {
			return fmt.Errorf("limit %s: %w", x.name, err)
		}
		// Without CAP_SYS_RESOURCE a hard limit cannot be raised; the lower holds.
		hard := x.value
		if hard <= math.MaxUint64-x.grace {
			hard += x.grace
		}
		lim := unix.Rlimit{Cur: min(x.value, old.Max), Max: min(hard, old.Max)}
		if err := unix.Prlimit(pid, x.resource, &lim, nil); err != nil {
			return fmt.Errorf("limit %s: %w", x.name, err)
		}
	}
	return nil
}

func waitid(pid, options int, info *unix.Siginfo) error {
	for {
		err := unix.Waitid(unix.P_PID, pid, info, options, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// killGroup kills the process group whose id is pid.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func startError(name string, err error, limited bool) error {
	class := failure.Fatal
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) {
		class = failure.Retryable // out of processes or memory for now
	}
	var hint string
	if limited && errors.Is(err, syscall.EPERM) {
		hint = " (resource limits are applied under ptrace(2); is it forbidden here?)"
	}
	return failure.Wrap(class, fmt.Errorf("exec: starting %q: %w%s", name, err, hint))
}
