package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Source is the CloudEvents source of the triggers a schedule fires.
const Source = "/skillbus/scheduler"

// DefaultLease is how long a leader's lease lasts without renewal. A leader that
// dies is replaced within Lease plus Lease/3.
const DefaultLease = 6 * time.Second

// Keys of the schedules bucket.
const (
	keyLeader = "leader"
	tickPfx   = "tick."
	atPfx     = "at."
)

// TickID is the CloudEvents id of a skill's tick: the same for every scheduler,
// so a tick published twice is one activation.
func TickID(skillName string, tick time.Time) string {
	return "schedule:" + skillName + ":" + tick.UTC().Format(time.RFC3339)
}

// Catalog is the live skill catalog; *catalog.Catalog implements it.
type Catalog interface {
	All() []*skill.Skill
	Revision() uint64
	// Changed blocks until the revision is past after, or ctx ends.
	Changed(ctx context.Context, after uint64) error
}

// Clock tells the time and waits; tests drive a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Scheduler.
type Config struct {
	// Bus is the connection; required. Its schedules bucket must exist (Bus.Ensure).
	Bus *bus.Bus
	// Catalog is the live catalog whose schedules run; required.
	Catalog Catalog
	// Log receives the scheduler's logs; default slog.Default().
	Log *slog.Logger
	// Clock is the time; default the wall clock.
	Clock Clock
	// Lease is how long leadership lasts without renewal; default DefaultLease,
	// at least 1s. Every scheduler of a fleet should use the same.
	Lease time.Duration
	// Name identifies this scheduler in the lease; default host-pid-random. Two
	// schedulers must not share one.
	Name string
}

// Scheduler fires the catalog's schedules and the delayed triggers while it
// leads. Start it in every router; one leads at a time.
type Scheduler struct {
	cfg   Config
	kv    jetstream.KeyValue // schedules: the lease, the last ticks
	later jetstream.KeyValue // delayed: the delayed triggers
	cl    *client.Client
	// deleteLater deletes a published delayed trigger (Bus.DeleteDelayed).
	deleteLater func(ctx context.Context, key string, rev uint64) error
	wake        chan struct{}
	leader      atomic.Bool

	mu      sync.Mutex
	delayed map[string]pending // by key (legacyPfx and the key for the schedules bucket's), from the watches

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	// The loop's own state.
	leaseRev uint64
	renewed  time.Time
	seenRev  uint64
	seenAt   time.Time
	catRev   uint64
	tables   map[string]table
	ticks    map[string]*tickState
}

type table struct {
	spec    string // cron and zone: a change restarts the count
	tab     skill.Timetable
	catchUp int
}

type tickState struct {
	spec string
	tick time.Time
	rev  uint64
}

// tickValue is the value of tick.<skill>.
type tickValue struct {
	Schedule string    `json:"schedule"`
	Tick     time.Time `json:"tick"`
}

// pending is a delayed trigger as every scheduler keeps it in memory: when it is
// due and at which revision, not the trigger itself (up to
// bus.DelayedMaxValueBytes each), which the leader reads when it is due.
type pending struct {
	at  time.Time
	rev uint64
	// published: only its key's deletion is left; a new leader without it in
	// memory publishes it again, which JetStream drops within its duplicate window.
	published bool
}

// legacyPfx marks, in Scheduler.delayed, a delayed trigger an earlier version
// stored in the schedules bucket (at.<id>): it is published from there, as the
// others are from the delayed bucket. No sender may write there any more.
const legacyPfx = "schedules/"

// New validates cfg and returns a Scheduler; Start begins.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Bus == nil || cfg.Catalog == nil {
		return nil, errors.New("schedule: Bus and Catalog are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Lease < time.Second {
		return nil, fmt.Errorf("schedule: lease %v is shorter than 1s", cfg.Lease)
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), nuid.Next())
	}
	return &Scheduler{cfg: cfg, cl: client.New(cfg.Bus), deleteLater: cfg.Bus.DeleteDelayed, wake: make(chan struct{}, 1), delayed: map[string]pending{}, done: make(chan struct{})}, nil
}

// Start opens the bucket, follows the delayed triggers and the catalog, and
// starts competing for the lease.
func (s *Scheduler) Start(ctx context.Context) error {
	kv, err := s.cfg.Bus.KV(ctx, s.cfg.Bus.BucketSchedules())
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	s.kv = kv
	if s.later, err = s.cfg.Bus.KV(ctx, s.cfg.Bus.BucketDelayed()); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := s.later.Watch(lctx, atPfx+">")
	if err != nil {
		cancel()
		return fmt.Errorf("schedule: watching delayed triggers: %w", err)
	}
	legacy, err := kv.Watch(lctx, atPfx+">")
	if err != nil {
		cancel()
		_ = w.Stop()
		return fmt.Errorf("schedule: watching delayed triggers: %w", err)
	}
	s.cancel = cancel
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.follow(w, "") }()
	go func() { defer wg.Done(); s.follow(legacy, legacyPfx) }()
	go func() { defer wg.Done(); s.followCatalog(lctx) }()
	go func() {
		defer close(s.done)
		s.run(lctx)
		_ = w.Stop()
		_ = legacy.Stop()
		wg.Wait()
	}()
	return nil
}

// Stop stops the scheduler and, if it leads, gives the lease up so another
// takes over at once. It is idempotent.
func (s *Scheduler) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		<-s.done
		if s.leader.Load() {
			s.leader.Store(false)
			if err := s.kv.Delete(ctx, keyLeader, jetstream.LastRevision(s.leaseRev)); err != nil {
				s.cfg.Log.Debug("schedule: giving the lease up", "err", err)
			}
		}
	})
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// follow keeps when the delayed triggers are due in memory, on every scheduler,
// so a new leader has them at once. pfx marks the bucket they are in.
func (s *Scheduler) follow(w jetstream.KeyWatcher, pfx string) {
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		k := pfx + e.Key()
		s.mu.Lock()
		if e.Operation() != jetstream.KeyValuePut {
			delete(s.delayed, k)
		} else {
			var d struct {
				At time.Time `json:"at"`
			}
			if err := json.Unmarshal(e.Value(), &d); err != nil {
				// Still due at once, so the leader deletes it (published, it
				// would be refused).
				s.cfg.Log.Warn("schedule: a delayed trigger that does not decode", "key", k, "err", err)
			}
			s.delayed[k] = pending{at: d.At, rev: e.Revision()}
		}
		s.mu.Unlock()
		if s.leader.Load() {
			s.poke()
		}
	}
}

func (s *Scheduler) followCatalog(ctx context.Context) {
	for {
		if err := s.cfg.Catalog.Changed(ctx, s.cfg.Catalog.Revision()); err != nil {
			return
		}
		s.poke()
	}
}

func (s *Scheduler) run(ctx context.Context) {
	for {
		// A step is not cut short by Stop: a tick published is also recorded, so
		// the next leader does not publish it again.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Lease)
		wait := s.step(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.cfg.Clock.After(wait):
		}
	}
}

// step renews or competes for the lease and, leading, fires what is due. It
// returns how long to wait before the next step.
func (s *Scheduler) step(ctx context.Context) time.Duration {
	now := s.cfg.Clock.Now()
	period := s.cfg.Lease / 3
	s.lease(ctx, now)
	if !s.leader.Load() {
		return period
	}
	next := s.renewed.Add(period)
	earlier := func(t time.Time) {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	earlier(s.fireSchedules(ctx, now))
	earlier(s.fireDelayed(ctx, now))
	return max(next.Sub(now), 0)
}

func (s *Scheduler) lease(ctx context.Context, now time.Time) {
	period := s.cfg.Lease / 3
	me := []byte(s.cfg.Name)
	if s.leader.Load() {
		if now.Sub(s.renewed) < period {
			return
		}
		rev, err := s.kv.Update(ctx, keyLeader, me, s.leaseRev)
		if err != nil {
			// Not leading until the lease is renewed: another scheduler may take
			// it once it has gone unrenewed for a whole lease.
			s.leader.Store(false)
			switch {
			case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
				s.cfg.Log.Warn("schedule: lost the lease; another scheduler leads", "err", err)
			case !s.cfg.Bus.Connected():
				s.cfg.Log.Warn("schedule: could not renew the lease: NATS is unreachable; scheduling pauses until the lease is renewed or another scheduler takes it", "err", err)
			default:
				s.cfg.Log.Warn("schedule: could not renew the lease; scheduling pauses until the lease is renewed or another scheduler takes it", "err", err)
			}
			return
		}
		s.leaseRev, s.renewed = rev, now
		return
	}
	e, err := s.kv.Get(ctx, keyLeader)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if rev, err := s.kv.Create(ctx, keyLeader, me); err == nil {
			s.win(rev, now)
		}
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Debug("schedule: reading the lease", "err", err)
		}
		return
	}
	if e.Revision() != s.seenRev {
		s.seenRev, s.seenAt = e.Revision(), now
	}
	// Ours (renewal failed on a passing error), or not renewed for a whole lease.
	if string(e.Value()) == s.cfg.Name || now.Sub(s.seenAt) >= s.cfg.Lease {
		if rev, err := s.kv.Update(ctx, keyLeader, me, e.Revision()); err == nil {
			s.win(rev, now)
		}
	}
}

func (s *Scheduler) win(rev uint64, now time.Time) {
	s.leader.Store(true)
	s.leaseRev, s.renewed = rev, now
	s.ticks = map[string]*tickState{} // another leader may have moved them
	s.tables = nil
	s.cfg.Log.Info("schedule: leading the schedules", "scheduler", s.cfg.Name)
}

// fireSchedules publishes every due tick and returns the earliest next one
// (zero if none).
func (s *Scheduler) fireSchedules(ctx context.Context, now time.Time) (next time.Time) {
	if rev := s.cfg.Catalog.Revision(); s.tables == nil || rev != s.catRev {
		s.catRev = rev
		s.load(ctx)
	}
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	retry := now.Add(s.cfg.Lease / 3)
	for name, t := range s.tables {
		st, err := s.state(ctx, name, t.spec, now)
		if err != nil {
			s.cfg.Log.Warn("schedule: reading a skill's last tick", "skill", name, "err", err)
			earlier(retry)
			continue
		}
		failed := false
		for _, tick := range dueTicks(t.tab, st.tick, now, t.catchUp) {
			if err := s.publishTick(ctx, name, tick); err != nil {
				s.cfg.Log.Warn("schedule: publishing a tick; will retry", "skill", name, "tick", tick, "err", err)
				failed = true
				break
			}
			b, _ := json.Marshal(tickValue{Schedule: t.spec, Tick: tick})
			rev, err := s.kv.Update(ctx, tickPfx+name, b, st.rev)
			if err != nil {
				// Another leader moved it meanwhile: read it again.
				delete(s.ticks, name)
				failed = true
				break
			}
			st.tick, st.rev = tick, rev
		}
		if failed {
			// The tick after st.tick is the one that failed, already past: waiting
			// for it would step again at once, spinning while writes are refused.
			earlier(retry)
			continue
		}
		earlier(t.tab.Next(st.tick))
	}
	return next
}

// load reads the catalog's schedules and deletes the last ticks of skills no
// longer scheduled.
func (s *Scheduler) load(ctx context.Context) {
	s.tables = map[string]table{}
	for _, sk := range s.cfg.Catalog.All() {
		if sk.Schedule == nil {
			continue
		}
		tab, err := sk.Schedule.Compile()
		if err != nil {
			s.cfg.Log.Error("schedule: a skill's schedule does not compile; it does not run", "skill", sk.Name, "err", err)
			continue
		}
		if loc, err := time.LoadLocation(sk.Schedule.Timezone); err == nil && loc != time.UTC {
			tab = onceADay{tab: tab, loc: loc}
		}
		n := 1
		if sk.Schedule.CatchUp == skill.CatchUpAll {
			n = skill.MaxCatchUp
		}
		s.tables[sk.Name] = table{spec: sk.Schedule.Cron + "|" + sk.Schedule.Timezone, tab: tab, catchUp: n}
	}
	keys, err := s.kv.ListKeysFiltered(ctx, tickPfx+">")
	if err != nil {
		s.cfg.Log.Warn("schedule: listing last ticks", "err", err)
		return
	}
	for k := range keys.Keys() {
		name := k[len(tickPfx):]
		if _, ok := s.tables[name]; ok {
			continue
		}
		delete(s.ticks, name)
		if err := s.kv.Delete(ctx, k); err != nil {
			s.cfg.Log.Warn("schedule: deleting the last tick of a skill no longer scheduled", "skill", name, "err", err)
		}
	}
	_ = keys.Stop()
}

// state is a skill's last tick, created (counting from now) for a skill new to
// its schedule.
func (s *Scheduler) state(ctx context.Context, name, spec string, now time.Time) (*tickState, error) {
	if st, ok := s.ticks[name]; ok && st.spec == spec {
		return st, nil
	}
	key := tickPfx + name
	start, _ := json.Marshal(tickValue{Schedule: spec, Tick: now})
	e, err := s.kv.Get(ctx, key)
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if rev, err = s.kv.Create(ctx, key, start); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		var v tickValue
		if json.Unmarshal(e.Value(), &v) == nil && v.Schedule == spec && !v.Tick.IsZero() {
			st := &tickState{spec: spec, tick: v.Tick, rev: e.Revision()}
			s.ticks[name] = st
			return st, nil
		}
		// The schedule changed: it counts from now.
		if rev, err = s.kv.Update(ctx, key, start, e.Revision()); err != nil {
			return nil, err
		}
	}
	st := &tickState{spec: spec, tick: now, rev: rev}
	s.ticks[name] = st
	return st, nil
}

// dueTicks returns the ticks in (last, now], the latest limit of them. It looks
// back through growing windows, so a long outage of a frequent schedule costs
// about as many steps as the ticks it returns.
func dueTicks(tab skill.Timetable, last, now time.Time, limit int) []time.Time {
	var ticks []time.Time
	for _, w := range []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 6 * 367 * 24 * time.Hour} {
		from, cut := last, false
		if now.Sub(last) > w {
			from, cut = now.Add(-w), true
		}
		ticks = ticks[:0]
		for t := tab.Next(from); !t.IsZero() && !t.After(now); t = tab.Next(t) {
			if len(ticks) == limit {
				ticks = append(ticks[:0], ticks[1:]...)
			}
			ticks = append(ticks, t)
		}
		if !cut || len(ticks) == limit {
			break
		}
	}
	return ticks
}

func (s *Scheduler) publishTick(ctx context.Context, name string, tick time.Time) error {
	data, err := json.Marshal(map[string]string{"scheduled_at": tick.UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	_, err = s.cl.Publish(ctx, client.Trigger{Skill: name, Source: Source, ID: TickID(name, tick), Data: data})
	return err
}

// fireDelayed publishes the delayed triggers that are due and returns when the
// next one is (zero if none).
func (s *Scheduler) fireDelayed(ctx context.Context, now time.Time) (next time.Time) {
	s.mu.Lock()
	due := map[string]pending{}
	for k, p := range s.delayed {
		if p.at.After(now) {
			if next.IsZero() || p.at.Before(next) {
				next = p.at
			}
			continue
		}
		due[k] = p
	}
	s.mu.Unlock()
	retry := func() {
		if r := now.Add(s.cfg.Lease / 3); next.IsZero() || r.Before(next) {
			next = r
		}
	}
	for k, p := range due {
		if !p.published {
			gone, err := s.publishDelayed(ctx, k, p)
			if err != nil {
				s.cfg.Log.Warn("schedule: publishing a delayed trigger; will retry", "key", k, "err", err)
				retry()
				continue
			}
			if gone {
				// Published and deleted by another leader, or replaced (the
				// watch brings the new revision).
				s.forget(k, p.rev)
				continue
			}
		}
		var err error
		if key, legacy := strings.CutPrefix(k, legacyPfx); legacy {
			err = s.kv.Delete(ctx, key, jetstream.LastRevision(p.rev))
		} else {
			err = s.deleteLater(ctx, k, p.rev)
		}
		s.mu.Lock()
		if cur, ok := s.delayed[k]; ok && cur.rev == p.rev {
			if err != nil {
				// Kept, so the deletion is tried again and a later leader does not
				// publish it once more, past JetStream's duplicate window.
				cur.published = true
				s.delayed[k] = cur
			} else {
				delete(s.delayed, k)
			}
		}
		s.mu.Unlock()
		if err != nil {
			s.cfg.Log.Warn("schedule: deleting a delayed trigger that was published; will retry", "key", k, "err", err)
			retry()
		}
	}
	return next
}

func (s *Scheduler) forget(k string, rev uint64) {
	s.mu.Lock()
	if cur, ok := s.delayed[k]; ok && cur.rev == rev {
		delete(s.delayed, k)
	}
	s.mu.Unlock()
}

// publishDelayed reads the delayed trigger p of key k and publishes it, unless it
// is refused as it would be every time, which is logged and dropped (its key is
// deleted all the same). gone says the key is no longer at p's revision.
func (s *Scheduler) publishDelayed(ctx context.Context, k string, p pending) (gone bool, err error) {
	kv, key := s.later, k
	if rest, legacy := strings.CutPrefix(k, legacyPfx); legacy {
		kv, key = s.kv, rest
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if e.Revision() != p.rev {
		return true, nil
	}
	var d Delayed
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		s.cfg.Log.Error("schedule: a delayed trigger does not decode; dropping it", "key", k, "err", err)
		return false, nil
	}
	// The bucket is written by senders (At checks what it stores, but a sender
	// may write a key directly): it is checked as a sender's trigger is, so that
	// none is published with one of skillbus's own sources or types.
	t := d.trigger()
	if err := checkSender(t); err != nil {
		s.cfg.Log.Error("schedule: a delayed trigger is refused; dropping it", "key", k, "err", err)
		return false, nil
	}
	_, err = s.cl.Publish(ctx, t)
	if errors.Is(err, client.ErrInvalidEvent) || errors.Is(err, client.ErrTooLarge) {
		// Refused as it would be every time (stored by an earlier version
		// that did not check it): dropped, not retried for good.
		s.cfg.Log.Error("schedule: a delayed trigger is refused; dropping it", "key", k, "err", err)
		return false, nil
	}
	return false, err
}

// onceADay is a timetable whose ticks never repeat a wall-clock time: where the
// clocks go back (a daylight-saving fall-back), a cron time in the repeated hour
// would otherwise fire in both of its occurrences.
type onceADay struct {
	tab skill.Timetable
	loc *time.Location
}

func (o onceADay) Next(t time.Time) time.Time {
	n := o.tab.Next(t)
	for !n.IsZero() && o.repeat(n) {
		n = o.tab.Next(n)
	}
	return n
}

// repeat reports whether n's wall-clock time was already shown before the clocks
// last went back within a day of it.
func (o onceADay) repeat(n time.Time) bool {
	_, now := n.In(o.loc).Zone()
	_, before := n.Add(-24 * time.Hour).In(o.loc).Zone()
	if before <= now {
		return false
	}
	const wall = "2006-01-02 15:04:05"
	return n.Add(-time.Duration(before-now)*time.Second).In(o.loc).Format(wall) == n.In(o.loc).Format(wall)
}
