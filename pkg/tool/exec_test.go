//go:build linux

package tool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

func cmdCall(command ...any) tool.Call {
	return tool.Call{Args: map[string]any{"command": command}, ExecutionID: "ex1", Step: "s1", IdempotencyKey: "ex1/s1"}
}

func withArgs(c tool.Call, kv ...any) tool.Call {
	for i := 0; i < len(kv); i += 2 {
		c.Args[kv[i].(string)] = kv[i+1]
	}
	return c
}

func execFixture(cfg tool.ExecConfig) func(t *testing.T) tooltest.Fixture {
	return func(t *testing.T) tooltest.Fixture {
		mark := filepath.Join(openDir(t), "started")
		return tooltest.Fixture{
			Tool: tool.NewExec(cfg),
			OK:   cmdCall("printf", `{"n":%d,"s":"%s"}`, "1", "x"),
			CheckOK: func(t *testing.T, res any) {
				want := map[string]any{
					"exit_code": int64(0),
					"stdout":    `{"n":1,"s":"x"}`,
					"stderr":    "",
					"truncated": false,
					"json":      map[string]any{"n": int64(1), "s": "x"},
				}
				if diff := cmp.Diff(want, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			},
			Retryable: ptr(cmdCall("/bin/sh", "-c", "exit 75")),
			Fatal:     ptr(cmdCall("/bin/sh", "-c", "echo boom >&2; exit 3")),
			BadArg:    ptr(withArgs(cmdCall(), "command", "ls -l")),
			Blocking: ptr(withArgs(cmdCall("/bin/sh", "-c", `: > "$MARK"; exec sleep 60`),
				"env", map[string]any{"MARK": mark})),
			Started: func(t *testing.T) {
				eventually(t, "the blocking process to start", func() bool {
					_, err := os.Stat(mark)
					return err == nil
				})
			},
		}
	}
}

func TestExecConformance(t *testing.T) {
	tooltest.Run(t, execFixture(tool.ExecConfig{}))
}

func TestExecConformanceWithLimits(t *testing.T) {
	tooltest.Run(t, execFixture(tool.ExecConfig{
		Limits: tool.Limits{CPUSeconds: 30, MemoryBytes: 4 << 30, OpenFiles: 256, Processes: 10000},
	}))
}

// openDir is a temporary directory that the user processes run as (nobody, when
// the tests run as root) can reach and write: t.TempDir's parent is private.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, x := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(d), 0o755}, {d, 0o777}} {
		if err := os.Chmod(x.path, x.mode); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// eventually polls cond until it holds, failing the test after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func run(t *testing.T, cfg tool.ExecConfig, c tool.Call) (map[string]any, error) {
	t.Helper()
	res, err := tool.NewExec(cfg).Call(t.Context(), c)
	if err != nil {
		return nil, err
	}
	return res.(map[string]any), nil
}

func mustRun(t *testing.T, cfg tool.ExecConfig, c tool.Call) map[string]any {
	t.Helper()
	res, err := run(t, cfg, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	return res
}

func TestExecNoShell(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	const arg = "a; rm -rf victim && echo pwned | cat $HOME `id` $(id) > out *"
	if err := os.Mkdir(filepath.Join(dir, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, tool.ExecConfig{WorkDir: dir}, cmdCall("printf", "%s", arg))
	if res["stdout"] != arg {
		t.Errorf("stdout = %q, want the argument verbatim %q", res["stdout"], arg)
	}
	if _, err := os.Stat(filepath.Join(dir, "victim")); err != nil {
		t.Errorf("the argument was interpreted: %v", err)
	}
}

// Not parallel: t.Setenv changes the process environment.
func TestExecEnvironmentIsExplicit(t *testing.T) {
	t.Setenv("SKILLBUS_TEST_SENTINEL", "must-not-leak")

	bin := openDir(t)
	writeScript(t, filepath.Join(bin, "mytool"), "#!/bin/sh\necho mine\n")
	workerBin := openDir(t)
	writeScript(t, filepath.Join(workerBin, "workertool"), "#!/bin/sh\necho worker\n")
	t.Setenv("PATH", workerBin+string(os.PathListSeparator)+os.Getenv("PATH"))

	for _, tc := range []struct {
		name string
		cfg  tool.ExecConfig
		env  map[string]any
		want []string
	}{
		{"default base", tool.ExecConfig{}, nil, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
		{"call env added", tool.ExecConfig{}, map[string]any{"FOO": "bar", "EMPTY": ""},
			[]string{"EMPTY=", "FOO=bar", "PATH=/usr/local/bin:/usr/bin:/bin"}},
		{"call env wins", tool.ExecConfig{BaseEnv: []string{"PATH=/bin", "LANG=C.UTF-8"}}, map[string]any{"PATH": "/usr/bin"},
			[]string{"LANG=C.UTF-8", "PATH=/usr/bin"}},
		{"nothing at all", tool.ExecConfig{BaseEnv: []string{}}, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cmdCall("/usr/bin/env")
			if tc.env != nil {
				c.Args["env"] = tc.env
			}
			res := mustRun(t, tc.cfg, c)
			got := strings.Fields(res["stdout"].(string))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the child's environment (-want +got):\n%s", diff)
			}
			if strings.Contains(res["stdout"].(string), "SKILLBUS_TEST_SENTINEL") {
				t.Error("the worker's environment leaked into the child")
			}
		})
	}

	t.Run("PATH of the call, not of the worker", func(t *testing.T) {
		res := mustRun(t, tool.ExecConfig{}, withArgs(cmdCall("mytool"), "env", map[string]any{"PATH": bin}))
		if res["stdout"] != "mine\n" {
			t.Errorf("stdout = %q", res["stdout"])
		}
		_, err := run(t, tool.ExecConfig{}, cmdCall("workertool"))
		if err == nil || classOf(t, err) != failure.Fatal || !strings.Contains(err.Error(), `command "workertool" not found in PATH "/usr/local/bin:/usr/bin:/bin"`) {
			t.Errorf("a command only on the worker's PATH: error %v, want fatal not found", err)
		}
		// A relative PATH entry would resolve against the working directory.
		dir := openDir(t)
		writeScript(t, filepath.Join(dir, "local"), "#!/bin/sh\necho local\n")
		_, err = run(t, tool.ExecConfig{WorkDir: dir}, withArgs(cmdCall("local"), "env", map[string]any{"PATH": ".:"}))
		if err == nil || classOf(t, err) != failure.Fatal {
			t.Errorf("a command found only through a relative PATH entry: error %v, want fatal", err)
		}
	})
}

func writeScript(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestExecRelativeCommandAndStdin(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	writeScript(t, filepath.Join(dir, "upper.sh"), "#!/bin/sh\ntr a-z A-Z\n")
	res := mustRun(t, tool.ExecConfig{WorkDir: dir}, withArgs(cmdCall("./upper.sh"), "stdin", "hello"))
	if res["stdout"] != "HELLO" {
		t.Errorf("stdout = %q", res["stdout"])
	}
	_, err := run(t, tool.ExecConfig{WorkDir: dir}, cmdCall("./missing.sh"))
	if err == nil || classOf(t, err) != failure.Fatal || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing script: error %v, want fatal", err)
	}
	writeScript(t, filepath.Join(dir, "noexec"), "")
	os.Chmod(filepath.Join(dir, "noexec"), 0o644)
	_, err = run(t, tool.ExecConfig{WorkDir: dir}, cmdCall("./noexec"))
	if err == nil || classOf(t, err) != failure.Fatal || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("non-executable file: error %v, want fatal permission denied", err)
	}
}

func TestExecResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		want   map[string]any
	}{
		{"json list", `printf '[1, 2.5]\n'; echo warn >&2`, map[string]any{
			"exit_code": int64(0), "stdout": "[1, 2.5]\n", "stderr": "warn\n", "truncated": false,
			"json": []any{int64(1), 2.5},
		}},
		{"not json", `echo hello`, map[string]any{
			"exit_code": int64(0), "stdout": "hello\n", "stderr": "", "truncated": false,
		}},
		{"two json values are not one", `echo 1 2`, map[string]any{
			"exit_code": int64(0), "stdout": "1 2\n", "stderr": "", "truncated": false,
		}},
		{"invalid UTF-8 is replaced", `printf 'a\377b'`, map[string]any{
			"exit_code": int64(0), "stdout": "a\uFFFDb", "stderr": "", "truncated": false,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := mustRun(t, tool.ExecConfig{}, cmdCall("/bin/sh", "-c", tc.script))
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecExitClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		class  failure.Class
		code   int
		msg    string
	}{
		{"tempfail", "echo later >&2; exit 75", failure.Retryable, 75, `exec: "/bin/sh" exited with code 75: later`},
		{"failure", "echo first >&2; echo 'second  line' >&2; exit 3", failure.Fatal, 3, `exec: "/bin/sh" exited with code 3: first second line`},
		{"no stderr", "exit 1", failure.Fatal, 1, `exec: "/bin/sh" exited with code 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := run(t, tool.ExecConfig{}, cmdCall("/bin/sh", "-c", tc.script))
			if got := classOf(t, err); got != tc.class {
				t.Errorf("class %q, want %q", got, tc.class)
			}
			var xe *tool.ExitError
			if !errors.As(err, &xe) || xe.Code != tc.code {
				t.Fatalf("error %v is not an ExitError with code %d", err, tc.code)
			}
			if err.Error() != tc.msg {
				t.Errorf("message\n got %q\nwant %q", err, tc.msg)
			}
		})
	}

	t.Run("stderr tail", func(t *testing.T) {
		t.Parallel()
		_, err := run(t, tool.ExecConfig{MaxOutputBytes: 100},
			cmdCall("/bin/sh", "-c", `head -c 5000 /dev/zero | tr '\0' a >&2; echo THE-END >&2; exit 2`))
		msg := err.Error()
		if !strings.HasSuffix(msg, "aaaaTHE-END") || len(msg) > 600 || !strings.Contains(msg, "exited with code 2: …aaa") {
			t.Errorf("message %q (%d bytes), want the last ~500 bytes of stderr", msg, len(msg))
		}
	})
}

func TestExecOutputCap(t *testing.T) {
	t.Parallel()
	cfg := tool.ExecConfig{MaxOutputBytes: 10}
	res := mustRun(t, cfg, cmdCall("/bin/sh", "-c", "printf 0123456789abcdef; printf 0123456789 >&2"))
	want := map[string]any{"exit_code": int64(0), "stdout": "0123456789", "stderr": "0123456789", "truncated": true}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	res = mustRun(t, cfg, cmdCall("printf", "0123456789"))
	if res["truncated"] != false {
		t.Errorf("exactly MaxOutputBytes marked truncated")
	}
	// A process writing far more than is kept is neither blocked nor broken off.
	res = mustRun(t, tool.ExecConfig{MaxOutputBytes: 1000}, cmdCall("/bin/sh", "-c", "head -c 20000000 /dev/zero; echo done >&2"))
	if len(res["stdout"].(string)) != 1000 || res["stderr"] != "done\n" || res["truncated"] != true {
		t.Errorf("stdout %d bytes, stderr %q, truncated %v", len(res["stdout"].(string)), res["stderr"], res["truncated"])
	}
}

func TestExecDir(t *testing.T) {
	t.Parallel()
	root := openDir(t)
	realRoot, _ := filepath.EvalSymlinks(root)
	for _, d := range []string{"sub/deeper", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	os.Symlink("/etc", filepath.Join(root, "out"))
	os.Symlink("../other", filepath.Join(root, "sub", "in"))
	cfg := tool.ExecConfig{WorkDir: root}

	for _, tc := range []struct {
		dir  string
		want string // the child's working directory, relative to the root
	}{
		{"", "."}, {".", "."}, {"sub", "sub"}, {"sub/deeper/..", "sub"}, {"sub/in", "other"},
	} {
		res := mustRun(t, cfg, withArgs(cmdCall("/bin/pwd"), "dir", tc.dir))
		if got := strings.TrimSpace(res["stdout"].(string)); got != filepath.Join(realRoot, tc.want) {
			t.Errorf("dir %q: the child ran in %q, want %q", tc.dir, got, filepath.Join(realRoot, tc.want))
		}
	}

	for _, tc := range []struct{ dir, want string }{
		{"..", `exec: argument "dir" must be a relative path inside the working directory, got ".."`},
		{"sub/../..", `exec: argument "dir" must be a relative path inside the working directory, got "sub/../.."`},
		{"/etc", `exec: argument "dir" must be a relative path inside the working directory, got "/etc"`},
		{"out", `exec: argument "dir" must stay inside the working directory, but "out" leads out of it through a symlink`},
		{"missing", `exec: argument "dir" names no directory in the working directory: "missing": no such file or directory`},
		{"file", `exec: argument "dir" must be a directory, but "file" is not`},
	} {
		_, err := run(t, cfg, withArgs(cmdCall("/bin/pwd"), "dir", tc.dir))
		if err == nil || err.Error() != tc.want {
			t.Errorf("dir %q: error %v\nwant %q", tc.dir, err, tc.want)
			continue
		}
		if got := classOf(t, err); got != failure.Repairable {
			t.Errorf("dir %q: class %q, want repairable", tc.dir, got)
		}
	}
}

func TestExecTempWorkDirIsRemoved(t *testing.T) {
	t.Parallel()
	res := mustRun(t, tool.ExecConfig{}, cmdCall("/bin/sh", "-c", "pwd -P; mkdir -p a/b; touch a/b/c"))
	dir := strings.TrimSpace(res["stdout"].(string))
	if !strings.Contains(filepath.Base(dir), "skillbus-exec-") {
		t.Fatalf("the process ran in %q, not a fresh temporary directory", dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary directory %s is still there: %v", dir, err)
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	// Long enough for the shell to start and write to stderr on a loaded machine.
	_, err := run(t, tool.ExecConfig{Timeout: time.Hour}, withArgs(cmdCall("/bin/sh", "-c", "echo waiting >&2; exec sleep 60"), "timeout", 2))
	if got := classOf(t, err); got != failure.Retryable {
		t.Errorf("class %q, want retryable", got)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap DeadlineExceeded", err)
	}
	want := `exec: "/bin/sh" timed out after 2s and its process group was killed; stderr: waiting: context deadline exceeded`
	if err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}
}

// spawnScript starts two background sleeps, one a grandchild, and records their
// pids in files; it then runs tail.
const spawnScript = `
sleep "$S" & echo $! > child.pid
sh -c 'sleep "$S" & echo $! > grandchild.pid; wait' &
`

func TestExecKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tail string
		args []any
		stop func(t *testing.T, dir string, cancel context.CancelFunc)
		want func(t *testing.T, err error)
	}{
		{
			name: "on timeout",
			tail: "wait",
			args: []any{"timeout", "1s"},
			want: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) || classOf(t, err) != failure.Retryable {
					t.Errorf("error %v, want a retryable deadline error", err)
				}
			},
		},
		{
			name: "on cancel",
			tail: "wait",
			stop: func(t *testing.T, dir string, cancel context.CancelFunc) {
				waitPids(t, dir)
				cancel()
			},
			want: func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) || classOf(t, err) != failure.Retryable {
					t.Errorf("error %v, want a retryable cancellation", err)
				}
			},
		},
		{
			// The leader exits at once; what it left behind still holds its
			// stdout. The call must neither wait for it nor leave it running.
			name: "when the leader exits",
			tail: "while ! [ -s grandchild.pid ]; do :; done; echo bye",
			want: func(t *testing.T, err error) {
				if err != nil {
					t.Errorf("error %v, want success", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := openDir(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			mark := sleepMark()
			c := withArgs(cmdCall("/bin/sh", "-c", spawnScript+tc.tail), append(tc.args, "env", map[string]any{"S": mark})...)
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := tool.NewExec(tool.ExecConfig{WorkDir: dir}).Call(ctx, c)
				done <- err
			}()
			if tc.stop != nil {
				tc.stop(t, dir, cancel)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the call did not return")
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the call took %s: it waited for the background processes", took)
			}
			tc.want(t, err)
			readPids(t, dir) // the script got far enough
			eventually(t, "the background sleeps to die", func() bool { return len(procsWith(mark)) == 0 })
		})
	}
}

// TestExecEscapedDescendant: a descendant that leaves the process group dies
// with the PID namespace, and it must not hang the call.
func TestExecEscapedDescendant(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	mark := sleepMark()
	res, err := run(t, tool.ExecConfig{WorkDir: dir}, withArgs(cmdCall("/bin/sh", "-c",
		`setsid sh -c 'echo $$ > escaped.pid.tmp; mv escaped.pid.tmp escaped.pid; exec sleep "$S"' & while ! [ -s escaped.pid ]; do :; done; echo out`),
		"env", map[string]any{"S": mark}))
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if res["stdout"] != "out\n" {
		t.Errorf("stdout = %q", res["stdout"])
	}
	eventually(t, "the escaped sleep to die", func() bool { return len(procsWith(mark)) == 0 })
}

// sleepMark is a duration for sleep(1) that no other process uses, so that the
// sleeps of one test can be told apart in /proc: scripts run in PID namespaces of
// their own, so the pids they see are not the worker's.
func sleepMark() string {
	return fmt.Sprintf("3600.%09d", rand.IntN(1e9))
}

// procsWith returns the live processes with arg among their arguments.
func procsWith(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), arg) || gone(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func waitPids(t *testing.T, dir string) {
	t.Helper()
	eventually(t, "the pid files", func() bool { return len(readPidsQuiet(dir)) == 2 })
}

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	pids := readPidsQuiet(dir)
	if len(pids) != 2 {
		t.Fatalf("found %d pid files, want 2: the script did not get far enough", len(pids))
	}
	return pids
}

func readPidsQuiet(dir string) []int {
	var pids []int
	for _, f := range []string{"child.pid", "grandchild.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// gone reports whether the process has exited. A killed orphan may linger as a
// zombie if whoever adopted it does not reap it, so zombies count as gone.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}

// A call killed at its limit of processes says whose limit it was: the skill's, or
// the worker's, with how to raise it.
func TestExecProcessLimitSaysWhoseItIs(t *testing.T) {
	t.Parallel()
	// bash, which retries a fork that fails, so the call lives until it is killed;
	// dash gives up at once.
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	spawn := withArgs(cmdCall("/bin/bash", "-c", `for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 30 & done; wait`), "timeout", "20s")
	for _, tc := range []struct {
		name  string
		cfg   tool.ExecConfig
		perms tool.Permissions
		want  string
	}{
		{"the skill's", tool.ExecConfig{}, tool.Permissions{Limits: tool.Limits{Processes: 6}},
			`exec: "/bin/bash" was killed: its processes and threads reached their limit of 6, the skill's permissions.limits.processes`},
		{"the worker's", tool.ExecConfig{Limits: tool.Limits{Processes: 6}}, tool.Permissions{},
			`exec: "/bin/bash" was killed: its processes and threads reached their limit of 6, the worker's --exec-max-processes: ` +
				`a worker started with a higher one allows more (0: no limit); a skill's permissions.limits.processes may only ask for less`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tool.NewExec(tc.cfg).Call(tool.WithPermissions(t.Context(), tc.perms), spawn)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || classOf(t, err) != failure.Fatal {
				t.Errorf("error %v, want fatal %q", err, tc.want)
			}
		})
	}
}

func TestExecLimits(t *testing.T) {
	t.Parallel()
	cfg := tool.ExecConfig{Limits: tool.Limits{CPUSeconds: 7, MemoryBytes: 1 << 30, OpenFiles: 64, Processes: 500}}

	// The very first thing the program does already sees the limits: they were
	// set before it ran. Its children inherit them.
	res := mustRun(t, cfg, cmdCall("/bin/sh", "-c", `ulimit -n; ulimit -t; ulimit -v; ulimit -p; sh -c 'ulimit -n'`))
	if diff := cmp.Diff("64\n7\n1048576\n500\n64\n", res["stdout"]); diff != "" {
		t.Errorf("limits seen by the shell (-want +got):\n%s", diff)
	}

	res = mustRun(t, cfg, cmdCall("/bin/cat", "/proc/self/limits"))
	limits := map[string][]string{}
	for _, line := range strings.Split(res["stdout"].(string), "\n") {
		if name, rest, ok := strings.Cut(line, "  "); ok {
			limits[name] = strings.Fields(rest)[:2]
		}
	}
	for name, want := range map[string][]string{
		"Max cpu time":      {"7", "8"},
		"Max address space": {"1073741824", "1073741824"},
		"Max open files":    {"64", "64"},
		"Max processes":     {"500", "500"},
	} {
		if diff := cmp.Diff(want, limits[name]); diff != "" {
			t.Errorf("%s (soft, hard) (-want +got):\n%s", name, diff)
		}
	}

	t.Run("open files are enforced", func(t *testing.T) {
		t.Parallel()
		// bash, because dash quietly moves a descriptor it cannot have.
		if _, err := os.Stat("/bin/bash"); err != nil {
			t.Skip("no /bin/bash")
		}
		_, err := run(t, tool.ExecConfig{Limits: tool.Limits{OpenFiles: 8}},
			cmdCall("/bin/bash", "-c", `exec 9</dev/null && echo opened`))
		if err == nil || classOf(t, err) != failure.Fatal {
			t.Errorf("opening fd 9 under a limit of 8: error %v, want fatal", err)
		}
	})

	t.Run("CPU time is enforced", func(t *testing.T) {
		t.Parallel()
		_, err := run(t, tool.ExecConfig{Limits: tool.Limits{CPUSeconds: 1}},
			cmdCall("/bin/sh", "-c", `while :; do :; done`))
		// The program is its PID namespace's init, which ignores SIGXCPU at the
		// soft limit; the hard limit, a second later, sends SIGKILL.
		var xe *tool.ExitError
		if !errors.As(err, &xe) || xe.Signal != syscall.SIGKILL || classOf(t, err) != failure.Fatal {
			t.Errorf("a busy loop under 1 CPU second: error %v, want fatal SIGKILL", err)
		}
		want := `exec: "/bin/sh" was killed by signal 9 (killed)`
		if err == nil || err.Error() != want {
			t.Errorf("message %v, want %q", err, want)
		}
	})
}

func TestExecBadArguments(t *testing.T) {
	t.Parallel()
	e := tool.NewExec(tool.ExecConfig{})
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"no command", map[string]any{}, `exec: argument "command" is required`},
		{"command string", map[string]any{"command": "ls -l"}, `exec: argument "command" must be a list of strings, got string`},
		{"command number", map[string]any{"command": []any{"ls", int64(1)}}, `exec: argument "command" must be a list of strings, got number at index 1`},
		{"command empty", map[string]any{"command": []any{}}, `exec: argument "command" must name a program as its first element`},
		{"program empty", map[string]any{"command": []any{""}}, `exec: argument "command" must name a program as its first element`},
		{"NUL", map[string]any{"command": []any{"echo", "a\x00b"}}, `exec: argument "command" has a NUL byte at index 1`},
		{"env not strings", map[string]any{"command": []any{"true"}, "env": map[string]any{"A": true}}, `exec: argument "env" must be a map of strings, got bool at "A"`},
		{"env bad name", map[string]any{"command": []any{"true"}, "env": map[string]any{"A=B": "c"}}, `exec: argument "env" has an invalid variable name "A=B"`},
		{"stdin", map[string]any{"command": []any{"true"}, "stdin": []any{}}, `exec: argument "stdin" must be a string, got list`},
		{"timeout", map[string]any{"command": []any{"true"}, "timeout": int64(-1)}, `exec: argument "timeout" must be positive, got -1s`},
		{"dir", map[string]any{"command": []any{"true"}, "dir": int64(1)}, `exec: argument "dir" must be a string, got number`},
		{"unknown", map[string]any{"command": []any{"true"}, "cwd": "x"}, `exec: unknown argument "cwd" (known: command, dir, env, stdin, timeout)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.Call(t.Context(), tool.Call{Args: tc.args})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant %q", err, tc.want)
			}
			if got := classOf(t, err); got != failure.Repairable {
				t.Errorf("class %q, want repairable", got)
			}
		})
	}
}

func TestExecMisconfigured(t *testing.T) {
	t.Parallel()
	for _, cfg := range []tool.ExecConfig{
		{BaseEnv: []string{"PATH"}},
		{WorkDir: filepath.Join(openDir(t), "missing")},
		{WorkDir: openDir(t), CallDir: openDir(t)},
	} {
		_, err := tool.NewExec(cfg).Call(t.Context(), cmdCall("true"))
		if err == nil || classOf(t, err) != failure.Fatal || !strings.Contains(err.Error(), "misconfigured") {
			t.Errorf("%+v: error %v, want fatal misconfigured", cfg, err)
		}
	}
}

func TestExecEnvironmentPermissions(t *testing.T) {
	t.Setenv("TOOLTEST_ALLOWED", "yes")
	t.Setenv("TOOLTEST_OTHER", "no")
	t.Setenv("SKILLBUS_NATS_PASSWORD", "sekrit")
	ctx := tool.WithPermissions(t.Context(), tool.Permissions{Env: []string{"TOOLTEST_ALLOWED", "SKILLBUS_NATS_PASSWORD", "TOOLTEST_MISSING"}})
	res, err := tool.NewExec(tool.ExecConfig{}).Call(ctx, withArgs(cmdCall("/usr/bin/env"), "env", map[string]any{"FOO": "bar"}))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(res.(map[string]any)["stdout"].(string))
	want := []string{"FOO=bar", "PATH=/usr/local/bin:/usr/bin:/bin", "TOOLTEST_ALLOWED=yes"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the process's environment (-want +got):\n%s", diff)
	}
}

// TestExecNetworkPermission: without network permission a process has no route
// anywhere, not even to the worker's loopback; with it, it has the worker's.
func TestExecNetworkPermission(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	// bash's /dev/tcp, so that no client program is needed.
	c := cmdCall("/bin/bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/`+port+` && head -n1 <&3`)
	for _, tc := range []struct {
		perms tool.Permissions
		ok    bool
	}{{tool.Permissions{}, false}, {tool.Permissions{Network: true}, true}} {
		res, err := tool.NewExec(tool.ExecConfig{}).Call(tool.WithPermissions(t.Context(), tc.perms), c)
		switch {
		case tc.ok && (err != nil || res.(map[string]any)["stdout"] != "hello\n"):
			t.Errorf("with network permission: %v, %v", res, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "Network is unreachable")):
			t.Errorf("without network permission: %v, %v; want unreachable", res, err)
		}
	}
}

// BenchmarkExec measures one exec call of /bin/true: the namespaces, the user
// switch and the start from the spawner thread, serial and 8 at a time.
func BenchmarkExec(b *testing.B) {
	for _, tc := range []struct {
		name  string
		perms tool.Permissions
	}{{"no network", tool.Permissions{}}, {"network", tool.Permissions{Network: true}}} {
		e := tool.NewExec(tool.ExecConfig{})
		ctx := tool.WithPermissions(b.Context(), tc.perms)
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Call(ctx, cmdCall("/bin/true")); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+" parallel 8", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Call(ctx, cmdCall("/bin/true")); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestExecUserPerCall: under a root worker, calls running at once run as users
// of their own, from ExecConfig.UIDs, without supplementary groups, in working
// directories only they may enter, and create private files; they read what
// any user may read, and nothing more.
func TestExecUserPerCall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root worker gives calls users of their own")
	}
	t.Parallel()
	e := tool.NewExec(tool.ExecConfig{})
	// Each call holds its user until both have started.
	dir := openDir(t)
	script := `printf '%s %s %s %s\n' "$(id -u)" "$(id -G)" "$(stat -c %a .)" "$(umask)"
cat /etc/hostname >/dev/null && echo hostname readable
cat /etc/shadow 2>/dev/null || echo shadow denied
: > "$0/$1"; while [ "$(ls "$0" | wc -l)" -lt 2 ]; do :; done`
	got := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		go func() {
			res, err := e.Call(t.Context(), cmdCall("/bin/sh", "-c", script, dir, name))
			if err != nil {
				got <- err.Error()
				return
			}
			got <- res.(map[string]any)["stdout"].(string)
		}()
	}
	users := map[string]bool{}
	for range 2 {
		out := <-got
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || lines[1] != "hostname readable" || lines[2] != "shadow denied" {
			t.Fatalf("call printed %q", out)
		}
		f := strings.Fields(lines[0])
		uid, _ := strconv.ParseUint(f[0], 10, 32)
		if len(f) != 4 || uid < uint64(tool.DefaultUIDs.First) || uid >= uint64(tool.DefaultUIDs.First+tool.DefaultUIDs.Count) {
			t.Fatalf("id, groups, directory mode and umask: %q, want a user of %+v", lines[0], tool.DefaultUIDs)
		}
		if diff := cmp.Diff([]string{f[0], f[0], "700", "0077"}, f); diff != "" {
			t.Errorf("id, groups, directory mode and umask (-want +got):\n%s", diff)
		}
		users[f[0]] = true
	}
	if len(users) != 2 {
		t.Errorf("two calls at once ran as the same user: %v", users)
	}

	// A directory of the call's own (a script skill run's) makes no difference.
	own := openDir(t)
	res := mustRun(t, tool.ExecConfig{CallDir: own}, cmdCall("/bin/sh", "-c", `echo "$(id -u) $(stat -c %a .)"`))
	f := strings.Fields(res["stdout"].(string))
	if uid, _ := strconv.ParseUint(f[0], 10, 32); len(f) != 2 || uid < uint64(tool.DefaultUIDs.First) || f[1] != "700" {
		t.Errorf("with a CallDir, user and directory mode %q, want a user of %+v and 700", f, tool.DefaultUIDs)
	}
}

// TestExecDefaultLimits: without configuration, a call may have 256 processes
// and threads and each process 1024 open files; CPU time and address space are
// not limited.
func TestExecDefaultLimits(t *testing.T) {
	t.Parallel()
	res := mustRun(t, tool.ExecConfig{}, cmdCall("/bin/sh", "-c", `ulimit -p; ulimit -n; ulimit -t; ulimit -v`))
	if diff := cmp.Diff("256\n1024\nunlimited\nunlimited\n", res["stdout"]); diff != "" {
		t.Errorf("limits seen by the shell (-want +got):\n%s", diff)
	}
	// NoLimit lifts one.
	res = mustRun(t, tool.ExecConfig{Limits: tool.Limits{OpenFiles: tool.NoLimit}}, cmdCall("/bin/sh", "-c", `ulimit -p; ulimit -n`))
	if n := strings.Fields(res["stdout"].(string)); len(n) != 2 || n[0] != "256" || n[1] == "1024" {
		t.Errorf("processes and open files with open files lifted: %q", res["stdout"])
	}
}

// TestExecLimitsFromPermissions: a skill's permissions.limits tighten the
// worker's; asking for more than the worker allows fails the call, fatally.
func TestExecLimitsFromPermissions(t *testing.T) {
	t.Parallel()
	s, ds := skill.ParseWorkflow("skill.yaml", []byte(`name: tight
description: Asks for tight limits.
permissions:
  limits: {processes: 20, open_files: 32, cpu: 5s, memory: 1GiB, output: 10}
steps:
  - {id: a, tool: noop}
`))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	perms := tool.SkillPermissions(s)
	want := tool.Permissions{Limits: tool.Limits{CPUSeconds: 5, MemoryBytes: 1 << 30, OpenFiles: 32, Processes: 20}, MaxOutputBytes: 10}
	if diff := cmp.Diff(want, perms); diff != "" {
		t.Errorf("SkillPermissions (-want +got):\n%s", diff)
	}
	cfg := tool.ExecConfig{Limits: tool.Limits{CPUSeconds: 60, MemoryBytes: 4 << 30, OpenFiles: tool.NoLimit}}
	ctx := tool.WithPermissions(t.Context(), perms)
	res, err := tool.NewExec(cfg).Call(ctx, cmdCall("/bin/sh", "-c", `ulimit -p; ulimit -n; ulimit -t; ulimit -v`))
	if err != nil {
		t.Fatal(err)
	}
	got := res.(map[string]any)
	if got["stdout"] != "20\n32\n5\n10" || got["truncated"] != true {
		t.Errorf("stdout %q (truncated %v), want the skill's limits, cut at 10 bytes", got["stdout"], got["truncated"])
	}

	for _, tc := range []struct {
		perms tool.Permissions
		want  string
	}{
		{tool.Permissions{Limits: tool.Limits{Processes: 257}}, "exec: the skill's permissions.limits.processes (257) is more than this worker allows (256)"},
		{tool.Permissions{Limits: tool.Limits{CPUSeconds: 61}}, "exec: the skill's permissions.limits.cpu (61 seconds) is more than this worker allows (60)"},
		{tool.Permissions{MaxOutputBytes: 2 << 20}, "exec: the skill's permissions.limits.output (2097152 bytes) is more than this worker allows (1048576)"},
	} {
		_, err := tool.NewExec(cfg).Call(tool.WithPermissions(t.Context(), tc.perms), cmdCall("true"))
		if err == nil || err.Error() != tc.want || classOf(t, err) != failure.Fatal {
			t.Errorf("%+v: error %v, want fatal %q", tc.perms, err, tc.want)
		}
	}
	// Where the worker sets no limit, a skill may ask for any.
	res, err = tool.NewExec(cfg).Call(tool.WithPermissions(t.Context(), tool.Permissions{Limits: tool.Limits{OpenFiles: 100}}), cmdCall("/bin/sh", "-c", "ulimit -n"))
	if err != nil || res.(map[string]any)["stdout"] != "100\n" {
		t.Errorf("open files under a worker without that limit: %v, %v; want 100", res, err)
	}
}

// A skill's environment.allow passes on the worker's variables it names, but
// never a credential of the process: SKILLBUS_*, OpenTelemetry's exporter headers,
// or a name ReserveEnv reserved (a webhook's secret_env, in dev).
func TestExecAllowedEnvironmentHoldsNoCredential(t *testing.T) {
	t.Setenv("SKILLBUS_NATS_PASSWORD", "nats-secret")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer otel-secret")
	t.Setenv("TEST_HOOK_SECRET_RESERVED", "hook-secret")
	t.Setenv("TEST_REGION", "eu-west-1")
	tool.ReserveEnv("TEST_HOOK_SECRET_RESERVED")
	p := tool.Permissions{Env: []string{"SKILLBUS_NATS_PASSWORD", "OTEL_EXPORTER_OTLP_HEADERS", "TEST_HOOK_SECRET_RESERVED", "TEST_REGION"}}
	res, err := tool.NewExec(tool.ExecConfig{}).Call(tool.WithPermissions(t.Context(), p), cmdCall("/usr/bin/env"))
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprint(res.(map[string]any)["stdout"])
	if !strings.Contains(out, "TEST_REGION=eu-west-1") {
		t.Errorf("the allowed variable is missing:\n%s", out)
	}
	for _, secret := range []string{"nats-secret", "otel-secret", "hook-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("the call sees %s:\n%s", secret, out)
		}
	}
}
