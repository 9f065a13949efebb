package tool

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A worker that is not root says, once and at WARN when its exec tool is made, what
// it does not isolate; a root worker says nothing. The test may run as root: the
// user ID the worker sees is replaced.
func TestAWorkerThatIsNotRootSaysWhatItDoesNotIsolate(t *testing.T) {
	saved := geteuid
	t.Cleanup(func() { geteuid = saved; notRootWarned.Store(false) })
	logged := func(uid int) string {
		geteuid = func() int { return uid }
		notRootWarned.Store(false)
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		NewExec(ExecConfig{Log: log})
		NewExec(ExecConfig{Log: log})
		return buf.String()
	}

	out := logged(65534)
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("a worker of user 65534 logged %d warnings, want 1:\n%s", n, out)
	}
	for _, want := range []string{"the worker is not root, so it isolates calls less", "the worker's own user",
		"working directories of the calls running beside it", "in /proc", "uid=65534"} {
		if !strings.Contains(out, want) {
			t.Errorf("the warning lacks %q:\n%s", want, out)
		}
	}
	if out := logged(0); out != "" {
		t.Errorf("a root worker logged:\n%s", out)
	}
}
