package tool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

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
	perms := PermissionsFrom(ctx)
	if r.limits, r.maxOutput, err = e.callLimits(perms); err != nil {
		return nil, err
	}
	r.processesFrom = e.processesFrom(perms)
	r.env = mergeEnv(e.cfg.BaseEnv, grantedEnv(perms), r.callEnv)
	path, err := lookPath(r.argv[0], r.env)
	if err != nil {
		return nil, err
	}
	cred, release, err := e.credential()
	if err != nil {
		return nil, err
	}
	defer release()
	root, cleanup, err := e.workDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if cred != nil {
		// The process must be able to work in its directory; only the directory
		// itself changes hands, not what is in it.
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, failure.Fatalf("exec: misconfigured: giving the working directory to user %d: %v", cred.Uid, err)
		}
		// A directory of the call's own is its user's alone.
		if e.cfg.WorkDir == "" {
			if err := os.Chmod(root, 0o700); err != nil {
				return nil, failure.Fatalf("exec: misconfigured: making the working directory private: %v", err)
			}
		}
	}
	dir, err := confine(root, r.dir)
	if err != nil {
		return nil, err
	}
	leased := cred != nil && e.cfg.RunAs == nil && e.cfg.WorkDir == ""
	return e.run(ctx, r, path, dir, sandbox{cred: cred, network: perms.Network, leased: leased})
}

// credential is the user a call's process runs as, or nil for the worker's
// own, and what to call once the process has been reaped.
func (e *execTool) credential() (*syscall.Credential, func(), error) {
	euid := uint32(os.Geteuid())
	ra, release := e.cfg.RunAs, func() {}
	switch {
	case ra == nil && euid != 0:
		return nil, release, nil
	case ra == nil && e.cfg.WorkDir != "":
		// Every call shares the operator's --exec-dir: they cannot have a user
		// each, or one could not use what another left there.
		ra = &RunAs{UID: NobodyID, GID: NobodyID}
	case ra == nil:
		uid, free, err := leaseUID(e.cfg.UIDs)
		if err != nil {
			return nil, nil, err
		}
		ra, release = &RunAs{UID: uid, GID: uid}, free
	case euid != 0 && (ra.UID != euid || ra.GID != uint32(os.Getegid())):
		return nil, nil, failure.Fatalf("exec: misconfigured: RunAs %d:%d, but only a worker running as root can run processes as another user (it runs as %d)", ra.UID, ra.GID, euid)
	case euid != 0:
		return nil, release, nil
	}
	// Groups is empty, not nil: the process drops root's supplementary groups.
	return &syscall.Credential{Uid: ra.UID, Gid: ra.GID, Groups: []uint32{}}, release, nil
}

// leaseUID picks a user ID of r that no other call has, in this worker or, by a
// lock on its byte in a lock file, in any other on the host, until free is
// called. It goes round the range rather than taking the lowest free ID, so
// that an ID comes back as late as it can: files a call leaves outside its
// working directory (in /tmp) belong to its ID.
func leaseUID(r UIDRange) (uid uint32, free func(), err error) {
	f, err := uidLockFile()
	if err != nil {
		return 0, nil, failure.Fatalf("exec: misconfigured: %v", err)
	}
	uids.mu.Lock()
	defer uids.mu.Unlock()
	if uids.used == nil {
		uids.used = map[uint32]bool{}
		uids.next = rand.Uint32()
	}
	for range r.Count {
		uid := r.First + uids.next%r.Count
		uids.next++
		if uids.used[uid] {
			continue
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(uid), Len: 1}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			continue // another worker's
		}
		uids.used[uid] = true
		return uid, func() {
			uids.mu.Lock()
			defer uids.mu.Unlock()
			lk.Type = unix.F_UNLCK
			_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
			delete(uids.used, uid)
		}, nil
	}
	return 0, nil, failure.Retry("exec: every user ID of %d-%d is in use by a running process", r.First, r.First+r.Count-1)
}

var uids struct {
	mu   sync.Mutex
	used map[uint32]bool
	next uint32
}

// uidLockFile is the file on whose bytes workers lock the user IDs they lease:
// open file description locks (F_OFD_SETLK), which the kernel drops when the
// worker dies. It is in /run, which only root can write and which is not
// cleaned of old files, or else the temporary directory, and must be root's.
var uidLockFile = sync.OnceValues(func() (*os.File, error) {
	dir := "/run"
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = os.TempDir()
	}
	name := filepath.Join(dir, "skillbus-exec-uids.lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the user ID lock file: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Uid != 0 || st.Mode&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("the user ID lock file %s must be root's and private to it", name)
	}
	return f, nil
})

// sandbox is how one process is confined.
type sandbox struct {
	cred    *syscall.Credential // nil: the worker's user
	network bool                // keep the worker's network namespace
	leased  bool                // cred is a user leased for this call alone
}

// nsRefused is the error with which the host refused to create namespaces, once
// it has; processes are then started without them.
var nsRefused atomic.Pointer[error]

// ptraceRefused is the error with which the host refused PTRACE_TRACEME (EPERM
// from a start that succeeded untraced), once it has; processes without
// resource limits are then started untraced, and the window that tracing closes
// (see spawner.spawn) is open again.
var ptraceRefused atomic.Pointer[error]

// cloneflags are the namespaces a process gets: a PID namespace, whose processes
// all die when the process (its init) dies, and a network namespace unless the
// skill may use the network.
//
// A worker that is not root needs a user namespace to create them; inside one,
// the process cannot read or ptrace the worker even as the same user. A root
// worker avoids one: with a new user namespace Go must fork the whole worker
// rather than vfork, which costs milliseconds per process. (It sets the
// resource limits of a process of another user as that user: asUser.)
func (sb sandbox) cloneflags() uintptr {
	if nsRefused.Load() != nil {
		return 0
	}
	flags := uintptr(unix.CLONE_NEWPID)
	if !sb.network {
		flags |= unix.CLONE_NEWNET
	}
	if os.Geteuid() != 0 {
		flags |= unix.CLONE_NEWUSER
	}
	return flags
}

func (e *execTool) newCmd(ctx context.Context, r *execRequest, path, dir string, sb sandbox, flags uintptr, traced bool) (*exec.Cmd, *capWriter, *capWriter) {
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = r.argv
	cmd.Env = r.env
	cmd.Dir = dir
	if r.stdin != "" {
		cmd.Stdin = strings.NewReader(r.stdin)
	}
	stdout := &capWriter{max: r.maxOutput}
	stderr := &capWriter{max: r.maxOutput, tail: stderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	attr := &syscall.SysProcAttr{
		Setpgid: true,
		// The kernel kills the process when the thread that started it exits:
		// each process is started from a thread that lives as long as it does
		// (spawnThread), so this fires when the worker dies, even by SIGKILL.
		Pdeathsig:  syscall.SIGKILL,
		Ptrace:     traced,
		Credential: sb.cred,
		Cloneflags: flags,
	}
	if flags&unix.CLONE_NEWUSER != 0 && sb.cred != nil {
		// A root worker maps the user the process becomes to itself, so that the
		// process can take that user's IDs, and drop root's groups, inside. A worker that is not root
		// writes no map: it could not write the process's uid_map, which is
		// root's while the process, like the worker, is not dumpable. Such a
		// process keeps the worker's IDs, but sees them as 65534 (the overflow ID).
		uid, gid := int(sb.cred.Uid), int(sb.cred.Gid)
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = true
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	return cmd, stdout, stderr
}

// nsErrors are the errors with which clone(2) refuses namespaces: no permission
// (no CAP_SYS_ADMIN, user namespaces disabled or forbidden by seccomp), not
// built into the kernel, or the per-user limit reached.
var nsErrors = []error{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS, syscall.ENOSYS, syscall.EACCES}

func isNSError(err error) bool {
	return slices.ContainsFunc(nsErrors, func(t error) bool { return errors.Is(err, t) })
}

func (e *execTool) run(parent context.Context, r *execRequest, path, dir string, sb sandbox) (any, error) {
	ctx, cancel := context.WithTimeout(parent, r.timeout)
	defer cancel()
	name := r.argv[0]

	th, err := newSpawnThread(e.cfg.log())
	if err != nil {
		return nil, failure.Fatalf("exec: %q: %v", name, err)
	}
	defer th.stop()
	if sb.leased {
		// The user goes back to be leased again: none of its processes may
		// still run then. Without a PID namespace (a host that refuses them),
		// one that left the process group (setsid) outlives the call; kill(-1)
		// as the call's user reaches every process of that user, and no other
		// (not the worker itself, as kill(-1) spares the caller). Deferred
		// after th.stop, it runs before it.
		defer th.do(func() {
			_ = asUser(sb.cred, func() error { return unix.Kill(-1, unix.SIGKILL) })
		})
	}

	flags := sb.cloneflags()
	if flags&unix.CLONE_NEWNET == 0 && !sb.network {
		return nil, noNetnsError(name)
	}
	sp := spawner{e: e, ctx: ctx, th: th, r: r, path: path, dir: dir, sb: sb}
	p, started, err := sp.spawn(flags)
	if err != nil {
		if started {
			_ = killGroup(p.cmd.Process.Pid)
			_ = p.cmd.Wait()
		}
		return nil, startFailure(parent, ctx, r, err)
	}
	werr, overLimit, stopped := waitGroup(p.cmd, r.limits.Processes, StopFrom(parent))
	if stopped != nil {
		return nil, failure.Wrap(failure.Fatal, fmt.Errorf("exec: %q was stopped (SIGTERM; SIGKILL after %s to whatever had not ended): %w", name, StopFrom(parent).grace(), stopped))
	}
	return p.outcome(parent, ctx, r, werr, overLimit)
}

// process is one call's process and the output it writes.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *capWriter
}

// spawner starts one call's process from its spawner thread th, falling back
// to what the host allows.
type spawner struct {
	e         *execTool
	ctx       context.Context
	th        *spawnThread
	r         *execRequest
	path, dir string
	sb        sandbox
}

func (sp spawner) newProcess(flags uintptr, traced bool) process {
	cmd, stdout, stderr := sp.e.newCmd(sp.ctx, sp.r, sp.path, sp.dir, sp.sb, flags, traced)
	return process{cmd: cmd, stdout: stdout, stderr: stderr}
}

// spawn starts the process in the namespaces flags names. started reports
// whether a process exists, even when err says it may not run.
func (sp spawner) spawn(flags uintptr) (p process, started bool, err error) {
	limited := sp.r.limits.any()
	// A process in a PID namespace of its own is started traced.
	//
	// Pdeathsig makes the kernel kill the process when the spawner thread dies,
	// but the child arms it only some instructions after clone(2), in
	// prctl(PR_SET_PDEATHSIG). Go closes the window for a parent that died before
	// that: the child then finds getppid() changed and kills itself. In a new PID
	// namespace neither half works: getppid() is 0 whoever the parent is, and the
	// namespace's init cannot kill itself (it ignores signals from inside without a
	// handler). So a worker killed between clone and prctl — microseconds, but
	// milliseconds on a loaded machine, where the child waits to be scheduled —
	// left a process that ran its program, side effect included, after the worker
	// was gone and while the job was due to run again elsewhere.
	//
	// PTRACE_TRACEME comes after prctl in the child, and a traced process stops
	// right after execve, before the program's first instruction, until its tracer
	// lets it go. The spawner thread, which is the tracer, lets it go once it has
	// stopped, when the parent-death signal is certainly armed. If the worker died
	// before that, either the child had armed it, and the kernel kills it, or it
	// had not: it is then another process's child when it asks to be traced, and
	// it stops after execve, having run nothing, until it is killed (or its new
	// parent, a subreaper, exits: the signal it armed then kills it), or, not
	// allowed to be traced by that parent, it exits. A re-executed guard
	// program would close the window too, at the cost of starting a second program
	// per call: 6–14 ms measured, against 0.1–0.2 ms for the ptrace stop.
	traced := limited || flags&unix.CLONE_NEWPID != 0 && ptraceRefused.Load() == nil
	p = sp.newProcess(flags, traced)
	started, err = sp.e.start(sp.th, p.cmd, sp.r.limits, nil)
	if err != nil && !started && traced && !limited && errors.Is(err, syscall.EPERM) {
		p, started, err = sp.spawnUntraced(flags, err)
	}
	if err != nil && !started && flags != 0 && isNSError(err) {
		p, started, err = sp.spawnWithoutNamespaces(flags, err)
	}
	return p, started, err
}

// spawnUntraced starts the process again, untraced, after PTRACE_TRACEME
// failed with err. Perhaps the host forbids ptrace (Yama's ptrace_scope 2 or
// 3, a seccomp profile), not namespaces: the process is then started as before
// tracing closed the window spawn describes.
func (sp spawner) spawnUntraced(flags uintptr, err error) (process, bool, error) {
	ptErr := fmt.Errorf("PTRACE_TRACEME: %w", err)
	p := sp.newProcess(flags, false)
	started, err := sp.e.start(sp.th, p.cmd, Limits{}, nil)
	if started && ptraceRefused.CompareAndSwap(nil, &ptErr) {
		sp.e.cfg.log().Warn("exec: the host refuses ptrace, so processes without resource limits start untraced: "+
			"one whose worker dies in the instant it starts it may run after the worker is gone", "error", ptErr)
	}
	return p, started, err
}

// spawnWithoutNamespaces starts the process again, without namespaces, after
// creating them failed with err. Perhaps the host forbids namespaces (a
// container without CAP_SYS_ADMIN, user namespaces switched off). It is
// started traced, so that it stops before its first instruction: if it starts,
// namespaces were the cause, and the process runs only if it may run without
// them.
func (sp spawner) spawnWithoutNamespaces(flags uintptr, err error) (process, bool, error) {
	nsErr := fmt.Errorf("creating namespaces (%s): %w", nsNames(flags), err)
	p := sp.newProcess(0, true)
	started, err := sp.e.start(sp.th, p.cmd, sp.r.limits, func() error {
		if nsRefused.CompareAndSwap(nil, &nsErr) {
			sp.e.cfg.log().Warn("exec: the host refuses namespaces, so processes start without them: "+
				"exec steps of skills without network permission fail", "error", nsErr)
		}
		if !sp.sb.network {
			return noNetnsError(sp.r.argv[0])
		}
		return nil
	})
	return p, started, err
}

// startFailure is the error of a process that did not start, or was not let
// run: a failure the start decided on stands, a cancelled call or a timeout is
// retryable, anything else is what startError makes of it.
func startFailure(parent, ctx context.Context, r *execRequest, err error) error {
	name := r.argv[0]
	switch fe := (*failure.Error)(nil); {
	case errors.As(err, &fe):
		return err
	case parent.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q: %w", name, parent.Err()))
	case ctx.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q timed out after %s before it started: %w", name, r.timeout, ctx.Err()))
	}
	return startError(name, err, r.limits.any())
}

// waitGroup waits for cmd's process to exit, kills what it left in its process
// group, and reaps it. overLimit reports whether it was killed for reaching
// its limit of processes and threads (NoLimit or 0: none watched); stopped is
// the cause of a stop requested while it ran (see signalOnStop).
func waitGroup(cmd *exec.Cmd, limit uint64, stop *Stop) (werr error, overLimit bool, stopped error) {
	pid := cmd.Process.Pid
	// Wait for the process to exit without reaping it. While it is a zombie its
	// pid, which is also its process group's id, cannot be reused, so killing the
	// group now reaches the descendants it left behind and nobody else. (In a PID
	// namespace the kernel has killed them already: they died with its init.)
	var over atomic.Bool
	stopWatch := func() {}
	if limit != NoLimit && limit != 0 {
		stopWatch = watchProcesses(pid, limit, func() {
			over.Store(true)
			_ = killGroup(pid)
		})
	}
	endSignals := func() bool { return false }
	if stop != nil {
		nsInit := cmd.SysProcAttr != nil && cmd.SysProcAttr.Cloneflags&unix.CLONE_NEWPID != 0
		endSignals = signalOnStop(stop, pid, nsInit)
	}
	var info unix.Siginfo
	_ = waitid(pid, unix.WEXITED|unix.WNOWAIT, &info)
	stopWatch()
	signalled := endSignals() // before the reap, after which pid may name another process
	_ = killGroup(pid)
	werr = cmd.Wait()
	if signalled {
		stopped = stop.Err()
	}
	return werr, over.Load(), stopped
}

// signalOnStop sends the process group pid SIGTERM when stop is requested, and
// SIGKILL Grace later, until the returned function is called (the process has
// exited and is not yet reaped, so pid still names its group); end reports
// whether it signalled.
//
// A process that is its PID namespace's init (nsInit) never gets a SIGTERM it
// neither handles nor ignores: the kernel drops it. Left running, a shell script
// would go on with its next commands, side effects and all, once the SIGTERM
// ended the one it was running. So such an init is stopped where it is first
// (SIGSTOP reaches an init from outside its namespace), its processes get the
// SIGTERM and what is left of the grace, and the group is killed as soon as none
// of them is alive. An init that handles SIGTERM (a trap) runs its handler, and
// one that ignores it gets the grace, as any process does.
func signalOnStop(stop *Stop, pid int, nsInit bool) (end func() bool) {
	exited := make(chan struct{})
	var wg sync.WaitGroup
	var signalled atomic.Bool
	wg.Go(func() {
		select {
		case <-exited:
			return
		case <-stop.Done():
		}
		signalled.Store(true)
		frozen := nsInit && termDefault(pid)
		if frozen {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(stop.grace())
		defer t.Stop()
		var poll <-chan time.Time
		if frozen {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			poll = tick.C
		}
		for {
			select {
			case <-exited:
				return
			case <-t.C:
				_ = killGroup(pid)
				return
			case <-poll:
				if !childrenLive(pid) {
					_ = killGroup(pid)
					return
				}
			}
		}
	})
	return func() bool {
		close(exited)
		wg.Wait()
		return signalled.Load()
	}
}

// termDefault reports whether process pid's SIGTERM disposition is the default:
// neither caught nor ignored (/proc/<pid>/status). false when it cannot tell.
func termDefault(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	bit := uint64(1) << (syscall.SIGTERM - 1)
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "SigCgt" && k != "SigIgn" {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil || mask&bit != 0 {
			return false
		}
		seen++
	}
	return seen == 2
}

// childrenLive reports whether process pid has a child that has not exited, in
// any of its threads; true when it cannot tell. A child counts as exited when
// every thread of it has: its main thread may have ended (the process reads as a
// zombie) while another still runs. Without /proc/<pid>/task/<tid>/children (a
// kernel built without it), the children are found by their parent in
// /proc/<child>/stat.
func childrenLive(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return true
	}
	var kids []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) && len(kids) == 0 {
			kids, err = childrenByParent(pid)
			if err != nil {
				return true
			}
			break
		}
		if err != nil {
			return true
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	for _, c := range kids {
		if live, known := procLive("/proc/" + c + "/stat"); !known || live {
			return true
		}
		threads, err := os.ReadDir("/proc/" + c + "/task")
		if err != nil {
			continue // reaped: gone
		}
		for _, th := range threads {
			if live, known := procLive("/proc/" + c + "/task/" + th.Name() + "/stat"); known && live {
				return true
			}
		}
	}
	return false
}

// procLive reads a stat file's state: live unless a zombie or dead; known is
// false when the file reads as neither (a gone process reads as not live).
func procLive(path string) (live, known bool) {
	st, err := os.ReadFile(path)
	if err != nil {
		return false, true // gone
	}
	i := bytes.LastIndexByte(st, ')') // the state follows the command's name
	if i < 0 || i+2 >= len(st) {
		return false, false
	}
	s := st[i+2]
	return s != 'Z' && s != 'X', true
}

// childrenByParent lists the processes whose parent is pid, from /proc.
func childrenByParent(pid int) ([]string, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		// After the name: state, then the parent's pid.
		f := strings.Fields(string(st[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// outcome is the call's result from how the process ended: its output when it
// succeeded, otherwise an error that says why it did not.
func (p process) outcome(parent, ctx context.Context, r *execRequest, werr error, overLimit bool) (any, error) {
	name := r.argv[0]
	tail := excerpt(p.stderr.last, stderrTail, true, p.stderr.seen > int64(len(p.stderr.last)))
	withTail := func(msg string) string {
		if tail != "" {
			msg += "; stderr: " + tail
		}
		return msg
	}
	switch {
	case werr == nil || errors.Is(werr, exec.ErrWaitDelay):
		// ErrWaitDelay: the process succeeded, but a descendant that left the
		// process group kept its output open.
		return p.output(), nil
	case parent.Err() != nil:
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q: %w", name, parent.Err()))
	case overLimit:
		return nil, failure.Fatalf("%s", withTail(processLimitMessage(name, r.limits.Processes, r.processesFrom)))
	case ctx.Err() != nil:
		msg := fmt.Sprintf("exec: %q timed out after %s and its process group was killed", name, r.timeout)
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("%s: %w", withTail(msg), ctx.Err()))
	}
	return nil, exitFailure(name, werr, tail)
}

// output is the result of a process that succeeded.
func (p process) output() map[string]any {
	res := map[string]any{
		"exit_code": int64(0),
		"stdout":    text(p.stdout.buf),
		"stderr":    text(p.stderr.buf),
		"truncated": p.stdout.truncated() || p.stderr.truncated(),
	}
	if out := bytes.TrimSpace(p.stdout.buf); len(out) > 0 && !p.stdout.truncated() {
		if v, err := DecodeJSON(out); err == nil {
			res["json"] = v
		}
	}
	return res
}

// exitFailure is the error of a process that exited unsuccessfully or was
// killed by a signal: retryable when it exited with ExitTempFail.
func exitFailure(name string, werr error, tail string) error {
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return failure.Wrap(failure.Retryable, fmt.Errorf("exec: %q: %w", name, werr))
	}
	xe := &ExitError{Command: name, Code: ee.ExitCode(), Stderr: tail}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		xe.Code, xe.Signal = -1, ws.Signal()
	}
	class := failure.Fatal
	if xe.Code == ExitTempFail {
		class = failure.Retryable
	}
	return failure.Wrap(class, xe)
}

func nsNames(flags uintptr) string {
	var names []string
	for _, n := range []struct {
		flag uintptr
		name string
	}{{unix.CLONE_NEWUSER, "user"}, {unix.CLONE_NEWPID, "pid"}, {unix.CLONE_NEWNET, "network"}} {
		if flags&n.flag != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ", ")
}

// start starts cmd on the spawner thread th. A traced process (PTRACE_TRACEME) is
// stopped by the kernel right after execve, before the program's first
// instruction: then gate, if any, decides whether it may run, the limits are set
// on it with prlimit(2) if limited, and it is let go (PTRACE_DETACH). A prlimit
// after a plain Start would leave a window in which the program runs, and forks,
// without limits. started reports whether the process exists, so that the caller
// must reap it.
func (e *execTool) start(th *spawnThread, cmd *exec.Cmd, limits Limits, gate func() error) (started bool, err error) {
	th.do(func() {
		if err = cmd.Start(); err != nil {
			return
		}
		started = true
		if !cmd.SysProcAttr.Ptrace {
			return
		}
		// ptrace requests must come from the thread that started the tracee,
		// which this is.
		pid := cmd.Process.Pid
		var info unix.Siginfo
		if err = waitid(pid, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, &info); err != nil {
			err = fmt.Errorf("waiting for the process to stop: %w", err)
			return
		}
		if info.Code != cldTrapped && info.Code != cldStopped {
			return // killed before it ran, by Cancel; Wait reports it
		}
		if gate != nil {
			if err = gate(); err != nil {
				return
			}
		}
		if limits.any() {
			if err = asUser(cmd.SysProcAttr.Credential, func() error { return setLimits(pid, limits) }); err != nil {
				return
			}
		}
		if err = unix.PtraceDetach(pid); err != nil {
			err = fmt.Errorf("ptrace detach: %w", err)
		}
	})
	return started, err
}

func noNetnsError(name string) error {
	reason := "the host does not allow network namespaces"
	if p := nsRefused.Load(); p != nil {
		reason += " (" + (*p).Error() + ")"
	}
	return failure.Fatalf("exec: cannot run %q without network access, as the skill's permissions require, because %s; grant the skill permissions.network.outbound, or run the worker where it may create namespaces (as root, or with user namespaces enabled)", name, reason)
}

// si_code values of SIGCHLD (not exported by x/sys/unix).
const (
	cldTrapped = 4 // CLD_TRAPPED
	cldStopped = 5 // CLD_STOPPED
)

// asUser runs f on the calling thread, a spawner thread of a root worker, with
// the real and effective user and group IDs of cred, and then gives the thread
// back its own. prlimit(2) on a process of another user needs CAP_SYS_RESOURCE
// over it, which containers often take from root; as the process's own user,
// lowering its limits needs nothing. Only this thread changes (the raw system
// calls, unlike syscall.Setresuid, do not reach the others), and it keeps root
// as its saved IDs, to go back.
func asUser(cred *syscall.Credential, f func() error) error {
	if cred == nil || os.Geteuid() != 0 || cred.Uid == 0 {
		return f()
	}
	var u, g [3]uint32 // real, effective, saved
	unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&u[0])), uintptr(unsafe.Pointer(&u[1])), uintptr(unsafe.Pointer(&u[2])))
	unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&g[0])), uintptr(unsafe.Pointer(&g[1])), uintptr(unsafe.Pointer(&g[2])))
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(cred.Gid), uintptr(cred.Gid), uintptr(g[2])); errno != 0 {
		return fmt.Errorf("taking group %d: %w", cred.Gid, errno)
	}
	defer unix.RawSyscall(unix.SYS_SETRESGID, uintptr(g[0]), uintptr(g[1]), uintptr(g[2]))
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(cred.Uid), uintptr(cred.Uid), uintptr(u[2])); errno != 0 {
		return fmt.Errorf("taking user %d: %w", cred.Uid, errno)
	}
	// Back to root first: only root may set the groups back.
	defer unix.RawSyscall(unix.SYS_SETRESUID, uintptr(u[0]), uintptr(u[1]), uintptr(u[2]))
	return f()
}

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
		if x.value == 0 || x.value == NoLimit {
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

// processPoll is how often a call's processes are counted against its limit.
const processPoll = 50 * time.Millisecond

// watchProcesses calls over, once, when the processes and threads of pid and
// its descendants number max. RLIMIT_NPROC makes forks past max fail, but a
// program that retries them, as a fork bomb or a shell does, would run on until
// its timeout; so the call ends when it gets there. stop stops the watch, and
// must be called before pid is reaped.
func watchProcesses(pid int, max uint64, over func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A fork bomb takes the CPU: the watch runs on a thread of its own, at a
		// higher priority than the processes it counts where the worker may
		// give it one (as root), and the thread ends with it.
		runtime.LockOSThread()
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -10)
		t := time.NewTicker(processPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if countTasks(pid, max) >= max {
					over()
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// countTasks counts the threads of pid and of its descendants, up to max. In
// its PID namespace every process the call started is pid's descendant: orphans
// are reparented to it. It reads /proc with raw system calls into one buffer:
// it runs when a fork bomb is taking the CPU, and must need little of it.
func countTasks(pid int, limit uint64) uint64 {
	var n uint64
	buf := make([]byte, 8192)
	queue := []int{pid}
	path := make([]byte, 0, 64)
	for len(queue) > 0 && n < limit {
		p := queue[0]
		queue = queue[1:]
		path = strconv.AppendInt(append(path[:0], "/proc/"...), int64(p), 10)
		path = append(path, "/task"...)
		dir := len(path)
		var tids []int
		if fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			for {
				k, err := unix.Getdents(fd, buf)
				if err != nil || k <= 0 {
					break
				}
				for _, name := range direntNames(buf[:k]) {
					if tid, err := strconv.Atoi(name); err == nil {
						tids = append(tids, tid)
					}
				}
			}
			unix.Close(fd)
		}
		for _, tid := range tids {
			n++
			path = strconv.AppendInt(append(path[:dir], '/'), int64(tid), 10)
			path = append(path, "/children"...)
			fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			k, _ := unix.Read(fd, buf)
			unix.Close(fd)
			for _, f := range bytes.Fields(buf[:max(k, 0)]) {
				if c, err := strconv.Atoi(string(f)); err == nil {
					queue = append(queue, c)
				}
			}
		}
	}
	return n
}

// direntNames returns the names in a getdents64 buffer.
func direntNames(b []byte) []string {
	var names []string
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		names = append(names, string(name))
		b = b[reclen:]
	}
	return names
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

var protectOnce sync.Once

// protectWorker makes the worker process non-dumpable (PR_SET_DUMPABLE 0): then
// /proc/<worker>/environ, mem, maps and fd belong to root, and ptrace(2) needs
// CAP_SYS_PTRACE, so a process of the worker's own user cannot read the worker's
// credentials from its environment or memory. Processes it starts are dumpable
// again after their execve, as usual.
func protectWorker() {
	protectOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) })
	closeInherited()
}

// closeInherited marks every descriptor of the worker from 3 up close-on-exec, so
// that no exec call inherits one: a descriptor the worker itself inherited (from a
// supervisor, a wrapper script, socket activation: a secret file opened for it)
// lacks the flag Go puts on the ones it opens, and would be readable and writable
// by every skill, shared offset and all. It runs whenever an exec tool is made.
func closeInherited() {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// geteuid is the worker's effective user ID; a test makes the worker look like
// another user's.
var geteuid = os.Geteuid

var notRootWarned atomic.Bool

// NotRootWarning is what a worker that is not root logs, once, when its exec tool
// is made: what it does not isolate, as the table in docs/tools.md says.
const NotRootWarning = "exec: the worker is not root, so it isolates calls less: every call runs as the worker's own user, " +
	"reads and writes the working directories of the calls running beside it, " +
	"and sees their processes and the worker's in /proc (not their environment or memory); " +
	"run the worker as root to give each call a user and a /proc of its own"

// warnNotRoot logs NotRootWarning, once per process, if the worker is not root.
func warnNotRoot(cfg *ExecConfig) {
	if uid := geteuid(); uid != 0 && notRootWarned.CompareAndSwap(false, true) {
		cfg.log().Warn(NotRootWarning, "uid", uid)
	}
}
