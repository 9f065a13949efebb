package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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
// for its turn (its job handed back until then) or cannot be keyed (failed).
func (w *Worker) throttle(ctx context.Context, j *job) (done bool, err error) {
	th := j.skill.Throttle
	if !j.fast {
		at, ok, err := w.reserved(ctx, j)
		if err != nil {
			return true, err
		}
		if ok {
			return w.waitTurn(ctx, j, at)
		}
	}
	p := w.throttleProgOf(j.skill)
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
		return false, nil
	}
	rec := []byte(strconv.FormatInt(at.UnixNano(), 10))
	if _, err := w.runs.Create(ctx, events.RunThrottleKey(j.data.ExecutionID), rec, jetstream.KeyTTL(wait+time.Hour)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return true, fmt.Errorf("throttle: record the start: %w", err)
	}
	return w.waitTurn(ctx, j, at)
}

// reserved reads the start a throttled execution waits for.
func (w *Worker) reserved(ctx context.Context, j *job) (time.Time, bool, error) {
	e, err := w.runs.Get(ctx, events.RunThrottleKey(j.data.ExecutionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return time.Time{}, false, nil // unreadable: reserve again
	}
	return time.Unix(0, n), true, nil
}

// waitTurn runs j if its start has come, and hands it back until then otherwise.
func (w *Worker) waitTurn(ctx context.Context, j *job, at time.Time) (done bool, err error) {
	wait := time.Until(at)
	if wait <= time.Millisecond {
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

// reserve takes the next start of a throttle's key value: now, or the first free
// interval after the runs that reserved before.
func (w *Worker) reserve(ctx context.Context, key string, th *skill.Throttle) (time.Time, error) {
	interval := th.Interval()
	tau := time.Duration(th.Burst) * interval
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
			if n, err := strconv.ParseInt(string(e.Value()), 10, 64); err == nil {
				tat = n
			}
		}
		now := time.Now().UnixNano()
		start := time.Unix(0, max(now, tat-int64(tau)))
		next := []byte(strconv.FormatInt(max(tat, now)+int64(interval), 10))
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
