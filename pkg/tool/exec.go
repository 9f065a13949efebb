package tool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
)

// ExecConfig configures the exec tool. Zero values select the documented defaults.
type ExecConfig struct {
	// WorkDir is the directory processes run in and the root the "dir" argument
	// may not leave, shared by every call (the worker's --exec-dir). Empty: a
	// fresh temporary directory per call, removed when the call returns.
	WorkDir string
	// CallDir, instead, is a directory made for the calls of this ExecConfig
	// alone, and never for two at once (a script skill run's copy of its
	// files): processes run in it as they would in a fresh temporary one, as a
	// user of their own under a root worker, who is given it with mode 0700.
	// The caller makes and removes it. At most one of WorkDir and CallDir.
	CallDir string
	// BaseEnv ("NAME=value" entries) is the environment every process starts
	// with; a call's "env" argument adds to it and wins on equal names. Nothing
	// else is passed on: never the worker's own environment, which holds its
	// credentials. Nil: just "PATH=" + DefaultPath. An empty, non-nil slice:
	// nothing.
	BaseEnv []string
	// Timeout bounds one call; a call's "timeout" argument replaces it. When it
	// expires, the process group is killed. Zero: 30s.
	Timeout time.Duration
	// MaxOutputBytes is how much of stdout, and of stderr, is kept; the rest is
	// read and discarded, and the result says "truncated": true. A skill's
	// permissions may ask for less. Zero: 1 MiB.
	MaxOutputBytes int
	// Limits are resource limits on the process and everything it starts. A
	// skill's permissions may ask for less. Zero fields: those of DefaultLimits;
	// NoLimit lifts one.
	Limits Limits
	// RunAs is the user and group processes run as. Nil: when the worker runs as
	// root, a user and group of UIDs of the call's own, or NobodyID:NobodyID with
	// a WorkDir, which all calls share, so that a process can read neither the
	// worker's memory and environment nor its files, nor, without a WorkDir,
	// another call's; otherwise the worker's own user (only root can run
	// processes as another). The working directory is given to this user.
	// &RunAs{} runs processes as root.
	RunAs *RunAs
	// UIDs are the user IDs a root worker gives calls, one per running call,
	// each with the group of the same number, when RunAs is nil and WorkDir
	// empty (with or without a CallDir). Workers on one host may share them.
	// Zero: DefaultUIDs.
	UIDs UIDRange
	// Log gets a warning, once per process, when the host turns out to refuse
	// what the sandbox uses (namespaces, ptrace) and processes start with less.
	// Nil: slog.Default().
	Log *slog.Logger
}

func (c *ExecConfig) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// RunAs is a user and group ID.
type RunAs struct {
	UID, GID uint32
}

// UIDRange is Count user IDs from First.
type UIDRange struct {
	First, Count uint32
}

// DefaultUIDs are the user IDs of ExecConfig.UIDs by default: 65,536 from
// 1879048192 (0x70000000), above the ranges systemd gives users, dynamic users
// and containers.
var DefaultUIDs = UIDRange{First: 0x70000000, Count: 1 << 16}

// NobodyID is the user and group ID of "nobody", as whom a worker running as root
// runs processes unless ExecConfig.RunAs says otherwise.
const NobodyID = 65534

// Limits are resource limits (setrlimit(2)) of the processes of a call, which
// their children inherit. Zero means the default: DefaultLimits' in
// ExecConfig, the worker's in Permissions.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU: CPU time, after which the kernel kills the process.
	CPUSeconds uint64
	// MemoryBytes is RLIMIT_AS: the size of the address space, so allocations
	// past it fail. Runtimes that reserve address space up front (Go, Java,
	// V8, WebAssembly) need far more than they use.
	MemoryBytes uint64
	// OpenFiles is RLIMIT_NOFILE: one more than the highest file descriptor.
	OpenFiles uint64
	// Processes bounds the processes and threads of one call, with
	// RLIMIT_NPROC, which the kernel counts per user and user namespace, and
	// which each call has of its own (but for calls that share nobody, with a
	// WorkDir or RunAs, whose limit they share; the kernel does not enforce it
	// for root). Forks past it fail, and a call that reaches it is killed and
	// fails, Fatal, saying so: a fork bomb stops within a tenth of a second.
	Processes uint64
}

// NoLimit, as a field of ExecConfig.Limits, lifts that limit.
const NoLimit = math.MaxUint64

// DefaultLimits are the limits of ExecConfig.Limits' zero fields: 256
// processes and threads per call, 1024 open files per process, no limit on CPU
// time (the call's timeout bounds it) or address space.
var DefaultLimits = Limits{CPUSeconds: NoLimit, MemoryBytes: NoLimit, OpenFiles: 1024, Processes: 256}

func (l *Limits) fields() []*uint64 {
	return []*uint64{&l.CPUSeconds, &l.MemoryBytes, &l.OpenFiles, &l.Processes}
}

// or returns l with its zero fields taken from d.
func (l Limits) or(d Limits) Limits {
	for i, f := range l.fields() {
		if *f == 0 {
			*f = *d.fields()[i]
		}
	}
	return l
}

func (l Limits) any() bool {
	return slices.ContainsFunc(l.fields(), func(v *uint64) bool { return *v != 0 && *v != NoLimit })
}

// callLimits are the limits and output cap of a call for a skill with
// permissions p: the skill's where it asks for any, which may be no more than
// the worker's.
func (e *execTool) callLimits(p Permissions) (Limits, int, error) {
	l := e.cfg.Limits
	names := []string{"cpu", "memory", "open_files", "processes"}
	units := []string{" seconds", " bytes", "", ""}
	asked := p.Limits.fields()
	for i, f := range l.fields() {
		want := *asked[i]
		if want == 0 {
			continue
		}
		if *f != NoLimit && want > *f {
			return Limits{}, 0, failure.Fatalf("exec: the skill's permissions.limits.%s (%d%s) is more than this worker allows (%d)", names[i], want, units[i], *f)
		}
		*f = want
	}
	out := e.cfg.MaxOutputBytes
	if p.MaxOutputBytes > out {
		return Limits{}, 0, failure.Fatalf("exec: the skill's permissions.limits.output (%d bytes) is more than this worker allows (%d)", p.MaxOutputBytes, out)
	}
	if p.MaxOutputBytes > 0 {
		out = p.MaxOutputBytes
	}
	return l, out, nil
}

type limitSource int

const (
	limitDefault limitSource = iota // DefaultLimits'
	limitWorker                     // ExecConfig.Limits, set to another value
	limitSkill                      // the skill's permissions.limits
)

// processesFrom says whose process limit a call with permissions p runs under.
func (e *execTool) processesFrom(p Permissions) limitSource {
	switch {
	case p.Limits.Processes != 0:
		return limitSkill
	case e.cfg.Limits.Processes == DefaultLimits.Processes:
		return limitDefault
	}
	return limitWorker
}

// processLimitMessage is why a call's program name was killed at its limit of
// processes and threads: whose limit it was and, unless the skill asked for it, how
// to raise it (a skill may only ask for less than its worker allows).
func processLimitMessage(name string, limit uint64, from limitSource) string {
	msg := fmt.Sprintf("exec: %q was killed: its processes and threads reached their limit of %d", name, limit)
	switch from {
	case limitSkill:
		return msg + ", the skill's permissions.limits.processes"
	case limitDefault:
		return msg + ", the default: a worker started with --exec-max-processes N allows more (0: no limit); a skill's permissions.limits.processes may only ask for less"
	}
	return msg + ", the worker's --exec-max-processes: a worker started with a higher one allows more (0: no limit); a skill's permissions.limits.processes may only ask for less"
}

// Defaults of ExecConfig.
const (
	DefaultExecTimeout    = 30 * time.Second
	DefaultMaxOutputBytes = 1 << 20
)

// DefaultPath is the PATH of processes when ExecConfig.BaseEnv is nil, which is
// then their whole environment.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// ExitTempFail is the exit status (EX_TEMPFAIL in sysexits.h) by which a process
// says "try again later": the exec tool reports it as Retryable.
const ExitTempFail = 75

// ExitError is the error, inside a *failure.Error, for a process that exited with
// a non-zero status or was killed by a signal it did not expect.
type ExitError struct {
	Command string // the first element of the command
	Code    int    // the exit status, or -1 if killed by a signal
	Signal  syscall.Signal
	Stderr  string // the last bytes of stderr, on one line
}

func (e *ExitError) Error() string {
	var msg string
	if e.Code < 0 {
		msg = fmt.Sprintf("exec: %q was killed by signal %d (%v)", e.Command, int(e.Signal), e.Signal)
	} else {
		msg = fmt.Sprintf("exec: %q exited with code %d", e.Command, e.Code)
	}
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// stderrTail is how much of the end of stderr goes into error messages.
const stderrTail = 500

// waitDelay bounds how long Wait waits for output pipes that an escaped
// descendant still holds after the process group was killed.
const waitDelay = 2 * time.Second

// NewExec returns the "exec" tool, which runs a program without a shell.
//
// Arguments:
//
//	command  required; a list of strings: the program and its arguments. A name
//	         without a slash is looked up in the PATH of the process's own
//	         environment (BaseEnv and env), not the worker's; a path with a slash
//	         is used as is, relative to the process's directory.
//	env      map of strings, added to ExecConfig.BaseEnv
//	stdin    string
//	timeout  seconds or a duration string; replaces ExecConfig.Timeout
//	dir      the directory to run in, relative to the working directory and inside it
//
// The result is {"exit_code": 0, "stdout": ..., "stderr": ..., "truncated": bool},
// plus "json" with the decoded value when stdout is a JSON document. See the
// package documentation for the sandbox.
func NewExec(cfg ExecConfig) Tool {
	protectWorker()
	warnNotRoot(&cfg)
	t := &execTool{cfg: cfg}
	if cfg.Timeout <= 0 {
		t.cfg.Timeout = DefaultExecTimeout
	}
	if cfg.MaxOutputBytes <= 0 {
		t.cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	t.cfg.Limits = cfg.Limits.or(DefaultLimits)
	if cfg.UIDs.Count == 0 {
		t.cfg.UIDs = DefaultUIDs
	} else if cfg.UIDs.First == 0 || uint64(cfg.UIDs.First)+uint64(cfg.UIDs.Count) > math.MaxUint32 {
		t.err = failure.Fatalf("exec: misconfigured: UIDs %d+%d: user IDs must be between 1 and %d", cfg.UIDs.First, cfg.UIDs.Count, uint32(math.MaxUint32-1))
	}
	if cfg.BaseEnv == nil {
		t.cfg.BaseEnv = []string{"PATH=" + DefaultPath}
	}
	t.cfg.BaseEnv = slices.Clone(t.cfg.BaseEnv)
	for _, kv := range t.cfg.BaseEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) || strings.ContainsRune(v, 0) {
			t.err = failure.Fatalf("exec: misconfigured: BaseEnv entry %q is not NAME=value", kv)
		}
	}
	if cfg.WorkDir != "" {
		abs, err := filepath.Abs(cfg.WorkDir)
		if err != nil {
			t.err = failure.Fatalf("exec: misconfigured: WorkDir: %v", err)
		}
		t.cfg.WorkDir = abs
	}
	if cfg.CallDir != "" {
		abs, err := filepath.Abs(cfg.CallDir)
		if err != nil {
			t.err = failure.Fatalf("exec: misconfigured: CallDir: %v", err)
		}
		t.cfg.CallDir = abs
		if cfg.WorkDir != "" {
			t.err = failure.Fatalf("exec: misconfigured: both a WorkDir (shared by every call) and a CallDir (of the call's own)")
		}
	}
	return t
}

type execTool struct {
	cfg ExecConfig
	err error // a configuration error, reported by every call
}

func (*execTool) Name() string { return "exec" }

type execRequest struct {
	limits Limits
	// processesFrom says whose limits.Processes is: the skill's, the worker's
	// default, or the worker's own setting.
	processesFrom limitSource
	maxOutput     int
	argv          []string
	callEnv       map[string]string // the call's "env"
	env           []string
	stdin         string
	timeout       time.Duration
	dir           string
}

func (e *execTool) parse(c Call) (*execRequest, error) {
	a := NewArgs("exec", c.Args)
	if err := a.Only(skill.BuiltinToolArgs["exec"]...); err != nil {
		return nil, err
	}
	r := &execRequest{}
	var err error
	if r.argv, err = a.StringList("command"); err != nil {
		return nil, err
	}
	if len(r.argv) == 0 || r.argv[0] == "" {
		return nil, a.Errorf("command", "must name a program as its first element")
	}
	for i, s := range r.argv {
		if strings.ContainsRune(s, 0) {
			return nil, a.Errorf("command", "has a NUL byte at index %d", i)
		}
	}
	env, err := a.OptStringMap("env")
	if err != nil {
		return nil, err
	}
	for k, v := range env {
		if !validEnvName(k) {
			return nil, a.Errorf("env", "has an invalid variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, a.Errorf("env", "has a NUL byte in %q", k)
		}
	}
	r.callEnv = env
	if r.stdin, err = a.OptString("stdin", ""); err != nil {
		return nil, err
	}
	if r.timeout, err = a.OptDuration("timeout", e.cfg.Timeout); err != nil {
		return nil, err
	}
	if r.dir, err = a.OptString("dir", ""); err != nil {
		return nil, err
	}
	if r.dir != "" && !filepath.IsLocal(r.dir) {
		return nil, a.Errorf("dir", "must be a relative path inside the working directory, got %q", r.dir)
	}
	return r, nil
}

// grantedEnv is the part of the worker's environment that p lets processes see.
func grantedEnv(p Permissions) map[string]string {
	m := map[string]string{}
	for _, k := range p.Env {
		if envReserved(k) || !validEnvName(k) {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	return m
}

func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}

// mergeEnv returns base with the layers laid over it in order, sorted by name. It
// is never nil: a nil Cmd.Env would hand the process the worker's own environment.
func mergeEnv(base []string, layers ...map[string]string) []string {
	m := make(map[string]string, len(base))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for _, l := range layers {
		for k, v := range l {
			m[k] = v
		}
	}
	env := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		env = append(env, k+"="+m[k])
	}
	return env
}

// lookPath finds a command the way a shell would with env's PATH. Relative PATH
// entries (and empty ones, which mean ".") are skipped: they would resolve against
// the working directory, whose contents the skill controls.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var path string
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", failure.Fatalf("exec: command %q not found in PATH %q", name, path)
}

// workDir returns the directory the call runs in, resolved of symlinks, and a
// function that removes it if it was made for this call.
func (e *execTool) workDir() (string, func(), error) {
	dir, cleanup := e.cfg.WorkDir, func() {}
	if e.cfg.CallDir != "" {
		dir = e.cfg.CallDir
	} else if dir == "" {
		tmp, err := os.MkdirTemp("", "skillbus-exec-")
		if err != nil {
			return "", nil, failure.Retry("exec: creating a working directory: %v", err)
		}
		dir, cleanup = tmp, func() { _ = os.RemoveAll(tmp) }
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		cleanup()
		return "", nil, failure.Fatalf("exec: misconfigured: working directory: %v", err)
	}
	return real, cleanup, nil
}

// confine resolves dir (already checked to be a local path) inside root and
// rejects it if a symlink leads it outside. A process started there can of course
// still walk out with "cd ..": this keeps skills from being pointed elsewhere by
// mistake, it is no chroot.
func confine(root, dir string) (string, error) {
	a := NewArgs("exec", nil)
	if dir == "" {
		return root, nil
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, dir))
	if err != nil {
		return "", a.Errorf("dir", "names no directory in the working directory: %q: %v", dir, pathErrCause(err))
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", a.Errorf("dir", "must stay inside the working directory, but %q leads out of it through a symlink", dir)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", a.Errorf("dir", "path error: %q: %v", dir, pathErrCause(err))
	}
	if !fi.IsDir() {
		return "", a.Errorf("dir", "must be a directory, but %q is not", dir)
	}
	return real, nil
}

// pathErrCause drops the absolute path from a *PathError: it names the worker's
// directories, which mean nothing to whoever repairs the skill.
func pathErrCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// capWriter keeps the first max bytes written to it and, if tail > 0, the last
// tail bytes. It never fails, so the process is neither blocked nor broken off
// when it writes more than is kept.
type capWriter struct {
	max  int
	buf  []byte
	seen int64
	tail int
	last []byte
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.seen += int64(len(p))
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	if w.tail > 0 {
		if len(p) >= w.tail {
			w.last = append(w.last[:0], p[len(p)-w.tail:]...)
		} else {
			w.last = append(w.last, p...)
			if over := len(w.last) - w.tail; over > 0 {
				w.last = w.last[:copy(w.last, w.last[over:])]
			}
		}
	}
	return len(p), nil
}

func (w *capWriter) truncated() bool { return w.seen > int64(len(w.buf)) }
