package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	execctl "github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
)

// Long throttle waits.
//
// A job handed back with a delay stays among its consumer's unacknowledged
// messages until it is delivered again, and a pool's consumer has at most
// MaxAckPending of them: thousands of runs of one throttled key waiting for
// hours would stop every other skill of the pool. So a run whose start is more
// than an ack wait away is set aside as a run waiting for a concurrency slot is:
// its job is kept in a run.Held record with the start time (Until), a message
// scheduled in EVENTS for that time (to the second, never after it) says it is due
// (io.skillbus.throttle.due), and the job is acked. The stream's limits drop a
// scheduled message older than its MaxAge, so a start further than half of it
// away is reached by a chain of due messages, each at most that far (dueAt).
// Every worker shares one
// durable consumer of those messages (worker-throttle); the one that gets it
// publishes the job again (stage throttle, one message id per record), which then
// waits out the rest of its start time, under a second, handed back. A cancel
// finds the record as it finds a waiting run's (package control).

// dueConsumer is the durable consumer of due throttled runs all workers share.
const dueConsumer = "worker-throttle"

// DueConsumerConfig is the consumer of the io.skillbus.throttle.due messages.
func (w *Worker) DueConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       dueConsumer,
		Description:   "skillbus workers: throttled runs set aside whose start time came",
		FilterSubject: w.cfg.Bus.Subjects.Event("*", events.TypeThrottleDue),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cfg.AckWait,
		// A release whose writes fail (a full store) comes back with backoff.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

func (w *Worker) consumeDue(ctx context.Context) error {
	b := w.cfg.Bus
	c, err := b.EnsureConsumer(ctx, b.StreamEvents(), w.DueConsumerConfig())
	if err != nil {
		return fmt.Errorf("worker: consumer of due throttled runs: %w", err)
	}
	l, err := bus.Consume(c, 4, w.handleDue, w.cfg.Log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w.dueLoop = l
	return nil
}

// setAside sets j aside until at, its throttled start time.
func (w *Worker) setAside(ctx context.Context, j *job, at time.Time) error {
	data, err := json.Marshal(j.data)
	if err != nil {
		return err
	}
	rec, err := json.Marshal(run.Held{
		ExecutionID: j.data.ExecutionID, Skill: j.data.Skill.Name, Subject: j.msg.Subject(), Job: data,
		Meta: map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		At:   time.Now().UTC(), Until: at.UTC(),
	})
	if err != nil {
		return err
	}
	// Acked below, the job has no other copy: its record must outlive KV runs' TTL.
	rev, err := execctl.PutKept(ctx, w.cfg.Bus, events.RunHeldKey(j.data.ExecutionID), rec)
	if err != nil {
		return fmt.Errorf("set aside a throttled run: %w", err)
	}
	if err := w.scheduleDue(j.batch, j.data.ExecutionID, j.meta.CorrelationID, strconv.FormatUint(rev, 10), at); err != nil {
		return err
	}
	if err := j.batch.Wait(ctx); err != nil {
		return fmt.Errorf("schedule a throttled run: %w", err)
	}
	if _, claimed := j.claimRev(); claimed {
		// Handed back on purpose: whoever runs it later claims it at once.
		if err := w.release(ctx, j, j.retries); err != nil {
			return err
		}
	}
	w.cfg.Log.Debug("worker: throttled run set aside until its start", "execution", j.data.ExecutionID, "at", at)
	return j.msg.Ack()
}

// scheduleDue adds to batch the message that says the run set aside until at is
// due; id tells it from the run's other due messages.
func (w *Worker) scheduleDue(batch *bus.Batch, executionID, correlationID, id string, at time.Time) error {
	subj := w.cfg.Bus.Subjects
	due, err := bus.Event{
		ID: executionID + ".throttle.due." + id, Source: w.cfg.Source, Type: events.TypeThrottleDue,
		Meta: bus.Meta{CorrelationID: correlationID, ExecutionID: executionID},
		Data: events.ThrottleDue{ExecutionID: executionID, At: at.UTC()},
	}.Msg(subj.ThrottleTimer(executionID))
	if err != nil {
		return err
	}
	batch.Publish(due, jetstream.WithScheduleAt(dueAt(time.Now(), at, w.eventsMaxAge())), jetstream.WithScheduleTarget(subj.Event(executionID, events.TypeThrottleDue)))
	return nil
}

// dueAt is when the due message of a run set aside until at fires: at, to the
// whole second (scheduled messages fire at whole seconds: never after the start
// time), or sooner when at is further than half the EVENTS stream's retention
// maxAge (0: unbounded) away, since the stream's limits drop a scheduled message
// that waits longer; due then schedules the next message.
func dueAt(now, at time.Time, maxAge time.Duration) time.Time {
	if limit := now.Add(maxAge / 2); maxAge > 0 && at.After(limit) {
		at = limit
	}
	return at.Truncate(time.Second)
}

// eventsMaxAge is how long the EVENTS stream keeps a message, as configured
// when the worker started.
func (w *Worker) eventsMaxAge() time.Duration {
	if w.events != nil {
		if info := w.events.CachedInfo(); info != nil {
			return info.Config.MaxAge
		}
	}
	return w.cfg.Bus.Config().EventsMaxAge
}

func (w *Worker) handleDue(ctx context.Context, msg jetstream.Msg) {
	if err := w.due(ctx, msg); err != nil {
		var n uint64 = 1
		if md, _ := msg.Metadata(); md != nil {
			n = md.NumDelivered
		}
		if ctx.Err() == nil {
			w.cfg.Log.Warn("worker: could not release a throttled run that is due; retrying", "subject", msg.Subject(), "err", err)
		}
		_ = msg.NakWithDelay(min(w.cfg.Backoff.Delay(n), 5*time.Second))
	}
}

// due publishes again the job of the throttled run a due message names, if it is
// still set aside.
func (w *Worker) due(ctx context.Context, msg jetstream.Msg) error {
	e, err := bus.Decode(msg)
	var d events.ThrottleDue
	if err == nil {
		err = json.Unmarshal(e.Data(), &d)
	}
	if err == nil {
		err = events.CheckToken("execution id", d.ExecutionID)
	}
	if err != nil {
		w.cfg.Log.Error("worker: unreadable throttle.due terminated", "subject", msg.Subject(), "err", err)
		return msg.TermWithReason("unreadable throttle.due")
	}
	ent, err := w.runs.Get(ctx, events.RunHeldKey(d.ExecutionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return msg.Ack() // cancelled, or released already
	}
	if err != nil {
		return err
	}
	var h run.Held
	if err := json.Unmarshal(ent.Value(), &h); err != nil || h.Until.IsZero() {
		// Not a throttled run's record (a paused skill's, a concurrency gate's).
		return msg.Ack()
	}
	if time.Until(h.Until) > w.cfg.AckWait {
		if !h.Until.Equal(d.At) {
			return msg.Ack() // set aside again for a later start, whose own message will come
		}
		// Fired early, within the events' retention (dueAt): the next one.
		batch := w.cfg.Bus.Batch()
		id := strconv.FormatUint(ent.Revision(), 10) + "." + strconv.FormatInt(time.Now().Unix(), 10)
		if err := w.scheduleDue(batch, d.ExecutionID, h.Meta[events.ExtCorrelationID], id, h.Until); err != nil {
			return err
		}
		if err := batch.Wait(ctx); err != nil {
			return fmt.Errorf("schedule a throttled run again: %w", err)
		}
		return msg.Ack()
	}
	if err := w.publishHeld(ctx, ent.Revision(), &h, events.StageThrottle); err != nil {
		return err
	}
	return msg.Ack()
}

// throttledRun is a throttled run set aside, as the gates' view keeps it.
type throttledRun struct {
	id, skill string
	rev       uint64
	until     time.Time
}

// throttlesChanged publishes again, at once, the throttled runs set aside of each
// skill named, whose throttle changed, earliest start first: each takes its start
// again at the rate that counts now (throttle.go). Every worker does it; each
// run is published once (one message id per record).
func (w *Worker) throttlesChanged(ctx context.Context, names []string) {
	if len(names) == 0 {
		return
	}
	g := &w.gates
	g.mu.Lock()
	var rs []throttledRun
	for _, r := range g.throttled {
		if slices.Contains(names, r.skill) {
			rs = append(rs, r)
		}
	}
	rctx := g.ctx
	g.mu.Unlock()
	if len(rs) == 0 || rctx == nil {
		return
	}
	slices.SortFunc(rs, func(a, b throttledRun) int {
		if c := a.until.Compare(b.until); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	g.work.Go(func() {
		for _, r := range rs {
			if err := w.releaseThrottled(rctx, r); err != nil && rctx.Err() == nil {
				// Its due message releases it at its old start all the same.
				w.cfg.Log.Warn("worker: could not release a throttled run whose throttle changed", "execution", r.id, "err", err)
			}
		}
	})
}

// releaseThrottled publishes a throttled run set aside again now, if its record
// is still the one the view saw.
func (w *Worker) releaseThrottled(ctx context.Context, r throttledRun) error {
	e, err := w.runs.Get(ctx, events.RunHeldKey(r.id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return err
	}
	if e.Revision() != r.rev {
		return nil
	}
	var h run.Held
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return fmt.Errorf("held job %s: %w", r.id, err)
	}
	return w.publishHeld(ctx, r.rev, &h, events.StageThrottle)
}
