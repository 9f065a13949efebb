package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/schedule"
	"github.com/skillbus/skillbus/pkg/skill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves; After channels fire when it passes them.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- t
	}
	c.waiters = kept
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

const lease = 3 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

type fixture struct {
	t      *testing.T
	ctx    context.Context
	srv    *natstest.Server
	b      *bus.Bus
	clock  *fakeClock
	skills jetstream.KeyValue
	sched  jetstream.KeyValue
	later  jetstream.KeyValue // the delayed triggers

	mu       sync.Mutex
	raw      map[string]int // publishes seen on the wire, by CloudEvents id: duplicates included
	subjects map[string]int // the same, by subject
	data     map[string]string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	f := &fixture{t: t, ctx: t.Context(), srv: srv, b: srv.Bus(t, bus.Config{}), clock: &fakeClock{now: t0}, raw: map[string]int{}, subjects: map[string]int{}, data: map[string]string{}}
	var err error
	if f.skills, err = f.b.KV(f.ctx, f.b.BucketSkills()); err != nil {
		t.Fatal(err)
	}
	if f.sched, err = f.b.KV(f.ctx, f.b.BucketSchedules()); err != nil {
		t.Fatal(err)
	}
	if f.later, err = f.b.KV(f.ctx, f.b.BucketDelayed()); err != nil {
		t.Fatal(err)
	}
	sub, err := f.b.NC.Subscribe(f.b.Subjects.Triggers(), func(m *nats.Msg) {
		f.mu.Lock()
		defer f.mu.Unlock()
		id := m.Header.Get("ce-id")
		f.raw[id]++
		f.subjects[m.Subject]++
		f.data[id] = string(m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := f.b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// put publishes a skill to the catalog as the registry does.
func (f *fixture) put(name string, sched *skill.Schedule) {
	f.t.Helper()
	s := skill.Skill{Name: name, Description: "d", Kind: skill.KindInstruction, Body: "b", Schedule: sched}
	v, _ := json.Marshal(s)
	if _, err := f.skills.Put(f.ctx, name, v); err != nil {
		f.t.Fatal(err)
	}
}

type member struct {
	s    *schedule.Scheduler
	nc   *nats.Conn
	cat  *catalog.Catalog
	logs *natstest.Buffer
}

// start starts a scheduler on a connection of its own, as a router process would.
func (f *fixture) start(name string) *member {
	f.t.Helper()
	nc := f.srv.Conn(f.t)
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		f.t.Fatal(err)
	}
	kv, err := b.KV(f.ctx, b.BucketSkills())
	if err != nil {
		f.t.Fatal(err)
	}
	cat, err := catalog.Watch(f.ctx, kv, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	logs := &natstest.Buffer{}
	s, err := schedule.New(schedule.Config{Bus: b, Catalog: cat, Clock: f.clock, Lease: lease, Name: name, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	m := &member{s: s, nc: nc, cat: cat, logs: logs}
	f.t.Cleanup(func() { m.stop() })
	return m
}

func (m *member) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.s.Stop(ctx)
	m.cat.Stop()
}

// kill ends a scheduler the way a crash does: its connection goes first, so it
// cannot give its lease up.
func (m *member) kill() {
	m.cat.Stop() // the catalog's watch would outlive its closed connection
	m.nc.Close()
	m.stop()
}

// until moves the clock forward a step at a time until cond holds.
func (f *fixture) until(step time.Duration, cond func() bool, format string, args ...any) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("at %v: "+format, append([]any{f.clock.Now()}, args...)...)
		}
		f.clock.Advance(step)
		for wait := time.Now().Add(50 * time.Millisecond); time.Now().Before(wait) && !cond(); {
			time.Sleep(time.Millisecond) // polling interval of a condition
		}
	}
}

func (f *fixture) waitFor(cond func() bool, format string, args ...any) {
	f.t.Helper()
	natstest.Eventually(f.t, 10*time.Second, cond, format, args...)
}

// published is every trigger id seen, with how often it was published.
func (f *fixture) published() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.raw {
		out[k] = v
	}
	return out
}

// stored is how many triggers the TRIGGERS stream holds for the skill: ticks,
// from skillbus's own source on the subject only its roles publish, and delayed
// triggers, a sender's, on the skill's.
func (f *fixture) stored(name string) uint64 {
	f.t.Helper()
	st, err := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := st.Info(f.ctx, jetstream.WithSubjectFilter(f.b.Subjects.Triggers()))
	if err != nil {
		f.t.Fatal(err)
	}
	return info.State.Subjects[f.b.Subjects.TriggerInternal(name)] + info.State.Subjects[f.b.Subjects.TriggerSkill(name)]
}

func tickIDs(name string, ticks ...string) map[string]int {
	out := map[string]int{}
	for _, tk := range ticks {
		tt, _ := time.Parse(time.RFC3339, tk)
		out[schedule.TickID(name, tt)] = 1
	}
	return out
}

func leaders(ms ...*member) int {
	n := 0
	for _, m := range ms {
		if m.s.Leader() {
			n++
		}
	}
	return n
}

// lastTick is the tick recorded as a skill's last.
func (f *fixture) lastTick(name string) string {
	e, err := f.sched.Get(f.ctx, "tick."+name)
	if err != nil {
		return ""
	}
	var v struct{ Tick time.Time }
	_ = json.Unmarshal(e.Value(), &v)
	return v.Tick.UTC().Format(time.RFC3339)
}

func (f *fixture) hasKey(key string) bool {
	_, err := f.sched.Get(f.ctx, key)
	return err == nil
}

// check says the ids published, each exactly once on the wire and in the stream.
func (f *fixture) check(name string, want map[string]int) {
	f.t.Helper()
	f.waitFor(func() bool { return f.stored(name) >= uint64(len(want)) }, "%d triggers stored, want %d", f.stored(name), len(want))
	if diff := cmp.Diff(want, f.published()); diff != "" {
		f.t.Errorf("publishes by id (-want +got):\n%s", diff)
	}
	if n := f.stored(name); n != uint64(len(want)) {
		f.t.Errorf("%d triggers stored, want %d", n, len(want))
	}
}

func TestTwoSchedulersFireEachTickOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put("nightly", &skill.Schedule{Cron: "* * * * *"})
	a, b := f.start("a"), f.start("b")
	f.waitFor(func() bool { return leaders(a, b) == 1 && f.hasKey("tick.nightly") }, "one leader and a first tick")
	f.until(time.Second, func() bool { return len(f.published()) == 3 }, "three ticks; have %v", f.published())
	if n := leaders(a, b); n != 1 {
		t.Errorf("%d leaders", n)
	}
	f.check("nightly", tickIDs("nightly", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"))
	// Ticks go where only skillbus's roles publish: a router takes their source
	// nowhere else.
	f.mu.Lock()
	subjects := f.subjects
	f.mu.Unlock()
	if want := f.b.Subjects.TriggerInternal("nightly"); len(subjects) != 1 || subjects[want] != 3 {
		t.Errorf("ticks published on %v, want 3 on %s", subjects, want)
	}
	var d map[string]string
	if err := json.Unmarshal([]byte(f.data["schedule:nightly:2026-01-01T00:02:00Z"]), &d); err != nil || d["scheduled_at"] != "2026-01-01T00:02:00Z" {
		t.Errorf("data %v (%v), want scheduled_at 2026-01-01T00:02:00Z", d, err)
	}
}

func TestLeaderKilledAnotherTakesOver(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put("nightly", &skill.Schedule{Cron: "* * * * *"})
	a := f.start("a")
	f.waitFor(func() bool { return a.s.Leader() && f.hasKey("tick.nightly") }, "a leads")
	b := f.start("b")
	f.until(time.Second, func() bool { return len(f.published()) == 1 }, "the first tick")
	f.waitFor(func() bool { return f.lastTick("nightly") == "2026-01-01T00:01:00Z" }, "the first tick recorded")
	// Killed mid-period: 00:01:00 fired, 00:02:00 not yet.
	f.clock.Set(time.Date(2026, 1, 1, 0, 1, 20, 0, time.UTC))
	a.kill()
	start := f.clock.Now()
	f.until(time.Second, b.s.Leader, "b takes over")
	if took := f.clock.Now().Sub(start); took > lease+lease/3+time.Second {
		t.Errorf("b took over after %v; the lease is %v", took, lease)
	}
	f.until(time.Second, func() bool { return len(f.published()) == 2 }, "the second tick")
	f.check("nightly", tickIDs("nightly", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"))
}

// A leader that cannot renew its lease because NATS is down says so, not that
// another scheduler leads, and leads again once NATS is back; one whose lease
// another scheduler took says that.
func TestLeaseRenewalFailures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.start("a")
	f.waitFor(a.s.Leader, "a leads")
	f.srv.Stop()
	f.waitFor(func() bool { return !a.nc.IsConnected() }, "a still connected")
	f.until(time.Second, func() bool { return !a.s.Leader() }, "a still leads with NATS down")
	f.waitFor(func() bool { return strings.Contains(a.logs.String(), "could not renew the lease") }, "no renewal failure logged:\n%s", a.logs)
	if l := a.logs.String(); !strings.Contains(l, "could not renew the lease: NATS is unreachable; scheduling pauses until the lease is renewed or another scheduler takes it") || strings.Contains(l, "another scheduler leads") {
		t.Errorf("NATS down:\n%s", l)
	}
	f.srv.Start()
	f.until(time.Second, a.s.Leader, "a does not lead again with NATS back")

	// Taken by another: the lease key written under another name.
	if _, err := f.sched.Put(f.ctx, "leader", []byte("b")); err != nil {
		t.Fatal(err)
	}
	f.until(time.Second, func() bool { return !a.s.Leader() }, "a still leads")
	f.waitFor(func() bool { return strings.Contains(a.logs.String(), "lost the lease; another scheduler leads") }, "the loss not logged:\n%s", a.logs)
}

func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.start("a")
	f.waitFor(a.s.Leader, "a leads")
	b := f.start("b")
	a.stop()
	// b reads the lease every lease/3; a deleted it, so b needs no more than that.
	// Had a left it, b would wait for it to run out: a whole lease or more. (The
	// fake clock moves on every 50 ms of real time, so a slow machine may see a
	// step or two more than one.)
	start := f.clock.Now()
	f.until(lease/3, b.s.Leader, "b takes over")
	if took := f.clock.Now().Sub(start); took >= lease {
		t.Errorf("b took over after %v: a graceful stop hands the lease over within %v, not when it runs out (%v)", took, lease/3, lease)
	}
}

func TestRestartSpanningTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		catchUp string
		want    []string
	}{
		{skill.CatchUpLatest, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:05:00Z"}},
		{skill.CatchUpAll, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z", "2026-01-01T00:04:00Z", "2026-01-01T00:05:00Z"}},
	} {
		t.Run(tc.catchUp, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.put("nightly", &skill.Schedule{Cron: "* * * * *", CatchUp: tc.catchUp})
			a := f.start("a")
			f.waitFor(func() bool { return a.s.Leader() && f.hasKey("tick.nightly") }, "a leads")
			f.until(time.Second, func() bool { return len(f.published()) == 1 }, "the first tick")
			a.stop()
			// Down from 00:01 until 00:05:30: 00:02 to 00:05 are missed.
			f.clock.Set(time.Date(2026, 1, 1, 0, 5, 30, 0, time.UTC))
			b := f.start("b")
			f.waitFor(func() bool { return len(f.published()) == len(tc.want) }, "ticks after the restart: %v", f.published())
			f.check("nightly", tickIDs("nightly", tc.want...))
			if !b.s.Leader() {
				t.Error("b does not lead")
			}
		})
	}
}

func TestCatalogChangesApplyLive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.start("a")
	f.waitFor(a.s.Leader, "a leads")
	// Added while running: counts from now (00:00:30), so 00:01 is its first tick.
	f.put("report", &skill.Schedule{Cron: "* * * * *"})
	f.waitFor(func() bool { return f.hasKey("tick.report") }, "report scheduled")
	f.until(time.Second, func() bool { return len(f.published()) == 1 }, "the first tick")
	// Changed to hourly: no more ticks every minute.
	f.put("report", &skill.Schedule{Cron: "@hourly"})
	f.waitFor(func() bool {
		e, err := f.sched.Get(f.ctx, "tick.report")
		return err == nil && json.Valid(e.Value()) && string(e.Value()) != "" && containsHourly(e.Value())
	}, "the new schedule counted")
	f.clock.Set(time.Date(2026, 1, 1, 0, 59, 0, 0, time.UTC))
	f.until(time.Second, func() bool { return len(f.published()) == 2 }, "the hourly tick")
	// Removed: its last tick goes, and nothing fires.
	if err := f.skills.Delete(f.ctx, "report"); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool { return !f.hasKey("tick.report") }, "report's last tick deleted")
	f.clock.Set(time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC))
	f.check("report", tickIDs("report", "2026-01-01T00:01:00Z", "2026-01-01T01:00:00Z"))
}

func containsHourly(v []byte) bool {
	var tv struct{ Schedule string }
	return json.Unmarshal(v, &tv) == nil && tv.Schedule == "@hourly|"
}

func TestDelayedTrigger(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now()
	f.clock.Set(now)
	if _, err := schedule.At(f.ctx, f.b, client.Trigger{Skill: "hello"}, now.Add(-time.Second)); !errors.Is(err, schedule.ErrNotFuture) {
		t.Errorf("a time in the past: %v, want ErrNotFuture", err)
	}
	// Stored with no scheduler running: it waits in the bucket.
	act, err := schedule.At(f.ctx, f.b, client.Trigger{Skill: "hello", ID: "later-1", Data: []byte(`{"name":"Ada"}`)}, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := schedule.At(f.ctx, f.b, client.Trigger{Skill: "hello", ID: "later-1"}, now.Add(time.Hour)); err != nil || !again.Duplicate || again.ID != act.ID {
		t.Errorf("the same trigger again: %+v, %v; want a duplicate of %s", again, err, act.ID)
	}
	if _, err := f.later.Get(f.ctx, "at."+act.ID); err != nil {
		t.Fatalf("not in the delayed bucket: %v", err)
	}
	a := f.start("a")
	f.waitFor(a.s.Leader, "a leads")
	f.clock.Set(now.Add(59 * time.Minute))
	// A restart before it is due does not lose it.
	a.stop()
	b := f.start("b")
	f.until(lease/3, b.s.Leader, "b leads")
	if len(f.published()) != 0 {
		t.Fatalf("published early: %v", f.published())
	}
	f.clock.Set(now.Add(time.Hour))
	// b may not wait on the clock yet when it is set: move it on until b steps.
	f.until(lease/3, func() bool { return f.published()["later-1"] == 1 }, "the delayed trigger published")
	f.waitFor(func() bool {
		_, err := f.later.Get(f.ctx, "at."+act.ID)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, "its key deleted")
	f.check("hello", map[string]int{"later-1": 1})
	if got := f.data["later-1"]; got != `{"name":"Ada"}` {
		t.Errorf("data %s", got)
	}
}

// A delayed trigger is a sender's, whoever stored it: one written straight into
// the bucket with a source or type only skillbus may use (a sender who can guess
// the id of a scheduler's tick could run it first, with its own data) is dropped,
// not published; At refuses them. Delayed triggers an earlier version stored in
// the schedules bucket are published from there, checked the same way.
func TestDelayedTriggerOfSkillbusRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now()
	f.clock.Set(now)
	tick := schedule.TickID("hello", now.Add(time.Hour).Truncate(time.Hour))
	for _, tr := range []client.Trigger{{Skill: "hello", Source: schedule.Source, ID: tick}, {Type: "skill.hello", ID: "typed"}} {
		if _, err := schedule.At(f.ctx, f.b, tr, now.Add(time.Hour)); !errors.Is(err, client.ErrInvalidEvent) {
			t.Errorf("At(%+v): %v, want ErrInvalidEvent", tr, err)
		}
	}
	put := func(kv jetstream.KeyValue, key string, d schedule.Delayed) {
		t.Helper()
		d.At = now.Add(time.Minute)
		v, _ := json.Marshal(d)
		if _, err := kv.Put(f.ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	put(f.later, "at.forged-tick", schedule.Delayed{Skill: "hello", Source: schedule.Source, ID: tick})
	put(f.later, "at.forged-debounce", schedule.Delayed{Skill: "hello", Source: "%2Fskillbus%2Fdebounce/hello", ID: "deb"})
	put(f.later, "at.forged-type", schedule.Delayed{Type: "skill.hello", Source: "app", ID: "typed"})
	put(f.later, "at.fine", schedule.Delayed{Skill: "hello", Source: "app", ID: "fine"})
	put(f.sched, "at.legacy", schedule.Delayed{Skill: "hello", Source: "app", ID: "legacy"})
	put(f.sched, "at.legacy-forged", schedule.Delayed{Skill: "hello", Source: schedule.Source, ID: tick + "x"})
	a := f.start("a")
	f.waitFor(a.s.Leader, "a leads")
	f.clock.Set(now.Add(time.Minute))
	f.until(lease/3, func() bool { return f.published()["fine"] == 1 && f.published()["legacy"] == 1 }, "the delayed triggers published")
	gone := func(kv jetstream.KeyValue, key string) bool {
		_, err := kv.Get(f.ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}
	f.waitFor(func() bool {
		return gone(f.later, "at.forged-tick") && gone(f.later, "at.forged-debounce") && gone(f.later, "at.forged-type") &&
			gone(f.later, "at.fine") && gone(f.sched, "at.legacy") && gone(f.sched, "at.legacy-forged")
	}, "every key deleted")
	if got := f.published(); len(got) != 2 {
		t.Errorf("published %v, want fine and legacy only", got)
	}
}

func ExampleTickID() {
	fmt.Println(schedule.TickID("nightly", time.Date(2026, 3, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600))))
	// Output: schedule:nightly:2026-03-01T08:00:00Z
}
