package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Handler processes one message. It must ack, nak or term the message itself.
type Handler func(ctx context.Context, msg jetstream.Msg)

// Watch tunes how a Loop notices that it has stopped receiving: its pull request
// lost on a server that died, or its iterator stopped by the client library. The
// zero value takes the defaults documented on each field.
type Watch struct {
	// Heartbeat is how often the server confirms a waiting pull request; after two
	// missed heartbeats the iterator re-issues its pull. Default 5s (nats.go's own
	// default is 15s, so 30s before a pull lost on a dead server is noticed).
	Heartbeat time.Duration
	// Idle is how long the loop may go without a message while a handler is free
	// and its consumer has messages waiting to be delivered, before it gives up on
	// its iterator and pulls afresh on a new one. Default 30s: well past the
	// iterator's own recovery after two missed heartbeats.
	Idle time.Duration
	// Every is how often the loop checks, default Idle/3.
	Every time.Duration
	// Stuck is how long a stall may last, new iterators notwithstanding, before
	// Stalled reports it (a liveness probe then restarts the process). Default 2·Idle.
	Stuck time.Duration
	// InfoTimeout bounds the consumer info request each check makes. Default 5s.
	InfoTimeout time.Duration
}

func (w Watch) withDefaults() Watch {
	if w.Heartbeat <= 0 {
		w.Heartbeat = 5 * time.Second
	}
	if w.Idle <= 0 {
		w.Idle = 30 * time.Second
	}
	if w.Every <= 0 {
		w.Every = w.Idle / 3
	}
	if w.Stuck <= 0 {
		w.Stuck = 2 * w.Idle
	}
	if w.InfoTimeout <= 0 {
		w.InfoTimeout = 5 * time.Second
	}
	return w
}

// ErrStalled is what Stalled wraps: the loop has free handlers and its consumer has
// messages waiting, but none has reached the loop for Watch.Stuck.
var ErrStalled = errors.New("consume: stalled")

// Loop runs a bounded number of handlers over a pull consumer.
type Loop struct {
	c     jetstream.Consumer
	n     int
	watch Watch
	log   *slog.Logger
	name  string

	mu      sync.Mutex
	it      jetstream.MessagesContext
	closing bool

	last     atomic.Int64 // unix nanos of the last message (or new iterator)
	busy     atomic.Int64 // handlers running
	stallAt  atomic.Int64 // unix nanos the current stall was first seen; 0: none
	pending  atomic.Uint64
	renewals atomic.Int64
	infos    atomic.Int64 // consumer infos the monitor has looked at

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{}
	stopped sync.Once

	// picks are the times of the last len(picks) messages handed to a handler,
	// in a ring (pick is the next place), for Waited.
	pickMu sync.Mutex
	picks  []int64
	pick   int
}

// Waited bounds how long the message a handler was given may have waited in
// this process before the handler got it: the client library fetches up to 2n
// messages ahead of the loop's n handlers, and a message waiting in its buffer is
// not kept in progress, so one that waits there past the consumer's AckWait may
// be delivered again, to another process, while this one still holds it. Handlers
// that do not otherwise make sure they are the only holder (a worker's fast path,
// which writes no claim) must not trust a message that may have waited that long.
//
// The bound is the time since a handler got the message len(picks) = 4n messages
// before this one. An iterator holds at most 2n messages and hands them out in the
// order they arrived; while renew replaces it, handlers already waiting in the old
// one take at most one message each from it. So fewer than 4n messages are handed
// out between a message's arrival and its own hand-out, and it had not arrived
// when the one 4n before it was handed out. While messages flow the bound is the
// time those 4n took; it grows while every handler is busy for long, which is
// when messages wait in the buffer, and also while the loop is idle, when they do
// not: a caller bounds the wait by the message's age as well.
func Waited(ctx context.Context) (time.Duration, bool) {
	p, ok := ctx.Value(pickKey{}).(*picked)
	if !ok {
		return 0, false
	}
	return p.waited, true
}

type pickKey struct{}

// picked is a handler goroutine's: what Waited says of the message it handles.
type picked struct{ waited time.Duration }

// picked notes that a handler got a message at now and returns the bound Waited
// gives for it.
func (l *Loop) picked(now int64) time.Duration {
	l.pickMu.Lock()
	before := l.picks[l.pick]
	l.picks[l.pick] = now
	l.pick = (l.pick + 1) % len(l.picks)
	l.pickMu.Unlock()
	return time.Duration(now - before)
}

// Consume starts n goroutines that take messages from c and run h, each handling one
// message at a time, so at most n messages are in the handlers at once and at most 2n
// are held by this process. Handlers get a context that outlives Stop's drain, so
// in-flight work can finish; it is cancelled when Stop's context ends.
//
// The loop does not rely on the iterator to notice that it no longer receives: when
// the iterator ends on its own (a terminal status from the server) or no message
// arrives for Watch.Idle while a handler is free and the consumer has messages
// waiting — its pull request was parked on a server that died — the loop pulls
// afresh on a new iterator. Stalled reports a stall that outlasts that.
func Consume(c jetstream.Consumer, n int, h Handler, log *slog.Logger, watch ...Watch) (*Loop, error) {
	if n <= 0 {
		return nil, fmt.Errorf("consume: concurrency must be positive, got %d", n)
	}
	var w Watch
	if len(watch) > 0 {
		w = watch[0]
	}
	l := &Loop{c: c, n: n, watch: w.withDefaults(), log: log, done: make(chan struct{})}
	if info := c.CachedInfo(); info != nil {
		l.name = info.Name
	}
	it, err := l.messages()
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	l.it = it
	now := time.Now().UnixNano()
	l.last.Store(now)
	// Messages handed out before the first 4n were fetched after the loop began.
	l.picks = make([]int64, 4*n)
	for i := range l.picks {
		l.picks[i] = now
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for range n {
		l.wg.Go(func() { l.run(ctx, h) })
	}
	go l.monitor()
	running.add(l)
	return l, nil
}

// running is every loop of this process that has not been stopped, for Stalled.
var running = &loops{set: map[*Loop]struct{}{}}

type loops struct {
	mu  sync.Mutex
	set map[*Loop]struct{}
}

func (ls *loops) add(l *Loop) {
	ls.mu.Lock()
	ls.set[l] = struct{}{}
	ls.mu.Unlock()
}

func (ls *loops) remove(l *Loop) {
	ls.mu.Lock()
	delete(ls.set, l)
	ls.mu.Unlock()
}

// Stalled reports, joined, the stall (see Loop.Stalled) of every consume loop of
// this process that is running; nil when none is stalled. Its signature is a
// health check's, for /livez: a process has few loops (a router's, a worker's per
// pool) and whichever stops receiving, the process is better restarted.
func Stalled(context.Context) error {
	running.mu.Lock()
	ls := make([]*Loop, 0, len(running.set))
	for l := range running.set {
		ls = append(ls, l)
	}
	running.mu.Unlock()
	var errs []error
	for _, l := range ls {
		if err := l.Stalled(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Loop) messages() (jetstream.MessagesContext, error) {
	return l.c.Messages(jetstream.PullMaxMessages(2*l.n), jetstream.PullHeartbeat(l.watch.Heartbeat))
}

func (l *Loop) run(ctx context.Context, h Handler) {
	p := &picked{}
	// Next waits no longer than the handlers' context: once Stop's deadline has
	// cancelled it, a handler waiting for a message returns even when the
	// iterator never ends, as when every server went while the loop drained
	// (the drain's flush and its buffered messages are then never settled).
	until := jetstream.NextContext(ctx)
	ctx = context.WithValue(ctx, pickKey{}, p)
	for ctx.Err() == nil {
		l.mu.Lock()
		it := l.it
		l.mu.Unlock()
		msg, err := it.Next(until)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				if l.isClosing() || errors.Is(err, jetstream.ErrConnectionClosed) {
					return
				}
				// Closed under us: replaced by renew, or stopped by the library
				// after a terminal status. Either way take the current one.
				l.renew(it, "the iterator ended")
				continue
			}
			l.log.Warn("consume: next message", "consumer", l.name, "err", err)
			continue
		}
		now := time.Now().UnixNano()
		l.last.Store(now)
		l.stallAt.Store(0)
		p.waited = l.picked(now)
		l.busy.Add(1)
		h(ctx, msg)
		l.busy.Add(-1)
	}
}

func (l *Loop) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// renew replaces old, if it is still the loop's iterator, by a new one. When the new
// one cannot be made (the connection is down), it waits a moment and leaves old in
// place for the next caller to try again.
func (l *Loop) renew(old jetstream.MessagesContext, why string) {
	l.mu.Lock()
	if l.closing || l.it != old {
		l.mu.Unlock()
		return
	}
	it, err := l.messages()
	if err != nil {
		l.mu.Unlock()
		l.log.Warn("consume: cannot pull afresh", "consumer", l.name, "why", why, "err", err)
		select {
		case <-l.done:
		case <-time.After(time.Second):
		}
		return
	}
	l.it = it
	l.last.Store(time.Now().UnixNano())
	l.mu.Unlock()
	// Drain, not Stop: the handlers already waiting in old's Next still get a
	// message each from it (run takes the new iterator on its next turn); Stop
	// would drop those client-side. What else old holds is not handed out: it
	// stays in the consumer's ack-pending until its AckWait, as with Stop.
	old.Drain()
	l.renewals.Add(1)
	l.log.Warn("consume: pulling afresh on a new iterator", "consumer", l.name, "why", why)
}

// monitor checks every Watch.Every whether the loop has gone without a message for
// Watch.Idle while it could take one and the consumer has one to give.
func (l *Loop) monitor() {
	t := time.NewTicker(l.watch.Every)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		l.check()
	}
}

func (l *Loop) check() {
	idle := time.Since(time.Unix(0, l.last.Load()))
	if idle < l.watch.Idle {
		return
	}
	if l.busy.Load() >= int64(l.n) {
		// Every handler is busy: nothing to pull for; not a stall of the iterator.
		l.last.Store(time.Now().UnixNano())
		l.stallAt.Store(0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.watch.InfoTimeout)
	info, err := l.c.Info(ctx)
	cancel()
	if err != nil {
		// The consumer does not answer (no leader yet): nothing to tell from here.
		return
	}
	l.infos.Add(1)
	// Nothing waits, or the server holds it back on purpose: a paused consumer, or
	// one at its ack-pending limit (a skill's max_concurrent across the fleet).
	if info.NumPending == 0 || info.Paused ||
		(info.Config.MaxAckPending > 0 && info.NumAckPending >= info.Config.MaxAckPending) {
		l.stallAt.Store(0)
		return
	}
	l.pending.Store(info.NumPending)
	l.stallAt.CompareAndSwap(0, time.Now().Add(-idle).UnixNano())
	l.mu.Lock()
	it := l.it
	l.mu.Unlock()
	l.renew(it, fmt.Sprintf("no message for %v while %d are waiting", idle.Round(time.Second), info.NumPending))
}

// Stalled reports, wrapping ErrStalled, a loop that has had free handlers and no
// message for longer than Watch.Stuck while its consumer had messages waiting that
// it was free to deliver (not paused, not at its MaxAckPending), however often it
// pulled afresh; nil otherwise. It is meant for a liveness probe: a
// process whose connection no longer delivers is better restarted.
func (l *Loop) Stalled() error {
	at := l.stallAt.Load()
	if at == 0 {
		return nil
	}
	if d := time.Since(time.Unix(0, at)); d > l.watch.Stuck {
		return fmt.Errorf("%w: consumer %s: no message for %v while %d were waiting (pulled afresh %d times)",
			ErrStalled, l.name, d.Round(time.Second), l.pending.Load(), l.renewals.Load())
	}
	return nil
}

// Renewals is how many times the loop has pulled afresh on a new iterator.
func (l *Loop) Renewals() int { return int(l.renewals.Load()) }

// Stop stops pulling, lets the handlers finish what this process already holds, and
// returns when they are done. If ctx ends first, the handlers' context is cancelled
// (they hand their messages back) and Stop still waits for them to return.
func (l *Loop) Stop(ctx context.Context) {
	l.stopped.Do(func() {
		running.remove(l)
		l.mu.Lock()
		l.closing = true
		it := l.it
		l.mu.Unlock()
		close(l.done)
		it.Drain()
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			l.cancel()
			<-done
		}
		l.cancel()
	})
}
