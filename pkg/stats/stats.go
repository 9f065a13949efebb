// Package stats keeps the fleet's terminal results per skill version, which routers
// score skills by (the success component).
//
// Workers count the outcomes they publish (execution.completed as a success,
// execution.failed and execution.fallback as failures) and write the counts of each
// minute to the stats bucket, under one key per worker process and minute, at most
// once a second while they change. Routers watch the bucket and sum the minutes of
// their window. Nothing is added to the execution path: an execution writes no more
// messages, and no router receives a message per execution. Counting in the routers
// instead (a consumer of every outcome in each router) cost about a tenth of the
// whole system's CPU per execution, and every router added another copy of it.
//
// The counts are statistics, not records: a worker killed outright loses what it
// counted since its last write (a second at most), which moves a success rate by
// nothing that matters to a score. The outcomes themselves, in EVENTS, stay the
// record.
package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Slice is the span of time one key of the bucket counts.
const Slice = time.Minute

// Tally is the terminal results of one skill version.
type Tally struct {
	Skill   string `json:"skill"`
	Version string `json:"version,omitempty"`
	OK      int    `json:"ok"`
	Total   int    `json:"total"`
}

// Counts is the value of one key: what one worker process counted in one slice.
type Counts struct {
	// Start is the slice's start (a whole minute, UTC).
	Start   time.Time `json:"start"`
	Results []Tally   `json:"results"`
}

// key names the counts of one worker process in the slice that starts at start:
// "<unix minute>.<instance>", so a router knows a slice's age from its key.
func key(start time.Time, instance string) string {
	return strconv.FormatInt(start.Unix()/int64(Slice/time.Second), 10) + "." + instance
}

// sliceOf returns the start of the slice a key counts, false for a key that is not
// one of ours.
func sliceOf(k string) (time.Time, bool) {
	m, _, ok := strings.Cut(k, ".")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(m, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, false
	}
	return time.Unix(n*int64(Slice/time.Second), 0).UTC(), true
}

type id struct{ skill, version string }

// sliceNumber is the number of the slice t falls in, counted from the Unix epoch.
func sliceNumber(t time.Time) int64 {
	n := t.Unix()
	d := int64(Slice / time.Second)
	if n < 0 {
		return (n - d + 1) / d
	}
	return n / d
}

// sliceStart is when slice n starts.
func sliceStart(n int64) time.Time { return time.Unix(n*int64(Slice/time.Second), 0).UTC() }

// Recorder counts a worker process's outcomes and writes them to the bucket.
type Recorder struct {
	kv       jetstream.KeyValue
	log      *slog.Logger
	instance string
	now      func() time.Time

	mu sync.Mutex
	// Slices by their number since the epoch (Unix time / Slice): an integer key
	// keeps Add, which runs for every outcome, cheap.
	slices map[int64]map[id]*Tally
	dirty  map[int64]bool
}

// NewRecorder returns a recorder writing to kv (the stats bucket). Each recorder is
// one worker process: its keys are its own.
func NewRecorder(kv jetstream.KeyValue, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{kv: kv, log: log, instance: nuid.Next(), now: time.Now,
		slices: map[int64]map[id]*Tally{}, dirty: map[int64]bool{}}
}

// Add counts one terminal result of a skill version. A nil Recorder counts nothing.
func (r *Recorder) Add(skill, version string, ok bool) {
	if r == nil {
		return
	}
	start := sliceNumber(r.now())
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slices[start]
	if s == nil {
		s = map[id]*Tally{}
		r.slices[start] = s
	}
	t := s[id{skill, version}]
	if t == nil {
		// Kept for a while: the strings may be slices of a message's data (a job
		// read in place), which they would keep alive.
		skill, version = strings.Clone(skill), strings.Clone(version)
		t = &Tally{Skill: skill, Version: version}
		s[id{skill, version}] = t
	}
	t.Total++
	if ok {
		t.OK++
	}
	r.dirty[start] = true
}

// Flush writes the slices counted since the last flush. A slice that is over and
// written is forgotten.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	type put struct {
		start int64
		v     []byte
	}
	var puts []put
	for start := range r.dirty {
		c := Counts{Start: sliceStart(start)}
		for _, t := range r.slices[start] {
			c.Results = append(c.Results, *t)
		}
		v, err := json.Marshal(c)
		if err != nil {
			r.mu.Unlock()
			return err
		}
		puts = append(puts, put{start, v})
	}
	clear(r.dirty)
	current := sliceNumber(r.now())
	r.mu.Unlock()

	var errs []error
	for _, p := range puts {
		if _, err := r.kv.Put(ctx, key(sliceStart(p.start), r.instance), p.v); err != nil {
			errs = append(errs, err)
			r.mu.Lock()
			r.dirty[p.start] = true // written at the next flush
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	for start := range r.slices {
		if start < current && !r.dirty[start] {
			delete(r.slices, start)
		}
	}
	r.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}

// Run flushes every interval until ctx ends, then once more with a short deadline
// of its own.
func (r *Recorder) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("stats: counts not written; trying again", "err", err)
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := r.Flush(fctx); err != nil {
				r.log.Warn("stats: last counts not written", "err", err)
			}
			cancel()
			return
		}
	}
}

// Window sums the counts of the bucket over the last window, as they are written.
type Window struct {
	window time.Duration
	now    func() time.Time
	w      jetstream.KeyWatcher
	done   chan struct{}

	mu     sync.Mutex
	keys   map[string]counted
	totals map[id]*Tally
	swept  time.Time
	ready  chan struct{}
}

type counted struct {
	start   time.Time
	results []Tally
}

// Watch follows kv (the stats bucket) and sums the slices that started within the
// last window.
func Watch(ctx context.Context, kv jetstream.KeyValue, window time.Duration, log *slog.Logger) (*Window, error) {
	return watch(ctx, kv, window, log, time.Now)
}

func watch(ctx context.Context, kv jetstream.KeyValue, window time.Duration, log *slog.Logger, now func() time.Time) (*Window, error) {
	if log == nil {
		log = slog.Default()
	}
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("stats: watching %s: %w", kv.Bucket(), err)
	}
	s := &Window{window: window, now: now, w: w, done: make(chan struct{}), ready: make(chan struct{}),
		keys: map[string]counted{}, totals: map[id]*Tally{}}
	go func() {
		defer close(s.done)
		for e := range w.Updates() {
			if e == nil {
				close(s.ready)
				continue
			}
			s.update(e, log)
		}
	}()
	return s, nil
}

func (s *Window) update(e jetstream.KeyValueEntry, log *slog.Logger) {
	start, ok := sliceOf(e.Key())
	if !ok {
		return
	}
	var c Counts
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			log.Warn("stats: unreadable counts skipped", "key", e.Key(), "err", err)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(e.Key())
	if e.Operation() != jetstream.KeyValuePut || start.Before(s.cutoff()) {
		return
	}
	s.keys[e.Key()] = counted{start: start, results: c.Results}
	for _, t := range c.Results {
		s.add(t, 1)
	}
}

func (s *Window) cutoff() time.Time { return s.now().Add(-s.window).Truncate(Slice) }

// remove takes a key's counts out of the totals; s.mu is held.
func (s *Window) remove(k string) {
	if old, ok := s.keys[k]; ok {
		for _, t := range old.results {
			s.add(t, -1)
		}
		delete(s.keys, k)
	}
}

func (s *Window) add(t Tally, sign int) {
	k := id{t.Skill, t.Version}
	sum := s.totals[k]
	if sum == nil {
		sum = &Tally{Skill: t.Skill, Version: t.Version}
		s.totals[k] = sum
	}
	sum.OK += sign * t.OK
	sum.Total += sign * t.Total
	if sum.Total <= 0 {
		delete(s.totals, k)
	}
}

// Success returns the successes and the terminal results of a skill version in the
// window.
func (s *Window) Success(skill, version string) (ok, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.swept) >= Slice/6 {
		s.swept = now
		cut := s.cutoff()
		for k, c := range s.keys {
			if c.start.Before(cut) {
				s.remove(k)
			}
		}
	}
	if t := s.totals[id{skill, version}]; t != nil {
		return t.OK, t.Total
	}
	return 0, 0
}

// Stop stops following the bucket.
func (s *Window) Stop() {
	_ = s.w.Stop()
	<-s.done
}
