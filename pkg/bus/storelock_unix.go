//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockStore takes the store directory's lock file, so that a second embedded
// server started on the same store (another skillbus dev on another port) is
// refused instead of writing the same JetStream files as this one. The lock is
// the kernel's (flock): it goes with the process, however it ends.
func lockStore(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded nats: store %s: %w", dir, err)
	}
	path := filepath.Join(dir, "skillbus.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: store lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			// A filesystem without locks (some network and FUSE ones): run
			// unlocked, as before there was a lock.
			f.Close()
			return nil, nil
		}
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil && strings.TrimSpace(string(b)) != "" {
			pid := strings.TrimSpace(string(b))
			holder = "another process (pid " + pid + ")"
			if pid == strconv.Itoa(os.Getpid()) {
				holder = "another server of this process"
			}
		}
		f.Close()
		return nil, fmt.Errorf("embedded nats: the JetStream store %s is in use by %s; two servers writing one store corrupt it: stop that one, or give this one another store with --store", dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// unlockStore gives the lock back.
func unlockStore(f *os.File) {
	if f == nil {
		return
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
