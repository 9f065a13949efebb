//go:build linux

package tool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// A stop sends the call's processes SIGTERM, and SIGKILL Grace later to those that
// do not end: a process that handles SIGTERM ends at once, one that ignores it
// ends when the grace is over. The call's error wraps the stop's cause.
func TestExecStopTermsThenKills(t *testing.T) {
	t.Parallel()
	cause := errors.New("cancelled by ada")
	for _, tc := range []struct {
		name     string
		trap     string
		grace    time.Duration
		min, max time.Duration
	}{
		{"a process that handles SIGTERM ends at once", `trap 'exit 3' TERM`, time.Minute, 0, 20 * time.Second},
		{"one that ignores it is killed after the grace", `trap '' TERM`, time.Second, time.Second, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stop := &tool.Stop{Grace: tc.grace}
			// The loop's sleeps are short so that the shell gets to run its trap.
			_, done := startStoppable(t, stop, tc.trap+"; : > ready; while :; do sleep 0.05; done")
			start := time.Now()
			if !stop.Request(cause) || stop.Request(errors.New("again")) {
				t.Fatal("Request: want true for the first request only")
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the stopped call did not return")
			}
			took := time.Since(start)
			if !errors.Is(err, cause) || classOf(t, err) != failure.Fatal {
				t.Errorf("error %v, want a fatal error wrapping the stop's cause", err)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("the call ended %s after the stop, want between %s and %s", took, tc.min, tc.max)
			}
		})
	}
}

// A shell script that neither handles nor ignores SIGTERM, run as its sandbox's
// PID 1 (which the kernel never gives such a signal), stops where it is: the
// command it runs gets the SIGTERM, and the script runs no command after it, nor
// waits out the grace. (An operator's cancelled 'bash -c' ran its next echo 3 s
// after the cancel.)
func TestExecStopEndsAScriptThatIsItsSandboxsInit(t *testing.T) {
	t.Parallel()
	stop := &tool.Stop{Grace: time.Minute}
	dir, done := startStoppable(t, stop, `echo $$ > pid; : > ready; sleep 30; echo after > after`)
	pid, _ := os.ReadFile(filepath.Join(dir, "pid"))
	start := time.Now()
	stop.Request(errors.New("cancelled"))
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the stopped call did not return")
	}
	took := time.Since(start)
	if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
		t.Errorf("the script ran its next command after the stop")
	}
	// Without a PID namespace (a host that refuses them), the script is no
	// init: the SIGTERM ends it, at once too.
	if took > 20*time.Second {
		t.Errorf("the call ended %s after the stop (the script's pid: %s); want at once, not after the grace", took, pid)
	}
}

// startStoppable runs script (which writes ready once it runs) as an exec call
// that stop may stop, in a directory of its own, and returns once it runs: the
// directory, and where the call's error arrives.
func startStoppable(t *testing.T, stop *tool.Stop, script string) (dir string, done <-chan error) {
	t.Helper()
	dir = openDir(t)
	c := withArgs(cmdCall("/bin/sh", "-c", script), "timeout", "2m")
	ch := make(chan error, 1)
	go func() {
		_, err := tool.NewExec(tool.ExecConfig{WorkDir: dir}).Call(tool.WithStop(t.Context(), stop), c)
		ch <- err
	}()
	eventually(t, "the process to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	})
	return dir, ch
}

// A call that ends before any stop is not reported as stopped, and a stop
// requested before Done was asked for still closes it.
func TestStopWithoutProcesses(t *testing.T) {
	t.Parallel()
	var s tool.Stop
	if s.Err() != nil || tool.StopFrom(context.Background()) != nil {
		t.Fatal("a fresh Stop is stopped, or a bare context has one")
	}
	out, err := tool.NewExec(tool.ExecConfig{WorkDir: openDir(t)}).Call(tool.WithStop(t.Context(), &s), cmdCall("true"))
	if err != nil || out == nil {
		t.Fatalf("call under a Stop never requested: %v, %v", out, err)
	}
	s.Request(errors.New("late"))
	select {
	case <-s.Done():
	default:
		t.Fatal("Done is not closed after Request")
	}
	var nilStop *tool.Stop
	if nilStop.Err() != nil {
		t.Fatal("a nil Stop reports a stop")
	}
}

// A StopContext carries its Stop as WithStop does, and everything else of its
// parent.
func TestStopContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	s := &tool.Stop{}
	ctx := &tool.StopContext{Context: context.WithValue(t.Context(), key{}, "v"), Stop: s}
	if tool.StopFrom(ctx) != s || ctx.Value(key{}) != "v" {
		t.Fatal("a StopContext lost its Stop or its parent's values")
	}
}
