package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one supervised process of the fleet: a worker, the router, the registry or
// nats-server. Each start is an incarnation with a name of its own ("w2.3": worker 2,
// third start) and its own log file. An incarnation that exits without being told
// to (a process that could not connect while the server was down) is started again
// after a second; one that was signalled waits for whoever signalled it to start it.
type proc struct {
	kind, name string
	bin        string
	args       func(incarnation string) []string
	dir        string // logs go to dir/<incarnation>.log
	workdir    string
	env        []string
	log        *slog.Logger
	onStart    func(pid int, incarnation string)

	mu        sync.Mutex
	cmd       *exec.Cmd
	gen       int
	signalled bool
	stopped   bool
	done      chan struct{}
	crashes   int // exits nobody asked for
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.gen++
	inc := fmt.Sprintf("%s.%d", p.name, p.gen)
	out, err := os.Create(filepath.Join(p.dir, inc+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args(inc)...)
	cmd.Dir = p.workdir
	// CHAOS_WORKER names the incarnation to the chaos skills' steps (they are allowed it).
	cmd.Env = append(append([]string(nil), p.env...), "CHAOS_WORKER="+inc)
	cmd.Stdout, cmd.Stderr = out, out
	// The fleet dies with the driver; its exec children do not die with a worker
	// (that is the worker's business, and part of what a chaos run checks).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", inc, err)
	}
	if p.onStart != nil {
		p.onStart(cmd.Process.Pid, inc)
	}
	p.cmd, p.signalled, p.done = cmd, false, make(chan struct{})
	done := p.done
	go func() {
		err := cmd.Wait()
		out.Close()
		p.mu.Lock()
		unasked := !p.signalled && !p.stopped
		if unasked {
			p.crashes++
		}
		p.mu.Unlock()
		close(done)
		if unasked {
			p.log.Warn("chaos: process exited by itself; starting it again", "process", inc, "err", err)
			time.Sleep(time.Second) // a restart delay, not a wait for an event
			if err := p.start(); err != nil {
				p.log.Error("chaos: restart", "process", p.name, "err", err)
			}
		}
	}()
	return nil
}

// signal sends sig to the running incarnation and waits for it to exit (SIGKILL
// after timeout). It returns the incarnation's pid, when the signal was sent and
// when its exit was seen.
func (p *proc) signal(sig syscall.Signal, timeout time.Duration) (pid int, at, exited time.Time, err error) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil || done == nil {
		p.mu.Unlock()
		return 0, time.Time{}, time.Time{}, errors.New("not running")
	}
	select {
	case <-done:
		p.mu.Unlock()
		return 0, time.Time{}, time.Time{}, errors.New("not running")
	default:
	}
	p.signalled = true
	p.mu.Unlock()
	at = time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		return 0, at, time.Now(), err
	}
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
	return cmd.Process.Pid, at, time.Now(), nil
}

// stop ends the process for good: SIGTERM, then SIGKILL after timeout.
func (p *proc) stop(timeout time.Duration) {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	_, _, _, _ = p.signal(syscall.SIGTERM, timeout)
}
