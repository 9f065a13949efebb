package tool

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// spawnThread is the OS thread one call's process is started from, and what
// confines it before it exists.
//
// The kernel delivers a process's parent-death signal when the *thread* that
// forked it exits, not the process (golang.org/issue/27505), and the Go runtime
// ends a thread when a goroutine locked to it returns. So a goroutine locked to
// a thread of its own starts the process, and returns (ending the thread) only
// once the process has been reaped.
//
// A thread of its own per call also carries what only a thread can pass to the
// processes it starts, and what must differ between calls: a Landlock domain
// of the call's own, no_new_privs, a umask, and under a root worker the mount
// namespace with the private /proc. The thread is never used for anything else:
// the runtime creates no thread from a locked one, and ends it with its
// goroutine.
type spawnThread struct {
	work chan func()
}

// newSpawnThread starts a thread and confines it; it fails only if the thread
// cannot get no_new_privs. What the host refuses of the rest is logged, once.
func newSpawnThread(log *slog.Logger) (*spawnThread, error) {
	s := &spawnThread{work: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: when the loop ends, the thread ends with the goroutine.
		runtime.LockOSThread()
		err := confineThread(log)
		errc <- err
		if err != nil {
			return
		}
		for fn := range s.work {
			fn()
		}
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	return s, nil
}

// do runs fn on the thread and waits for it.
func (s *spawnThread) do(fn func()) {
	done := make(chan struct{})
	s.work <- func() {
		defer close(done)
		fn()
	}
	<-done
}

// stop ends the thread. The process started from it must have been reaped.
func (s *spawnThread) stop() { close(s.work) }

// confineThread prepares the calling thread, locked to its goroutine for good,
// to start one call's process:
//
//   - no_new_privs: execve never grants privileges, so setuid and setgid bits
//     and file capabilities give the process and everything it runs nothing;
//   - a file-system context of its own (CLONE_FS), with umask 077, so that what
//     processes create is private to their user unless they say otherwise;
//   - under a root worker, the mount namespace whose /proc shows a process only
//     the processes it may trace (privateProc);
//   - a Landlock domain of its own, so that a process can neither trace, read
//     through /proc, signal, nor connect to the abstract sockets of any process
//     outside it, whatever the users.
func confineThread(log *slog.Logger) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	// The umask and the mount namespace belong to the file-system context, which
	// the thread must first stop sharing with the worker's other threads; the
	// Landlock domain does not, and is put in place whatever becomes of them.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		warnOnce(&fsWarned, log, "exec: processes share the worker's umask and mount namespace", fmt.Errorf("unshare(CLONE_FS): %w", err))
	} else {
		unix.Umask(0o077)
		if fd, err := privateProc(); err != nil {
			warnOnce(&procWarned, log, "exec: processes see the worker's /proc: every process of their user", err)
		} else if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			warnOnce(&procWarned, log, "exec: processes see the worker's /proc: every process of their user", fmt.Errorf("setns: %w", err))
		}
	}
	if err := landlockThread(); err != nil {
		warnOnce(&landlockWarned, log, "exec: the host has no Landlock, so processes of one user can read each other's /proc files", err)
	}
	return nil
}

var fsWarned, procWarned, landlockWarned atomic.Bool

func warnOnce(done *atomic.Bool, log *slog.Logger, msg string, err error) {
	if errors.Is(err, errNotRoot) || !done.CompareAndSwap(false, true) {
		return
	}
	log.Warn(msg, "error", err)
}

var errNotRoot = errors.New("the worker is not root")

// privateProc returns a mount namespace, made once per worker, that differs
// from the worker's in one mount: a /proc of its own with hidepid=invisible. A
// process looking at it finds there only the processes it could trace: those
// of its own call (each call has a user and a Landlock domain of its own), not
// the worker's, nor other calls'. Only root can make it.
var privateProc = sync.OnceValues(func() (int, error) {
	if os.Geteuid() != 0 {
		return -1, errNotRoot
	}
	type result struct {
		fd  int
		err error
	}
	c := make(chan result, 1)
	go func() {
		// Never unlocked: the thread leaves the worker's mount namespace, and
		// ends with this goroutine.
		runtime.LockOSThread()
		fd, err := func() (int, error) {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return -1, fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
			}
			// The host's mounts still reach this namespace; its own never leave it.
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
				return -1, fmt.Errorf("making / a slave mount: %w", err)
			}
			// "invisible", not "2": kernels before 5.8, which share one procfs
			// per PID namespace and would apply it to the host's /proc, refuse it.
			if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
				return -1, fmt.Errorf("mounting /proc with hidepid=invisible: %w", err)
			}
			fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, fmt.Errorf("opening the mount namespace: %w", err)
			}
			return fd, nil
		}()
		c <- result{fd, err}
	}()
	r := <-c
	return r.fd, r.err
})

// landlockThread puts the calling thread in a Landlock domain of its own. The
// domain handles only making device nodes, which nobody in a sandbox needs, so
// that it restricts no file access; what it is for comes with every domain:
// a process in it may trace, and read the /proc files of, only processes in it
// or in domains nested in it. Where the kernel has them (Landlock ABI 6, Linux
// 6.12), signals and abstract Unix sockets are scoped to the domain too.
func landlockThread() error {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return fmt.Errorf("landlock: %w", errno)
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK}
	size := unsafe.Offsetof(attr.Handled_access_net) // ABI 1-3 know only the first field
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock: creating a ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: %w", errno)
	}
	return nil
}
