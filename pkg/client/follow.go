package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Follow reads the activation's events in order — the routing decision, then each
// execution's progress, following fallbacks and repairs — calling fn (if not nil)
// with each, and returns when the activation ends or ctx does, or, for a client
// made with StopAtRepair, when its execution is parked on a repair that waits for
// approval (Result.Repairing): when the repair's events, read to their end, have
// a proposal and no decision, and the execution's, read to their end, no outcome
// (an outcome or a decision read later wins). Persisted events published before
// Follow was called are read too; live progress events (see events.Level) only from
// when it subscribes, which Run does before publishing. fn sees each execution's
// events in the execution's own order, and an execution's after the one it follows
// on from, however they arrived.
func (c *Client) Follow(ctx context.Context, activationID string, fn func(*event.Event)) (*Result, error) {
	live, err := c.subscribeLive(ctx, activationID)
	if err != nil {
		return nil, err
	}
	defer func() { _ = live.sub.Unsubscribe() }()
	return c.follow(ctx, activationID, fn, live.ch)
}

// Subscription is a follow of an activation whose live events are subscribed to
// before its trigger is sent (Subscribe, then Send, then Follow), as Run does: a
// follow begun after the send misses the live events published before it, and
// the events after such a gap wait for it (a second) before they are handed on.
type Subscription struct {
	c            *Client
	activationID string
	live         *liveSub
}

// Subscribe subscribes to the live events of the activation a trigger will set
// off (events.ActivationID of its source and id). Close it when done.
func (c *Client) Subscribe(ctx context.Context, activationID string) (*Subscription, error) {
	live, err := c.subscribeLive(ctx, activationID)
	if err != nil {
		return nil, err
	}
	return &Subscription{c: c, activationID: activationID, live: live}, nil
}

// Follow is Client.Follow of the subscribed activation, with the live events
// received since Subscribe.
func (s *Subscription) Follow(ctx context.Context, fn func(*event.Event)) (*Result, error) {
	return s.c.follow(ctx, s.activationID, fn, s.live.ch)
}

// Close ends the subscription.
func (s *Subscription) Close() { _ = s.live.sub.Unsubscribe() }

// idMsg is a persisted event with the id whose events its consumer reads.
type idMsg struct {
	m  jetstream.Msg
	id string
}

// follower is the state of one Follow.
type follower struct {
	c            *Client
	ctx          context.Context
	activationID string
	fn           func(*event.Event)
	msgs         chan idMsg
	done         chan struct{}
	// cons reads the events of followed: the activation's, then its execution's.
	cons     jetstream.ConsumeContext
	followed string
	// A parked execution's repair has events of its own (proposed, failed, ...),
	// read by repairCons beside the execution's, which go on when the repair
	// releases it.
	repairCons jetstream.ConsumeContext
	parked     *events.RepairRequested
	// proposal is the parked repair's proposal waiting for approval, as far as its
	// events read so far say. It is reported (with StopAtRepair) only once both
	// the repair's and the execution's consumers have caught up with their
	// subjects' ends without a decision or an outcome: their histories are read
	// from the start, side by side, so a proposal read first may have been
	// decided long ago, or the run may have ended since.
	proposal *Repairing
	// pending is how many messages each consumer (by id) had still to deliver
	// after its last one.
	pending map[string]uint64
	decided bool
	// next is the routing decision looked up, to be read before anything else.
	next  *nats.Msg
	order *sequencer
	ready []arrival // events the sequencer handed on, not yet read
}

func (c *Client) follow(ctx context.Context, activationID string, fn func(*event.Event), live <-chan *nats.Msg) (*Result, error) {
	f := &follower{
		c: c, ctx: ctx, activationID: activationID, fn: fn,
		msgs: make(chan idMsg, 256), done: make(chan struct{}),
		pending: map[string]uint64{}, order: newSequencer(),
	}
	defer f.stop()
	// Progress that the fleet's events level does not persist arrives on live, to
	// fn only: it never decides the result.
	if err := f.watch(activationID); err != nil {
		return nil, err
	}
	// The routing decision travels in the jobs of the plan (an event of its own only
	// at the full events level). The router announces a decision on the live
	// subjects once its jobs are stored when the trigger asked for live progress (Run
	// does); the subscription to them is older than this look-up, so such a decision
	// made after it is announced to us. For a trigger that did not ask, the look-up
	// is repeated every DecisionPoll until the decision is there.
	f.next = c.decisionMsg(ctx, activationID)
	poll := time.NewTicker(DecisionPoll)
	defer poll.Stop()
	hold := time.NewTimer(time.Hour)
	defer hold.Stop()
	for {
		if res, err := f.drain(); res != nil || err != nil {
			return res, err
		}
		if f.next != nil && !f.decided {
			nm := f.next
			f.next = nil
			f.arrive(bus.FromNATS(nm), false)
			continue
		}
		f.next = nil
		holdC := f.resetHold(hold)
		select {
		case im := <-f.msgs:
			if res := f.persisted(im, live); res != nil {
				return res, nil
			}
		case lm := <-live:
			f.onLive(lm)
		case <-poll.C:
			if !f.decided {
				f.next = c.decisionMsg(ctx, activationID)
			}
		case now := <-holdC:
			f.ready = f.order.expire(now, f.ready)
		case <-ctx.Done():
			return nil, fmt.Errorf("no result for activation %s yet: %w", activationID, ctx.Err())
		}
	}
}

// resetHold sets t to fire when the oldest event the sequencer holds stops
// waiting, and returns its channel, or nil while nothing is held.
func (f *follower) resetHold(t *time.Timer) <-chan time.Time {
	d := f.order.deadline()
	if d.IsZero() {
		return nil
	}
	t.Reset(time.Until(d))
	return t.C
}

// persisted takes a message of a consumer. It returns the result of a run parked
// on a repair once a scheduled message shows its consumer caught up.
func (f *follower) persisted(im idMsg, live <-chan *nats.Msg) *Result {
	m := im.m
	stored := time.Now()
	if md, err := m.Metadata(); err == nil {
		f.pending[im.id] = md.NumPending
		stored = md.Timestamp
	}
	if m.Headers().Get(jetstream.ScheduleHeader) != "" {
		// A scheduled message waiting for its time is not an event yet; it
		// becomes one if it fires. A sleep's wake-up or a wait's timeout, written
		// as the run parked, tells fn that it did and until when (see Scheduled);
		// a confirmation's timeout does not: confirmation.requested says it.
		if f.fn != nil && events.TimerOf(m.Subject()) == events.TimerWait {
			if e, err := bus.Decode(m); err == nil {
				at := time.Now()
				if md, err := m.Metadata(); err == nil {
					at = md.Timestamp
				}
				MarkScheduled(e, at)
				f.ready = append(f.ready, arrival{e: e, live: true, at: time.Now()})
			}
		}
		return f.stopped()
	}
	// Live progress that arrived before this event goes first: select picks at
	// random among ready channels, and an outcome ends the follow.
	for drained := false; !drained; {
		select {
		case lm := <-live:
			f.onLive(lm)
		default:
			drained = true
		}
	}
	// Held for what comes before it no longer than orderHold after it was
	// stored: a live event published before it has had that long to arrive,
	// and one published before the follow subscribed never will (a run that
	// ended before it began answers at once, not a second later).
	at := time.Now()
	if stored.Before(at) {
		at = stored
	}
	f.arriveAt(m, false, at)
	return nil
}

// extScheduled is the extension MarkScheduled sets: when a scheduled message was
// written (RFC 3339). No event on the bus has it.
const extScheduled = "skillscheduled"

// Scheduled reports whether e, as Follow handed it on, is a message scheduled to
// be published later rather than an event that happened: the wake-up of a run
// that sleeps, or the timeout of one that waits for an event, written as the run
// parked (an io.skillbus.wait.ended whose time is when it is due). at is when it
// was written.
func Scheduled(e *event.Event) (at time.Time, ok bool) {
	v, ok := e.Extensions()[extScheduled].(string)
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	return at, err == nil
}

// MarkScheduled marks e as a scheduled message written at at (see Scheduled),
// for a reader of the events stream other than Follow.
func MarkScheduled(e *event.Event, at time.Time) {
	e.SetExtension(extScheduled, at.UTC().Format(time.RFC3339Nano))
}

// onLive takes a live message: the router's announcement of its decision, or
// progress for fn.
func (f *follower) onLive(lm *nats.Msg) {
	if strings.HasSuffix(lm.Subject, "."+events.Kind(events.TypeRouteDecided)) {
		if !f.decided && f.next == nil {
			f.next = f.c.decisionMsg(f.ctx, f.activationID)
		}
		return
	}
	if f.fn != nil {
		f.arrive(bus.FromNATS(lm), true)
	}
}

// arrive decodes a message and hands it to the sequencer.
func (f *follower) arrive(m bus.Msg, live bool) { f.arriveAt(m, live, time.Now()) }

// arriveAt is arrive of a message whose wait for what comes before it counts
// from at.
func (f *follower) arriveAt(m bus.Msg, live bool, at time.Time) {
	e, err := bus.Decode(m)
	if err != nil {
		return
	}
	f.ready = f.order.add(arrival{e: e, live: live, at: at}, f.ready)
}

// drain reads the events the sequencer handed on, in order, until one ends the
// follow.
func (f *follower) drain() (*Result, error) {
	for len(f.ready) > 0 {
		a := f.ready[0]
		f.ready = f.ready[1:]
		if f.decided && a.e.Type() == events.TypeRouteDecided {
			// Looked up, and read again as the activation's event at the full
			// events level.
			continue
		}
		if f.fn != nil {
			f.fn(a.e)
		}
		if a.live {
			continue
		}
		if res, err := f.read(a.e); res != nil || err != nil {
			return res, err
		}
		if r := f.stopped(); r != nil {
			return r, nil
		}
	}
	return nil, nil
}

// read applies a persisted event to the follow, and returns the result it ends
// with, if it does.
func (f *follower) read(e *event.Event) (*Result, error) {
	switch e.Type() {
	case events.TypeRouteUnmatched, events.TypeRouteDecided:
		return f.readRoute(e)
	case events.TypeExecutionFallback, events.TypeExecutionCompleted, events.TypeExecutionFailed, events.TypeExecutionCancelled:
		return f.readOutcome(e)
	case events.TypeRepairRequested, events.TypeRepairProposed, events.TypeRepairSucceeded, events.TypeRepairFailed:
		return nil, f.readRepair(e)
	}
	return nil, nil
}

func (f *follower) readRoute(e *event.Event) (*Result, error) {
	if e.Type() == events.TypeRouteUnmatched {
		var d events.RouteUnmatched
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return nil, err
		}
		return &Result{Unmatched: &d}, nil
	}
	var d events.RouteDecided
	if err := json.Unmarshal(e.Data(), &d); err != nil {
		return nil, err
	}
	f.decided = true
	return nil, f.watch(d.Plan.Primary.ExecutionID)
}

func (f *follower) readOutcome(e *event.Event) (*Result, error) {
	switch e.Type() {
	case events.TypeExecutionFallback:
		var d events.ExecutionFallback
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return nil, err
		}
		// The failed execution's repair, if any, is no longer the run's.
		f.parked, f.proposal = nil, nil
		return nil, f.watch(d.NextExecutionID)
	case events.TypeExecutionCompleted:
		var d events.ExecutionCompleted
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return nil, err
		}
		return &Result{Completed: true, Outputs: d.Outputs, ExecutionID: d.ExecutionID, Skill: d.Skill}, nil
	case events.TypeExecutionCancelled:
		var d events.ExecutionCancelled
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return nil, err
		}
		return &Result{Cancelled: &d, ExecutionID: d.ExecutionID, Skill: d.Skill}, nil
	}
	var d events.ExecutionFailed
	if err := json.Unmarshal(e.Data(), &d); err != nil {
		return nil, err
	}
	return &Result{Failed: &d, ExecutionID: d.ExecutionID, Skill: d.Skill}, nil
}

func (f *follower) readRepair(e *event.Event) error {
	switch e.Type() {
	case events.TypeRepairRequested:
		var d events.RepairRequested
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return err
		}
		return f.watchRepair(&d)
	case events.TypeRepairProposed:
		var d events.RepairProposed
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			return err
		}
		if f.c.stopAtRepair && f.parked != nil && d.RepairID == f.parked.RepairID && !d.Auto {
			f.proposal = &Repairing{
				ExecutionID: f.parked.ExecutionID, Skill: f.parked.Skill, RepairID: d.RepairID,
				Fault: f.parked.Fault, Error: f.parked.Error, Summary: d.Summary,
			}
		}
		return nil
	}
	// Decided: the parked execution goes on, or fails, on its own subject.
	var d events.RepairProgress
	if err := json.Unmarshal(e.Data(), &d); err != nil {
		return err
	}
	if f.proposal != nil && d.RepairID == f.proposal.RepairID {
		f.proposal = nil
	}
	return nil
}

// caughtUp reports whether the consumer of id's events has delivered all there were.
func (f *follower) caughtUp(id string) bool {
	n, ok := f.pending[id]
	return ok && n == 0
}

// stopped is the result of a run parked on the proposal, once the repair's and the
// execution's histories are read to their ends: an outcome already in the
// execution's, or a decision in the repair's, comes before the end.
func (f *follower) stopped() *Result {
	p := f.proposal
	if p == nil || !f.caughtUp(p.RepairID) || !f.caughtUp(f.followed) {
		return nil
	}
	return &Result{ExecutionID: p.ExecutionID, Skill: p.Skill, Repairing: p}
}

// watch makes id's events the ones followed.
func (f *follower) watch(id string) (err error) {
	if f.cons != nil {
		f.cons.Stop()
	}
	f.followed = id
	if id != f.activationID {
		f.ready = f.order.follow(id, f.ready)
	}
	f.cons, err = f.consume(id)
	return err
}

func (f *follower) watchRepair(d *events.RepairRequested) (err error) {
	if f.parked != nil && f.parked.RepairID == d.RepairID {
		return nil
	}
	f.parked, f.proposal = d, nil
	if f.repairCons != nil {
		f.repairCons.Stop()
	}
	f.repairCons, err = f.consume(d.RepairID)
	return err
}

// consume starts reading id's events from their start into f.msgs.
func (f *follower) consume(id string) (jetstream.ConsumeContext, error) {
	b := f.c.b
	oc, err := b.OrderedConsumer(f.ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Subjects.Events(id)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		// The server keeps a consumer while a pull of it waits, as one always
		// does while this follows; one whose follower vanished without deleting
		// it goes after this.
		InactiveThreshold: releaseTimeout,
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("no %s stream: is skillbus running against this NATS server?", b.StreamEvents())
		}
		return nil, fmt.Errorf("follow %s: %w", id, err)
	}
	cc, err := oc.Consume(func(m jetstream.Msg) {
		select {
		case f.msgs <- idMsg{m, id}:
		case <-f.done:
		}
	})
	if err != nil {
		return nil, err
	}
	return released{ConsumeContext: cc, c: f.c, oc: oc}, nil
}

func (f *follower) stop() {
	close(f.done)
	for _, cc := range []jetstream.ConsumeContext{f.cons, f.repairCons} {
		if cc != nil {
			cc.Stop()
		}
	}
}

// released is a follow's consumption whose Stop also deletes its consumer on the
// server at once. Left alone the consumer would stay for its inactivity threshold
// (5 minutes): one per follower gone — a waiter who hung up, a page closed —
// whoever asked.
type released struct {
	jetstream.ConsumeContext
	c  *Client
	oc jetstream.Consumer
}

func (r released) Stop() {
	r.ConsumeContext.Stop()
	if info := r.oc.CachedInfo(); info != nil {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = r.c.b.DeleteConsumer(ctx, r.c.b.StreamEvents(), info.Name)
	}
}

// releaseTimeout bounds deleting a follow's consumer; one the server did not hear
// about goes after its inactivity threshold.
const releaseTimeout = 2 * time.Second

// DecisionPoll is how often Follow looks for the routing decision of a trigger that
// did not ask for live progress and is not routed yet.
var DecisionPoll = 500 * time.Millisecond

// decisionMsg is the activation's routing decision as the route.decided message the
// router publishes at the full events level, or nil while there is none.
func (c *Client) decisionMsg(ctx context.Context, activationID string) *nats.Msg {
	d, _, err := c.b.Decision(ctx, activationID)
	if err != nil {
		return nil
	}
	m, err := bus.Event{ID: activationID + ".route.decided", Source: "/skillbus/router", Type: events.TypeRouteDecided,
		Meta: bus.Meta{CorrelationID: activationID}, Data: d}.Msg(c.b.Subjects.Event(activationID, events.TypeRouteDecided))
	if err != nil {
		return nil
	}
	return m
}
