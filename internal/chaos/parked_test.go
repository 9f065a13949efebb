//go:build linux

package chaos

import (
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestKillParked: a process stopped in ptrace after execve whose environment
// names the run's sink is counted and killed; one of another run is not.
func TestKillParked(t *testing.T) {
	// The tracer is the thread that started the process.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sink := filepath.Join(t.TempDir(), "sink")
	start := func(dir string) *exec.Cmd {
		cmd := exec.Command("/bin/sleep", "60")
		cmd.Env = []string{"F=" + dir + "/chaos-once.log"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WALL, nil); err != nil || !ws.Stopped() {
			t.Fatalf("the process did not stop at execve: %v, %v", ws, err)
		}
		return cmd
	}
	ours, theirs := start(sink), start(sink+"-other")
	defer func() {
		_ = theirs.Process.Kill()
		_ = theirs.Wait()
	}()
	if n := killParked(sink); n != 1 {
		t.Errorf("killParked found %d processes, want 1", n)
	}
	var xe *exec.ExitError
	if err := ours.Wait(); !errors.As(err, &xe) || xe.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the parked process ended with %v, want SIGKILL", err)
	}
	if err := theirs.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the other run's process: %v, want it alive", err)
	}
}
