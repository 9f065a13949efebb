package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
// (io.skillbus.throttle.due), and the job is acked. Every worker shares one
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
	subj := w.cfg.Bus.Subjects
	due, err := bus.Event{
		ID: j.data.ExecutionID + ".throttle.due." + strconv.FormatUint(rev, 10), Source: w.cfg.Source, Type: events.TypeThrottleDue,
		Meta: bus.Meta{CorrelationID: j.meta.CorrelationID, ExecutionID: j.data.ExecutionID},
		Data: events.ThrottleDue{ExecutionID: j.data.ExecutionID, At: at.UTC()},
	}.Msg(subj.ThrottleTimer(j.data.ExecutionID))
	if err != nil {
		return err
	}
	// Scheduled messages fire at whole seconds: never after the start time.
	j.batch.Publish(due, jetstream.WithScheduleAt(at.Truncate(time.Second)), jetstream.WithScheduleTarget(subj.Event(j.data.ExecutionID, events.TypeThrottleDue)))
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
	if err := json.Unmarshal(ent.Value(), &h); err != nil || h.Until.IsZero() || time.Until(h.Until) > w.cfg.AckWait {
		// Not a throttled run's record (a paused skill's, a concurrency gate's),
		// or set aside again for a later start, whose own message will come.
		return msg.Ack()
	}
	if err := w.publishHeld(ctx, ent.Revision(), &h, events.StageThrottle); err != nil {
		return err
	}
	return msg.Ack()
}
