package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// GuardConfig configures a Guard. Zero values are the documented defaults.
type GuardConfig struct {
	// Server returns the embedded server, running with JetStream; required.
	Server func() *server.Server
	// Restart shuts the server down and starts it again on the same address and
	// store, which loads every stream and consumer from disk and drops the write
	// errors they held; clients reconnect as they do after any restart. Required.
	// (nats-server can start JetStream again in-process, but that races with API
	// requests in flight.)
	Restart func() error
	// Every is how often the server is looked at while healthy; default 2s. While
	// it is faulty, the wait between attempts to start JetStream again doubles up to
	// MaxBackoff, default 30s.
	Every, MaxBackoff time.Duration
	// Headroom is how many bytes must be writable in the store directory before
	// JetStream is started again; default 16 MiB (the room of a few message blocks),
	// or an eighth of JetStream's storage limit when that is less than 128 MiB.
	Headroom int64
	// MaxAttempts is how many restarts in a row may fail to clear a fault before
	// the guard stops trying (and logs an error) until the server is healthy again;
	// default 5. A fault a restart does not end would otherwise restart the server
	// every MaxBackoff forever.
	MaxAttempts int
	// Log receives the fault, each attempt and the recovery; default slog.Default().
	Log *slog.Logger
}

// Guard watches an embedded server's JetStream and, after a storage fault (a write
// error, JetStream disabled), restarts the server in-process once Headroom bytes
// can be written to its store: streams and consumers are loaded again from disk,
// and clients reconnect and carry on. A server at its own storage limit (max_file_store)
// is reported but left alone: it takes writes again by itself when space is freed
// within it.
type Guard struct {
	cfg GuardConfig
	dir string

	// state is what Check answers: the fault the watch last saw, or that a restart
	// is under way. Readiness reads only this, never the server: GuardConfig.Server
	// may wait for a restart to finish (bus.Embedded's does), and a server shutting
	// JetStream down may keep its health report waiting as long.
	state    atomic.Pointer[health]
	restarts atomic.Int64

	stop context.CancelFunc
	done chan struct{}
}

// NewGuard checks cfg and records the server's JetStream configuration, to start it
// again with.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Server == nil || cfg.Restart == nil {
		return nil, errors.New("storage: GuardConfig.Server and Restart are required")
	}
	js := cfg.Server().JetStreamConfig()
	if js == nil {
		return nil, errors.New("storage: the server does not run JetStream")
	}
	if cfg.Every == 0 {
		cfg.Every = 2 * time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = 16 << 20
		if js.MaxStore > 0 {
			cfg.Headroom = min(cfg.Headroom, js.MaxStore/8)
		}
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Every < 0 || cfg.MaxBackoff < cfg.Every || cfg.Headroom < 0 || cfg.MaxAttempts < 0 {
		return nil, errors.New("storage: Every must be positive, MaxBackoff at least Every, Headroom and MaxAttempts not negative")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	g := &Guard{cfg: cfg, dir: js.StoreDir}
	g.set(Fault(cfg.Server()))
	return g, nil
}

// health is one state of the server as the guard saw it.
type health struct{ err error }

func (g *Guard) set(err error) { g.state.Store(&health{err}) }

// Start watches in the background until Stop.
func (g *Guard) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.stop, g.done = cancel, make(chan struct{})
	go func() {
		defer close(g.done)
		g.run(ctx)
	}()
}

// Stop stops watching and waits; idempotent.
func (g *Guard) Stop() {
	if g.stop != nil {
		g.stop()
		<-g.done
		g.stop = nil
	}
}

// Check is the guard's readiness check: the server's storage fault, nil when none,
// as the guard last saw it (every GuardConfig.Every, and at each step of a
// restart). It never waits: during a restart it answers at once that the server
// is restarting.
func (g *Guard) Check(context.Context) error { return g.state.Load().err }

func (g *Guard) run(ctx context.Context) {
	var w watch
	wait := g.cfg.Every
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = g.look(&w, wait)
	}
}

// watch is what the guard's looks remember from one to the next.
type watch struct {
	failed    int   // restarts in a row that did not end the fault
	was       error // the fault the last look reported
	suspected error // a fault that is not a write fault, seen by the last look only
}

// look looks at the server once, acts on what it finds, and returns how long to
// wait before the next look (wait is how long it waited for this one).
//
// A fault a restart would not clear (a stream that could not be recovered, an
// account unresolved, no leader, the server's own storage limit) is reported only
// once two looks in a row see one: a stream being created or deleted is, for an
// instant, a directory in the store that the server does not list, which its
// health check reports as a stream that could not be recovered. Reported at once,
// the server would read as unready, and an error be logged, for every stream
// created while the guard looked.
func (g *Guard) look(w *watch, wait time.Duration) time.Duration {
	err := Fault(g.cfg.Server())
	if err != nil && w.was == nil && w.suspected == nil && !g.restartable() {
		w.suspected = err
		return g.cfg.Every
	}
	w.suspected = nil
	g.set(err)
	prev := w.was
	w.was = err
	switch {
	case err == nil:
		w.failed = 0
		if prev != nil {
			g.cfg.Log.Info("storage: JetStream stores messages again")
		}
		return g.cfg.Every
	case prev == nil:
		g.cfg.Log.Error("storage: JetStream cannot store messages; publishes are refused until space is free (it is started again by itself then)", "err", err)
	}
	if !g.restartable() {
		// At its own limit: it takes writes again once space is freed within it.
		return g.cfg.Every
	}
	if w.failed >= g.cfg.MaxAttempts {
		return g.cfg.MaxBackoff
	}
	if err := g.room(); err != nil {
		g.cfg.Log.Warn("storage: no room in the JetStream store yet", "dir", g.dir, "need", size(g.cfg.Headroom), "err", err)
		return min(2*wait, g.cfg.MaxBackoff)
	}
	if err := g.restart(); err != nil {
		w.failed++
		if w.failed >= g.cfg.MaxAttempts {
			g.cfg.Log.Error("storage: restarting the NATS server does not clear its fault; no more restarts until it is healthy again", "attempts", w.failed, "err", err)
		} else {
			g.cfg.Log.Error("storage: starting JetStream again failed; will retry", "err", err)
		}
		return min(2*wait, g.cfg.MaxBackoff)
	}
	w.failed, w.was = 0, nil
	return g.cfg.Every
}

// restartable reports whether the fault is one only a restart of JetStream ends: a
// write error, or JetStream disabled; not the server's own storage limit, nor a
// fault a restart would not help (a stream not current, an account unresolved).
func (g *Guard) restartable() bool {
	s := g.cfg.Server()
	if !s.JetStreamEnabled() {
		return true
	}
	hz := s.Healthz(&server.HealthzOptions{})
	return hz != nil && restartableHealth(hz.Error)
}

// restartableHealth reports whether a /healthz error is a storage fault a restart
// clears: a stream's write error, no space left, resources exhausted.
func restartableHealth(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"write error", "no space left", "insufficient resources", "jetstream not enabled"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// room writes Headroom bytes in the store directory and removes them: proof that
// JetStream has room to write again.
func (g *Guard) room() error {
	f, err := os.CreateTemp(g.dir, ".skillbus-room-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := int64(0); n < g.cfg.Headroom; n += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), g.cfg.Headroom-n)]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// restart restarts the server and checks that it stores messages again.
func (g *Guard) restart() error {
	g.cfg.Log.Warn("storage: space is free again; restarting the NATS server to clear its write errors")
	g.set(fmt.Errorf("%w: the NATS server is restarting to clear a storage fault", ErrFault))
	if err := g.cfg.Restart(); err != nil {
		err = fmt.Errorf("restarting the NATS server: %w", err)
		g.set(fmt.Errorf("%w: %w", ErrFault, err))
		return err
	}
	g.restarts.Add(1)
	err := Fault(g.cfg.Server())
	g.set(err)
	if err != nil {
		return err
	}
	g.cfg.Log.Info("storage: the NATS server stores messages again")
	return nil
}
