package bustool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/tool"
)

// WatcherConfig configures a Watcher. Zero values select the documented defaults.
type WatcherConfig struct {
	Config
	// Interval is how often the watcher discovers tools. Default 30s.
	Interval time.Duration
	// MinInterval is the least time between two discoveries that Ensure starts
	// for a missing tool, so a flood of jobs naming a tool nobody serves does not
	// become a flood of $SRV.INFO broadcasts. Default 1s.
	MinInterval time.Duration
	// Base are the worker's own tools (built-ins, MCP, llm). They are always in
	// Set; a bus tool of the same name is left out, with a warning.
	Base []tool.Tool
	// OnChange, if set, is called with the new set after a discovery changed it,
	// on the goroutine that ran the discovery. It must not call Refresh or Ensure.
	OnChange func(*tool.Set)
	// Log receives discovery problems and failures. Default slog.Default().
	Log *slog.Logger
}

// Defaults of WatcherConfig.
const (
	DefaultWatchInterval    = 30 * time.Second
	DefaultMinWatchInterval = time.Second
)

// Watcher keeps a tool.Set of the worker's own tools and the tools served on the
// bus up to date, rediscovering them every Interval and on demand (Refresh,
// Ensure), because tool services come and go while a worker runs. Its methods
// are safe for concurrent use.
type Watcher struct {
	nc  *nats.Conn
	cfg WatcherConfig

	set   atomic.Pointer[tool.Set]
	tools atomic.Pointer[[]*Tool]

	mu       sync.Mutex // serialises discoveries
	started  atomic.Uint64
	lastErr  error
	lastEnd  time.Time
	warned   map[string]bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	running  atomic.Bool
}

// NewWatcher returns a watcher whose Set holds the Base tools until the first
// discovery; Start begins watching.
func NewWatcher(nc *nats.Conn, cfg WatcherConfig) (*Watcher, error) {
	if nc == nil {
		return nil, errors.New("bustool: NewWatcher needs a NATS connection")
	}
	var err error
	if cfg.Config, err = cfg.Config.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultWatchInterval
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinWatchInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	set, err := tool.NewSet(cfg.Base...)
	if err != nil {
		return nil, fmt.Errorf("bustool: the watcher's base tools: %w", err)
	}
	w := &Watcher{nc: nc, cfg: cfg, warned: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	w.set.Store(set)
	w.tools.Store(&[]*Tool{})
	return w, nil
}

// Start discovers the tools once, then keeps discovering them every Interval on
// a goroutine of its own until Stop or ctx is done. A failed first discovery is
// logged and returned, but the watcher runs on: the bus may come back.
func (w *Watcher) Start(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("bustool: the watcher is already started")
	}
	err := w.Refresh(ctx)
	go w.loop(ctx)
	return err
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.Refresh(ctx)
		}
	}
}

// Stop stops watching and waits for the watcher's goroutine to end. The set
// stays as it was. It is safe to call more than once, and without Start.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	if w.running.Load() {
		<-w.done
	}
}

// Set returns the current tools: the base tools and the bus tools discovered
// last. The set never changes; a later discovery makes a new one.
func (w *Watcher) Set() *tool.Set { return w.set.Load() }

// Tools returns the bus tools discovered last, sorted by name.
func (w *Watcher) Tools() []*Tool { return slices.Clone(*w.tools.Load()) }

// Refresh discovers the tools now. Calls that overlap share one discovery: a
// call made while one runs waits for the next, which sees everything that ran
// by the time it was made. On failure the previous set stays.
func (w *Watcher) Refresh(ctx context.Context) error {
	before := w.started.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Discoveries run one at a time, under mu, and count themselves in started
	// when they begin. One numbered above before began after this call did, and
	// holding mu means it has ended: its result is as fresh as a new one.
	if w.started.Load() > before {
		return w.lastErr
	}
	return w.refreshLocked(ctx)
}

func (w *Watcher) refreshLocked(ctx context.Context) error {
	w.started.Add(1)
	tools, problems, err := discover(ctx, w.nc, w.cfg.Config)
	w.lastEnd = time.Now()
	w.lastErr = err
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Warn("bustool: discovering tools failed; keeping the tools found before", "err", err)
		}
		return err
	}
	for _, p := range problems {
		w.cfg.Log.Warn("bustool: skipped a tool", "problem", p)
	}
	w.apply(tools)
	return nil
}

// Ensure returns the current set, first discovering the tools again if one of
// names is not in it. Discoveries are at least MinInterval apart: a caller that
// comes sooner waits for the next one (or ctx), so a tool service started a moment
// ago is found, and a flood of jobs naming a tool nobody serves costs one
// discovery per MinInterval. A worker calls it with a skill's tools before running
// the skill.
func (w *Watcher) Ensure(ctx context.Context, names ...string) *tool.Set {
	set := w.Set()
	if !missing(set, names) {
		return set
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if set = w.Set(); !missing(set, names) {
		return set
	}
	if wait := w.cfg.MinInterval - time.Since(w.lastEnd); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return w.Set()
		}
	}
	_ = w.refreshLocked(ctx)
	return w.Set()
}

func missing(set *tool.Set, names []string) bool {
	for _, n := range names {
		if _, ok := set.Lookup(n); !ok {
			return true
		}
	}
	return false
}

// apply makes the discovered tools current and reports a change.
func (w *Watcher) apply(found []*Tool) {
	old := *w.tools.Load()
	if slices.EqualFunc(old, found, sameTool) {
		return
	}
	base := map[string]bool{}
	all := slices.Clone(w.cfg.Base)
	for _, t := range w.cfg.Base {
		base[t.Name()] = true
	}
	for _, t := range found {
		if base[t.name] {
			if !w.warned[t.name] {
				w.warned[t.name] = true
				w.cfg.Log.Warn("bustool: a bus tool has the name of one of the worker's own tools; the worker's own is used", "tool", t.name, "subject", t.subject)
			}
			continue
		}
		all = append(all, t)
	}
	set, err := tool.NewSet(all...)
	if err != nil { // cannot happen: names are unique and valid
		w.cfg.Log.Error("bustool: building the tool set", "err", err)
		return
	}
	w.tools.Store(&found)
	w.set.Store(set)
	if w.cfg.OnChange != nil {
		w.cfg.OnChange(set)
	}
}
