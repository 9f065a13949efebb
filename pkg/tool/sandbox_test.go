//go:build linux

package tool_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func init() {
	roles["worker"] = workerRole
	roles["attacker"] = attackerRole
	roles["peeker"] = peekerRole
	roles["euid"] = func() { _ = json.NewEncoder(os.Stdout).Encode(map[string]int{"euid": os.Geteuid()}) }
}

// workerRole is a worker in miniature: it loads the skill TOOLTEST_SKILL, runs it
// with the workflow engine and the exec tool, as a worker does, with
// inputs TOOLTEST_INPUTS (JSON), and prints {"outputs": ..., "error": ...,
// "log": the exec tool's log, "took_ms": how long the run took}.
//
// With TOOLTEST_NOLIMITS set, the exec tool sets no resource limits.
//
// With TOOLTEST_NOPTRACE set, ptrace(2) fails with EPERM in the worker and the
// processes it starts, as under a seccomp profile that forbids it; with
// TOOLTEST_NOUNSHARE, unshare(2) does; with TOOLTEST_NONS, clone(2) refuses
// new namespaces. TOOLTEST_WORKDIR is the exec tool's
// WorkDir.
func workerRole() {
	out := map[string]any{}
	defer func() { _ = json.NewEncoder(os.Stdout).Encode(out) }()
	if os.Getenv("TOOLTEST_NOPTRACE") != "" {
		if err := forbidSyscall(unix.SYS_PTRACE); err != nil {
			out["error"] = err.Error()
			return
		}
	}
	if os.Getenv("TOOLTEST_NONS") != "" {
		if err := forbidNamespaces(); err != nil {
			out["error"] = err.Error()
			return
		}
	}
	if os.Getenv("TOOLTEST_NOUNSHARE") != "" {
		if err := forbidSyscall(unix.SYS_UNSHARE); err != nil {
			out["error"] = err.Error()
			return
		}
	}
	s, ds := skill.LoadPath(os.Getenv("TOOLTEST_SKILL"))
	if s == nil || ds.HasErrors() {
		out["error"] = fmt.Sprintf("loading the skill: %v", ds)
		return
	}
	var inputs map[string]any
	if err := json.Unmarshal([]byte(os.Getenv("TOOLTEST_INPUTS")), &inputs); err != nil {
		out["error"] = err.Error()
		return
	}
	var logs strings.Builder
	defer func() { out["log"] = logs.String() }()
	cfg := tool.ExecConfig{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	cfg.WorkDir = os.Getenv("TOOLTEST_WORKDIR")
	if os.Getenv("TOOLTEST_NOLIMITS") != "" {
		var nl uint64 = tool.NoLimit
		cfg.Limits = tool.Limits{CPUSeconds: nl, MemoryBytes: nl, OpenFiles: nl, Processes: nl}
	}
	tools, _ := tool.NewSet(tool.NewExec(cfg))
	eng, err := workflow.New(workflow.Config{Tools: tools})
	if err != nil {
		out["error"] = err.Error()
		return
	}
	// The engine gives the tools the skill's permissions.
	start := time.Now()
	res, err := eng.Execute(context.Background(), workflow.Run{ExecutionID: "ex1", Skill: s, Inputs: inputs})
	out["took_ms"] = time.Since(start).Milliseconds()
	out["outputs"] = res
	if err != nil {
		out["error"] = err.Error()
	}
}

// attackerRole is the program a hostile skill runs. It tries to take the
// credentials of the worker that started it and to reach NATS at TOOLTEST_NATS,
// and prints what each attempt got: "ok: ..." or "denied: ...".
func attackerRole() {
	pid, err := workerPid()
	if err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"error": err.Error()})
		return
	}
	report := map[string]string{"target": pid}
	try := func(name string, f func() (string, error)) {
		if got, err := f(); err != nil {
			report[name] = "denied: " + err.Error()
		} else {
			report[name] = "ok: " + got
		}
	}
	try("environ", func() (string, error) {
		b, err := os.ReadFile("/proc/" + pid + "/environ")
		return strings.ReplaceAll(string(b), "\x00", " "), err
	})
	try("mem", func() (string, error) {
		f, err := os.Open("/proc/" + pid + "/mem")
		if err != nil {
			return "", err
		}
		f.Close()
		return "opened", nil
	})
	try("ptrace", func() (string, error) {
		n, _ := strconv.Atoi(pid)
		if err := unix.PtraceAttach(n); err != nil {
			return "", err
		}
		_ = unix.PtraceDetach(n)
		return "attached", nil
	})
	try("nats", func() (string, error) {
		c, err := net.DialTimeout("tcp", os.Getenv("TOOLTEST_NATS"), 2*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.Fields(line + " ")[0], err // "INFO" from a NATS server
	})
	_ = json.NewEncoder(os.Stdout).Encode(report)
}

// peekerRole is the program of a hostile skill that goes after another skill's
// process, TOOLTEST_TARGET, and its working directory, TOOLTEST_DIR, and prints
// what each attempt got: "ok: ...", "denied: ..." or, for a process it cannot
// even see, "invisible: ...".
func peekerRole() {
	pid, dir := os.Getenv("TOOLTEST_TARGET"), os.Getenv("TOOLTEST_DIR")
	report := map[string]string{}
	try := func(name string, f func() (string, error)) {
		got, err := f()
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH):
			report[name] = "invisible: " + err.Error()
		case err != nil:
			report[name] = "denied: " + err.Error()
		default:
			report[name] = "ok: " + got
		}
	}
	try("status", func() (string, error) {
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		return strings.ReplaceAll(string(b), "\x00", " "), err
	})
	try("environ", func() (string, error) {
		b, err := os.ReadFile("/proc/" + pid + "/environ")
		return strings.ReplaceAll(string(b), "\x00", " "), err
	})
	try("cwd", func() (string, error) {
		b, err := os.ReadFile("/proc/" + pid + "/cwd/secret.txt")
		return string(b), err
	})
	try("mem", func() (string, error) {
		f, err := os.OpenFile("/proc/"+pid+"/mem", os.O_RDWR, 0)
		if err != nil {
			return "", err
		}
		f.Close()
		return "opened for writing", nil
	})
	try("signal", func() (string, error) {
		n, _ := strconv.Atoi(pid)
		return "may signal", unix.Kill(n, 0)
	})
	try("dir", func() (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, "secret.txt"))
		return string(b), err
	})
	_ = json.NewEncoder(os.Stdout).Encode(report)
}

// workerPid finds the worker as any script could: getppid is 0 in a PID
// namespace, but /proc is the worker's, and there the program's PPid is the
// worker's pid.
func workerPid() (string, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok && strings.TrimSpace(v) != "0" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no PPid in /proc/self/status")
}

// testBinary is a copy of the test binary that any user can run.
func testBinary(t *testing.T) string {
	t.Helper()
	dir := openDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tool.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// asUsers runs f as a root worker and as one that is not root.
func asUsers(t *testing.T, f func(t *testing.T, cred *syscall.Credential)) {
	if os.Geteuid() != 0 {
		t.Run("as its own user", func(t *testing.T) { f(t, nil) })
		return
	}
	t.Run("worker as root", func(t *testing.T) { f(t, nil) })
	t.Run("worker as uid 1000", func(t *testing.T) {
		f(t, &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}})
	})
}

// startWorker starts bin as a worker that runs the skill file with inputs.
func startWorker(t *testing.T, bin string, cred *syscall.Credential, skillFile string, inputs map[string]any, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	in, _ := json.Marshal(inputs)
	abs, _ := filepath.Abs(skillFile)
	cmd := exec.Command(bin)
	cmd.Env = append([]string{
		"TOOLTEST_ROLE=worker",
		"TOOLTEST_SKILL=" + abs,
		"TOOLTEST_INPUTS=" + string(in),
		"PATH=/usr/bin:/bin",
		natstest.RaceEnv(),
	}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, &out
}

// TestExecProcessesDieWithTheWorker: a worker is SIGKILLed while its exec step
// runs a child that started a grandchild in a session of its own; none of them
// may outlive the worker, or the redelivered job would run the step a second
// time alongside them.
func TestExecProcessesDieWithTheWorker(t *testing.T) {
	bin := testBinary(t)
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		mark := sleepMark()
		worker, out := startWorker(t, bin, cred, "testdata/hostile/linger.yaml", map[string]any{"mark": mark})
		// Two shells and two sleeps carry the mark.
		eventually(t, "the exec step's processes to start", func() bool { return len(procsWith(mark)) == 4 })
		if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := worker.Wait()
		var xe *exec.ExitError
		if !errors.As(err, &xe) || xe.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the worker ended with %v, not SIGKILL; output: %s", err, out)
		}
		eventually(t, "the exec step's processes to die with the worker", func() bool { return len(procsWith(mark)) == 0 })
	})
}

// TestExecStepCannotReachTheWorkersSecrets runs a hostile skill: its exec step
// tries to read the worker's environment (which holds a NATS password) and
// memory, to ptrace it, and to connect to NATS. All of it must fail. The same
// skill with network permission reaches NATS, and nothing else.
func TestExecStepCannotReachTheWorkersSecrets(t *testing.T) {
	bin := testBinary(t)
	ns := natstest.Start(t)
	natsAddr := ns.Server.Addr().String()
	secret := fmt.Sprintf("SKILLBUS_NATS_PASSWORD=sekrit-%s", sleepMark())

	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		for _, tc := range []struct {
			skill string
			nats  string // prefix of the report's "nats"
		}{
			{"steal-secrets.yaml", "denied: "},
			{"steal-secrets-net.yaml", "ok: INFO"},
		} {
			t.Run(tc.skill, func(t *testing.T) {
				// The program attacks the process that started it, the worker, whose
				// pid it finds itself: inside its PID namespace getppid is 0.
				inputs := map[string]any{"program": bin, "nats": natsAddr}
				worker, out := startWorker(t, bin, cred, "testdata/hostile/"+tc.skill, inputs, secret)
				if err := worker.Wait(); err != nil {
					t.Fatalf("worker: %v: %s", err, out)
				}
				var got struct {
					Outputs struct {
						Report map[string]string `json:"report"`
					} `json:"outputs"`
					Error string `json:"error"`
				}
				if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Error != "" {
					t.Fatalf("worker output %q: %v", out, err)
				}
				r := got.Outputs.Report
				if r["target"] != strconv.Itoa(worker.Process.Pid) {
					t.Fatalf("the program attacked pid %q, not the worker (%d): %v", r["target"], worker.Process.Pid, r)
				}
				for _, attack := range []string{"environ", "mem", "ptrace"} {
					if !strings.HasPrefix(r[attack], "denied: ") {
						t.Errorf("%s: %q, want denied", attack, r[attack])
					}
				}
				// A root worker's processes do not even see it in their /proc.
				if cred == nil && os.Geteuid() == 0 && !strings.HasSuffix(r["environ"], "no such file or directory") {
					t.Errorf("environ: %q, want no such file", r["environ"])
				}
				if strings.Contains(out.String(), "sekrit") {
					t.Errorf("the secret reached the skill's output: %s", out)
				}
				if !strings.HasPrefix(r["nats"], tc.nats) {
					t.Errorf("nats: %q, want %s...", r["nats"], tc.nats)
				}
			})
		}
	})
}

// forbidSyscall makes system call nr fail with EPERM in every thread of this
// process and in the processes it starts, with a seccomp filter.
func forbidSyscall(nr uint32) error {
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: nr},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	return installFilter(filter)
}

// installFilter installs a seccomp filter on every thread of this process. The
// thread that installs it must have no_new_privs set (or CAP_SYS_ADMIN, which a
// worker run as another user has not): both calls are made from one thread, or
// the Go scheduler may move the goroutine between them and seccomp answer EPERM
// (seen once in make test, run beside other packages on 2 cores).
func installFilter(filter []unix.SockFilter) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// forbidNamespaces makes clone(2) fail with EPERM when asked for a new PID,
// network, user or mount namespace, in every thread of this process and in the
// processes it starts, as on a host that refuses namespaces.
func forbidNamespaces() error {
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 2, K: unix.SYS_CLONE},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 16}, // args[0], low half: the flags
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 1, Jf: 0, K: unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWUSER | unix.CLONE_NEWNS},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	}
	return installFilter(filter)
}

// TestExecUserIsFreedOfItsProcesses: where the host refuses namespaces, a
// process that left its call's process group (setsid) is not in a PID
// namespace that dies with the call; under a root worker it is killed before
// the call's user is released, or a later call leased that user would share
// it, its files and its /proc.
func TestExecUserIsFreedOfItsProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root worker leases users")
	}
	bin := testBinary(t)
	mark := sleepMark()
	t.Cleanup(func() {
		for _, pid := range procsWith(mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	worker, out := startWorker(t, bin, nil, "testdata/hostile/daemon.yaml", map[string]any{"mark": mark}, "TOOLTEST_NONS=1")
	got := finish(t, worker, out)
	if !strings.Contains(got.Log, "the host refuses namespaces") {
		t.Fatalf("the step ran in namespaces; the exec tool's log:\n%s", got.Log)
	}
	eventually(t, "the daemon to be killed with its call", func() bool { return len(procsWith(mark)) == 0 })
}

// TestExecWithoutPtrace: where the host forbids ptrace, processes still run,
// in their namespaces, untraced, and the worker says so once; only resource
// limits, which must be set before the program's first instruction, need it.
func TestExecWithoutPtrace(t *testing.T) {
	bin := testBinary(t)
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		mark := filepath.Join(openDir(t), "ran")
		// Each step runs as a user of its own: the file must be theirs to share.
		if err := os.WriteFile(mark, nil, 0o666); err != nil || os.Chmod(mark, 0o666) != nil {
			t.Fatal(err)
		}
		worker, out := startWorker(t, bin, cred, "testdata/effect.yaml", map[string]any{"path": mark}, "TOOLTEST_NOPTRACE=1", "TOOLTEST_NOLIMITS=1")
		if err := worker.Wait(); err != nil {
			t.Fatalf("worker: %v: %s", err, out)
		}
		var got struct{ Error, Log string }
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Error != "" {
			t.Fatalf("worker output %q: %v", out, err)
		}
		// Each step's process is the first of a PID namespace of its own.
		if b, err := os.ReadFile(mark); err != nil || string(b) != "ran 1\nran 1\n" {
			t.Errorf("the steps' file: %q, %v; want two lines from pid 1", b, err)
		}
		if n := strings.Count(got.Log, "the host refuses ptrace"); n != 1 || !strings.Contains(got.Log, "operation not permitted") {
			t.Errorf("the exec tool's log says ptrace is refused %d times, want once, with the error:\n%s", n, got.Log)
		}

		// With resource limits, the default, a step fails rather than run
		// without them.
		worker, out = startWorker(t, bin, cred, "testdata/effect.yaml", map[string]any{"path": mark}, "TOOLTEST_NOPTRACE=1")
		if err := worker.Wait(); err != nil {
			t.Fatalf("worker: %v: %s", err, out)
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || !strings.Contains(got.Error, "resource limits are applied under ptrace(2); is it forbidden here?") {
			t.Errorf("with limits: worker output %q (%v), want the step to fail for want of ptrace", out, err)
		}
	})
}

// workerReport is what workerRole printed.
type workerReport struct {
	Outputs struct {
		Report map[string]any `json:"report"`
	} `json:"outputs"`
	Error, Log string
	TookMS     int64 `json:"took_ms"`
}

// finish waits for the worker and decodes its report.
func finish(t *testing.T, worker *exec.Cmd, out *bytes.Buffer) workerReport {
	t.Helper()
	if err := worker.Wait(); err != nil {
		t.Fatalf("worker: %v: %s", err, out)
	}
	var got workerReport
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Error != "" {
		t.Fatalf("worker output %q: %v", out, err)
	}
	return got
}

// TestExecStepsAreIsolatedFromEachOther runs two skills at once: one holds a
// secret it was granted, in its environment and in a file of its working
// directory; the other, granted nothing, goes after it through /proc and the
// file system. It may not read, write, signal, or, under a root worker, see it.
func TestExecStepsAreIsolatedFromEachOther(t *testing.T) {
	bin := testBinary(t)
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		r, aout := peekAtVictim(t, bin, cred)
		// Its own PID namespace gives the attacker no pid to signal the other by.
		want := map[string]string{
			"status": "invisible", "environ": "invisible", "cwd": "invisible", "mem": "invisible",
			"signal": "invisible", "dir": "denied",
		}
		if cred != nil {
			// A worker that is not root runs every process as its own user, and
			// cannot mount a private /proc: the other process is there to see,
			// but not to read, and its files are the worker's user's.
			want = map[string]string{
				"status": "ok", "environ": "denied", "cwd": "denied", "mem": "denied",
				"signal": "invisible", "dir": "ok",
			}
		}
		for attack, w := range want {
			if got, _ := r[attack].(string); !strings.HasPrefix(got, w+": ") {
				t.Errorf("%s: %q, want %s", attack, got, w)
			}
		}
		if cred == nil && strings.Contains(aout, "sekrit") {
			t.Errorf("the secret reached the other skill: %s", aout)
		}
	})
}

// TestExecStepsAreIsolatedWithoutUnshare: where the host refuses unshare(2),
// processes get neither a umask nor a private /proc of their own, but still a
// Landlock domain each, which does not depend on it: a process can see
// another's, but not read its environment, files or memory, even as the same
// user (nobody, with a root worker's shared WorkDir), where nothing else keeps
// them apart.
func TestExecStepsAreIsolatedWithoutUnshare(t *testing.T) {
	bin := testBinary(t)
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		envs := map[string][]string{"own directories": {"TOOLTEST_NOUNSHARE=1"}}
		if cred == nil && os.Geteuid() == 0 {
			// Both run as nobody, without user namespaces: Landlock alone keeps
			// them apart.
			envs["one WorkDir"] = []string{"TOOLTEST_NOUNSHARE=1", "TOOLTEST_WORKDIR=" + openDir(t)}
		}
		for name, env := range envs {
			t.Run(name, func(t *testing.T) {
				r, aout := peekAtVictim(t, bin, cred, env...)
				want := map[string]string{
					"status": "ok", "environ": "denied", "cwd": "denied", "mem": "denied", "signal": "invisible",
				}
				for attack, w := range want {
					if got, _ := r[attack].(string); !strings.HasPrefix(got, w+": ") {
						t.Errorf("%s: %q, want %s", attack, got, w)
					}
				}
				var got workerReport
				_ = json.Unmarshal([]byte(aout), &got)
				if !strings.Contains(got.Log, "unshare(CLONE_FS)") || strings.Contains(strings.ToLower(got.Log), "landlock") {
					t.Errorf("the exec tool's log should warn of unshare, and of nothing about Landlock:\n%s", got.Log)
				}
			})
		}
	})
}

// peekAtVictim runs victim.yaml and, while it holds its secret, peek.yaml
// against it, each in a worker of its own with env, and returns peek's report
// and its worker's output.
func peekAtVictim(t *testing.T, bin string, cred *syscall.Credential, env ...string) (map[string]any, string) {
	t.Helper()
	mark := sleepMark()
	secret := "TOOLTEST_VICTIM_SECRET=sekrit-" + mark
	victim, vout := startWorker(t, bin, cred, "testdata/hostile/victim.yaml", map[string]any{"mark": mark}, append([]string{secret}, env...)...)
	var target int
	eventually(t, "the victim's process to start", func() bool {
		pids := procsWith(mark)
		if len(pids) == 1 {
			target = pids[0]
		}
		return target != 0
	})
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", target))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the victim's file", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "secret.txt"))
		return len(b) > 0
	})
	inputs := map[string]any{"program": bin, "target": strconv.Itoa(target), "dir": dir}
	attacker, aout := startWorker(t, bin, cred, "testdata/hostile/peek.yaml", inputs, env...)
	r := finish(t, attacker, aout).Outputs.Report
	if victim.ProcessState != nil {
		t.Fatalf("the victim ended early: %s", vout)
	}
	return r, aout.String()
}

// TestExecSetuidGivesNothing: a setuid-root program run by a step's shell (not
// its first program, which is traced) runs as the step's user.
func TestExecSetuidGivesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a setuid-root program needs root")
	}
	bin := testBinary(t)
	if err := os.Chmod(bin, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		worker, out := startWorker(t, bin, cred, "testdata/hostile/setuid.yaml", map[string]any{"program": bin})
		r := finish(t, worker, out).Outputs.Report
		if euid, ok := r["euid"].(float64); !ok || euid == 0 {
			t.Errorf("the setuid-root program ran with effective user %v, want the step's user", r["euid"])
		}
	})
}

// TestExecForkBombIsStopped: a fork bomb under the default limits is stopped
// within a second on an idle machine, with everything it started, and its step
// fails saying why.
func TestExecForkBombIsStopped(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	bin := testBinary(t)
	asUsers(t, func(t *testing.T, cred *syscall.Credential) {
		mark := sleepMark()
		worker, out := startWorker(t, bin, cred, "testdata/hostile/forkbomb.yaml", map[string]any{"mark": mark})
		if err := worker.Wait(); err != nil {
			t.Fatalf("worker: %v: %s", err, out)
		}
		var got workerReport
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("worker output %q: %v", out, err)
		}
		want := `step bomb: exec: "/bin/bash" was killed: its processes and threads reached their limit of 256, the default: ` +
			`a worker started with --exec-max-processes N allows more (0: no limit); a skill's permissions.limits.processes may only ask for less`
		if !strings.HasPrefix(got.Error, want) {
			t.Errorf("error %q, want %q", got.Error, want)
		}
		// Stopped in 161-835 ms on an idle machine (20 runs, as root and as a uid
		// worker); the bound leaves room for -race beside other packages' tests on
		// two cores, where 1.1 s was seen. Without the limits it runs until the
		// step's timeout, a minute.
		if got.TookMS >= 3000 {
			t.Errorf("the fork bomb ran for %d ms, want under 3 s", got.TookMS)
		}
		t.Logf("stopped after %d ms", got.TookMS)
		eventually(t, "the fork bomb's processes to die", func() bool { return len(procsWith(mark)) == 0 })
	})
}

// A descriptor the worker inherited without close-on-exec (a secret file a
// supervisor or a wrapper opened for it) reaches no exec call: made after it was
// opened, the exec tool marks every descriptor from 3 up close-on-exec.
func TestExecInheritsNoDescriptorOfTheWorker(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("ROOT-ONLY-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(secret, unix.O_RDONLY, 0) // no O_CLOEXEC, as an inherited one
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const at = 97
	if err := unix.Dup2(fd, at); err != nil { // dup2 clears close-on-exec
		t.Fatal(err)
	}
	defer unix.Close(at)
	if flags, err := unix.FcntlInt(at, unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
		t.Fatalf("fd %d flags %d, %v: want it inheritable", at, flags, err)
	}
	res := mustRun(t, tool.ExecConfig{}, cmdCall("ls", "/proc/self/fd"))
	out := fmt.Sprint(res["stdout"])
	if !slices.Contains(strings.Fields(out), "0") || slices.Contains(strings.Fields(out), "97") {
		t.Errorf("the call saw the worker's descriptor:\n%s\nstderr: %v", out, res["stderr"])
	}
}
