//go:build linux

package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillbus/skillbus/internal/natstest"
)

func init() { roles["orphan-harness"] = orphanHarnessRole }

// TestExecOrphanNeverRuns kills a worker at the worst moment for an exec step:
// right after it cloned the step's process, before that process armed its
// parent-death signal (prctl(PR_SET_PDEATHSIG), a few instructions after the
// clone in the child). The process is orphaned with nothing yet to kill it, and
// it must never run its program: the job, redelivered to another worker, would
// run the step's side effect a second time.
//
// A harness (orphanHarnessRole) makes the moment happen every time: it traces
// the worker, stops the new process before its first instruction, kills the
// worker, and then lets the process go as its new parent (it is a child
// subreaper), reporting what the process did next.
func TestExecOrphanNeverRuns(t *testing.T) {
	bin := testBinary(t)
	skillFile, err := filepath.Abs("testdata/effect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		mark := filepath.Join(openDir(t), "ran")
		in, _ := json.Marshal(map[string]any{"path": mark})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = []string{
			"TOOLTEST_ROLE=orphan-harness",
			"TOOLTEST_SKILL=" + skillFile,
			"TOOLTEST_INPUTS=" + string(in),
			"PATH=/usr/bin:/bin",
			natstest.RaceEnv(),
		}
		if cred != nil {
			cmd.Env = append(cmd.Env, fmt.Sprintf("TOOLTEST_CRED=%d:%d", cred.Uid, cred.Gid))
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.WaitDelay = time.Second
		out, err := cmd.Output()
		var got struct{ Fate, Error string }
		if jerr := json.Unmarshal(out, &got); err != nil || jerr != nil || got.Error != "" {
			t.Fatalf("harness: %v; report %q (%v); stderr: %s", err, out, jerr, stderr.String())
		}
		// It asked to be traced by its new parent, as every process of a worker
		// does, and stopped before the program's first instruction.
		if got.Fate != "stopped at execve" {
			t.Errorf("the orphaned process: %s; want stopped at execve", got.Fate)
		}
		if b, err := os.ReadFile(mark); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the orphaned process ran its program after its worker was killed: %q, %v", b, err)
		}
	})
}

// orphanHarnessRole starts a worker (workerRole) running TOOLTEST_SKILL under
// ptrace, as user TOOLTEST_CRED ("uid:gid") if set, and follows its forks. The
// first new process in a PID namespace of its own (the exec step's) is held
// stopped where the kernel stops a new tracee, before its first instruction;
// the worker is SIGKILLed; once the process is this harness's child, it is let
// go, and the harness reports its fate: {"fate": "stopped at execve" | "exited
// with status N" | "killed by signal S", "error": ...}.
func orphanHarnessRole() {
	out := map[string]string{}
	defer func() { _ = json.NewEncoder(os.Stdout).Encode(out) }()
	if err := orphanHarness(out); err != nil {
		out["error"] = err.Error()
	}
}

func orphanHarness(out map[string]string) error {
	// Orphans of the worker become this process's children, not init's.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err)
	}
	// ptrace requests come from the thread that traces: this one, for good.
	runtime.LockOSThread()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{
		"TOOLTEST_ROLE=worker",
		"TOOLTEST_SKILL=" + os.Getenv("TOOLTEST_SKILL"),
		"TOOLTEST_INPUTS=" + os.Getenv("TOOLTEST_INPUTS"),
		"PATH=" + os.Getenv("PATH"),
		natstest.RaceEnv(),
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if c := os.Getenv("TOOLTEST_CRED"); c != "" {
		var uid, gid uint32
		if _, err := fmt.Sscanf(c, "%d:%d", &uid, &gid); err != nil {
			return fmt.Errorf("TOOLTEST_CRED %q: %w", c, err)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	worker := cmd.Process.Pid
	var ws unix.WaitStatus
	if _, err := wait4(worker, &ws); err != nil || !ws.Stopped() {
		return fmt.Errorf("the worker did not stop at its execve: %v, %v", ws, err)
	}
	// Follow every thread and process the worker makes; kill them all if this
	// harness dies.
	opts := unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_EXITKILL
	if err := unix.PtraceSetOptions(worker, opts); err != nil {
		return fmt.Errorf("PTRACE_SETOPTIONS: %w", err)
	}
	if err := unix.PtraceCont(worker, 0); err != nil {
		return fmt.Errorf("PTRACE_CONT: %w", err)
	}

	child, workerDead := 0, false
	for !workerDead || child == 0 {
		pid, err := wait4(-1, &ws)
		if err != nil {
			return fmt.Errorf("waiting for the worker: %w (exec process %d)", err, child)
		}
		switch {
		case ws.Exited() || ws.Signaled():
			if pid == worker {
				if child == 0 {
					return fmt.Errorf("the worker ended (%v) before it started its exec process", ws)
				}
				workerDead = true
			}
		case !ws.Stopped():
		case pid == child:
			// Held where it is.
		case child == 0 && ws.StopSignal() == syscall.SIGSTOP && inOwnPidNS(pid):
			// The exec step's process, stopped before its first instruction, as
			// every new tracee is: the worker dies now.
			child = pid
			if err := unix.Kill(worker, unix.SIGKILL); err != nil {
				return fmt.Errorf("killing the worker: %w", err)
			}
		default:
			// A thread or event stop, or a signal for the worker (the Go runtime
			// preempts with SIGURG): pass the signal on.
			sig := ws.StopSignal()
			if sig == syscall.SIGSTOP || sig == syscall.SIGTRAP {
				sig = 0
			}
			_ = unix.PtraceCont(pid, int(sig))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for ppid(child) != os.Getpid() {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d was not given to the harness (parent %d)", child, ppid(child))
		}
		time.Sleep(time.Millisecond)
	}
	defer func() {
		_ = unix.Kill(child, unix.SIGKILL)
		for {
			if pid, err := wait4(-1, &ws); err != nil || pid == child && !ws.Stopped() {
				return
			}
		}
	}()
	if err := unix.PtraceDetach(child); err != nil {
		return fmt.Errorf("letting process %d go: %w", child, err)
	}
	for {
		pid, err := wait4(-1, &ws)
		if err != nil {
			return fmt.Errorf("waiting for process %d: %w", child, err)
		}
		switch {
		case pid != child:
		case ws.Stopped() && ws.StopSignal() == syscall.SIGTRAP:
			out["fate"] = "stopped at execve"
			return nil
		case ws.Exited():
			out["fate"] = fmt.Sprintf("exited with status %d", ws.ExitStatus())
			return nil
		case ws.Signaled():
			out["fate"] = fmt.Sprintf("killed by signal %v", ws.Signal())
			return nil
		default:
			out["fate"] = fmt.Sprintf("stopped by %v", ws.StopSignal())
			return nil
		}
	}
}

func wait4(pid int, ws *unix.WaitStatus) (int, error) {
	for {
		got, err := unix.Wait4(pid, ws, unix.WALL, nil)
		if err != unix.EINTR {
			return got, err
		}
	}
}

// inOwnPidNS reports whether pid is in a PID namespace below this process's.
func inOwnPidNS(pid int) bool {
	v, ok := statusField(pid, "NSpid")
	return ok && len(strings.Fields(v)) > 1
}

func ppid(pid int) int {
	v, _ := statusField(pid, "PPid")
	n, _ := strconv.Atoi(strings.TrimSpace(v))
	return n
}

func statusField(pid int, name string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v, true
		}
	}
	return "", false
}
