package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Throttles: a skill's throttle: {key, limit, period, burst}.
//
// The rate is a GCRA in KV runs, one key per key value (events.ThrottleKey) holding
// the time the next run may start at the steady rate; a run reserves its start by a
// compare-and-set that moves it on by one interval (period / limit), burst
// intervals of credit allowed. So every run gets a start time of its own, fleet-wide,
// and runs beyond the rate wait rather than being skipped.
//
// A run whose start is in the future waits for it without holding a worker: its
// start is recorded under <execution>.throttle, it is released from the
// execution's claim if it held one, and its job is handed back with a delay to
// that time, or, when that is more than an ack wait away, set aside until then
// (throttlewait.go). The delivery that comes back, on any worker, finds its start
// recorded and runs once it has come, without reserving again. Skills without a
// throttle pay one nil check.

// throttleProgs caches a skill version's compiled throttle key.
type throttleProg struct {
	key *flow.Program
	err error
}

func (w *Worker) throttleProgOf(s *skill.Skill) *throttleProg {
	if p, ok := w.throttles.Load(s.Digest); ok {
		return p.(*throttleProg)
	}
	p := &throttleProg{}
	if s.Throttle.Key != "" {
		if p.key, p.err = flow.Compile(s.Throttle.Key, flow.Key); p.err != nil {
			p.err = fmt.Errorf("throttle.key %s does not compile: %w", s.Throttle.Key, p.err)
		}
	}
	w.throttles.Store(s.Digest, p)
	return p
}

// throttle is the gate of a skill with a throttle: done when the run must wait
// for its turn (its job handed back until then) or cannot be keyed (failed). fs
// is the version whose throttle counts: the skill's current one (current.go).
func (w *Worker) throttle(ctx context.Context, j *job, fs *skill.Skill) (done bool, err error) {
	th := fs.Throttle
	sig := throttleSig(th)
	if !j.fast {
		at, was, ok, err := w.reserved(ctx, j)
		if err != nil {
			return true, err
		}
		if ok && (was == "" || was == sig) {
			return w.waitTurn(ctx, j, at)
		}
		// Reserved under a throttle since changed: its start is taken again, at
		// the rate that counts now.
	}
	p := w.throttleProgOf(fs)
	if p.err != nil {
		return true, w.fail(ctx, j, "", failure.Fatalf("%v", p.err))
	}
	var value string
	if p.key != nil {
		ev, err := keyEvent(j)
		if err != nil {
			return true, w.fail(ctx, j, "", failure.Fatalf("throttle: inputs are not JSON: %v", err))
		}
		if value, err = p.key.KeyOf(ev); err != nil {
			return true, w.fail(ctx, j, "", failure.Fatalf("throttle.key %s: %v", p.key, err))
		}
	}
	at, err := w.reserve(ctx, events.ThrottleKey(j.data.Skill.Name, events.KeyHash(value)), th)
	if err != nil {
		return true, fmt.Errorf("throttle: %w", err)
	}
	wait := time.Until(at)
	if wait <= time.Millisecond {
		sleepTo(at)
		return false, nil
	}
	rec := []byte(strconv.FormatInt(at.UnixNano(), 10) + "/" + sig)
	// Written over a start reserved under a rate since changed.
	m := &nats.Msg{Subject: w.runsSubject(events.RunThrottleKey(j.data.ExecutionID)), Header: nats.Header{}, Data: rec}
	m.Header.Set(jetstream.MsgTTLHeader, (wait + time.Hour).Round(time.Second).String())
	if _, err := w.cfg.Bus.Publish(ctx, m); err != nil {
		return true, fmt.Errorf("throttle: record the start: %w", err)
	}
	w.waiting(j, "throttle", throttleDetail(th, at))
	return w.waitTurn(ctx, j, at)
}

// throttleSig names a throttle's rate in what a reservation records: a start
// or a rate reserved under another rate is reserved again (a changed throttle
// counts for the runs waiting as for new ones).
func throttleSig(th *skill.Throttle) string {
	return strconv.FormatInt(int64(th.Interval()), 10) + "." + strconv.Itoa(th.Burst)
}

// splitSig splits a recorded "<unix nanoseconds>/<sig>" (or, as written before
// rates were named, "<unix nanoseconds>").
func splitSig(v string) (int64, string, error) {
	n, sig, _ := strings.Cut(v, "/")
	t, err := strconv.ParseInt(n, 10, 64)
	return t, sig, err
}

// reserved reads the start a throttled execution waits for and the rate it was
// reserved under ("" if not recorded).
func (w *Worker) reserved(ctx context.Context, j *job) (time.Time, string, bool, error) {
	e, err := w.runs.Get(ctx, events.RunThrottleKey(j.data.ExecutionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return time.Time{}, "", false, nil
	}
	if err != nil {
		return time.Time{}, "", false, err
	}
	n, sig, err := splitSig(string(e.Value()))
	if err != nil {
		return time.Time{}, "", false, nil // unreadable: reserve again
	}
	return time.Unix(0, n), sig, true, nil
}

// waitTurn runs j if its start has come, and hands it back until then otherwise.
func (w *Worker) waitTurn(ctx context.Context, j *job, at time.Time) (done bool, err error) {
	wait := time.Until(at)
	if wait <= time.Millisecond {
		sleepTo(at)
		return false, nil
	}
	if wait > w.cfg.AckWait {
		return true, w.setAside(ctx, j, at)
	}
	if _, claimed := j.claimRev(); claimed {
		if err := w.release(ctx, j, j.retries); err != nil {
			return true, err
		}
	}
	return true, j.msg.NakWithDelay(wait)
}

// sleepTo waits out the last millisecond or less before at, so that a run
// never starts before its reserved start, by however little.
func sleepTo(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d) // at most a millisecond: shorter than handing the job back
	}
}

// reserve takes the next start of a throttle's key value: now, or the first free
// interval after the runs that reserved before at the same rate. The runs
// reserved at another rate (the throttle was changed) do not count: each of those
// still waiting takes its start again at the new rate.
func (w *Worker) reserve(ctx context.Context, key string, th *skill.Throttle) (time.Time, error) {
	interval := th.Interval()
	tau := time.Duration(th.Burst) * interval
	sig := throttleSig(th)
	for range 32 {
		var tat int64 // the steady rate's next start, unix nanoseconds
		var rev uint64
		e, err := w.runs.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return time.Time{}, err
		default:
			rev = e.Revision()
			if n, was, err := splitSig(string(e.Value())); err == nil && (was == "" || was == sig) {
				tat = n
			}
		}
		now := time.Now().UnixNano()
		start := time.Unix(0, max(now, tat-int64(tau)))
		next := []byte(strconv.FormatInt(max(tat, now)+int64(interval), 10) + "/" + sig)
		if rev == 0 {
			_, err = w.runs.Create(ctx, key, next)
		} else {
			_, err = w.runs.Update(ctx, key, next, rev)
		}
		if err == nil {
			return start, nil
		}
		if !isWrongLastSequence(err) {
			return time.Time{}, err
		}
	}
	return time.Time{}, errors.New("the throttle's key is contended: try again")
}
