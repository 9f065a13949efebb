// Package client publishes triggers to skillbus and follows them to their result. It
// is what `skillbus trigger --wait` and the skill tool use, and what a Go program
// embedding skillbus would use:
//
//	c := client.New(b)
//	act, err := c.Publish(ctx, client.Trigger{Skill: "hello", Data: []byte(`{"name":"Ada"}`)})
//	res, err := c.Follow(ctx, act, nil)
//	fmt.Println(res.Outputs["greeting"])
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Client publishes triggers and follows activations.
type Client struct {
	b            *bus.Bus
	stopAtRepair bool
}

// New returns a client on b.
func New(b *bus.Bus) *Client { return &Client{b: b} }

// StopAtRepair returns a copy of c whose Follow, Run and RunNotify also return when
// the execution is parked on a repair whose patch waits for a person's approval,
// with Result.Repairing set and no outcome: for a front end that tells a person
// the run waits for them (skillbus trigger --wait, the gateway's ?wait). Without
// it, a parked execution is followed on until it really ends — approved and run
// again, or failed — or until ctx does, which is what a caller that needs the
// run's outputs (the skill tool) wants.
func (c *Client) StopAtRepair() *Client {
	cc := *c
	cc.stopAtRepair = true
	return &cc
}

// Trigger is a trigger to publish.
type Trigger struct {
	// Type is the CloudEvent type; default events.TriggerInvoke (io.skillbus.invoke) when Skill is set.
	Type string
	// Skill, when set, invokes that skill explicitly.
	Skill string
	// Source and ID identify the trigger; the same pair is deduplicated. Defaults:
	// "skillbus-client" and a new UUID.
	Source, ID string
	// Data is the event's JSON data (a JSON object becomes the skill's inputs).
	Data []byte
	// Extensions are extra CloudEvent extension attributes (lowercase alphanumeric
	// names).
	Extensions map[string]string
	// Meta carries trace context to continue: a Meta.TraceParent (and TraceState)
	// parents the publish span; without one, the span in ctx does, and without
	// that the publish span starts a trace.
	Meta bus.Meta
}

// Activation identifies what a published trigger set off.
type Activation struct {
	ID      string // the activation id: hash of source and id
	Subject string
	Seq     uint64 // the trigger's sequence in the TRIGGERS stream
	Source  string
	EventID string
	// Duplicate is true when JetStream had a trigger of this source and id
	// already, within its duplicate window (the message id is the activation
	// id): nothing was published, and Seq is the earlier trigger's. Its
	// activation is this one; it does not run again.
	Duplicate bool
}

func (t *Trigger) defaults() {
	if t.Source == "" {
		t.Source = "skillbus-client"
	}
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
}

// Run publishes t and follows its activation to the result, like Publish and then
// Follow, but subscribes to the live progress events first, so that fn sees every
// one of them however fast the skill runs.
func (c *Client) Run(ctx context.Context, t Trigger, fn func(*event.Event)) (Activation, *Result, error) {
	return c.RunNotify(ctx, t, nil, fn)
}

// RunNotify is Run, and calls published (if not nil) with the activation once
// the trigger is published, before its events: a caller can say, say, that it
// was a duplicate (Activation.Duplicate) before the earlier trigger's events
// come.
func (c *Client) RunNotify(ctx context.Context, t Trigger, published func(Activation), fn func(*event.Event)) (Activation, *Result, error) {
	t.defaults()
	// Live progress: fn's events, and the router's announcement of its decision.
	ext := make(map[string]string, len(t.Extensions)+1)
	for k, v := range t.Extensions {
		ext[k] = v
	}
	ext[events.ExtProgress] = events.ProgressLive
	t.Extensions = ext
	live, err := c.subscribeLive(ctx, events.ActivationID(t.Source, t.ID))
	if err != nil {
		return Activation{}, nil, err
	}
	defer func() { _ = live.sub.Unsubscribe() }()
	act, err := c.Publish(ctx, t)
	if err != nil {
		return act, nil, err
	}
	if published != nil {
		published(act)
	}
	res, err := c.follow(ctx, act.ID, fn, live.ch)
	return act, res, err
}

type liveSub struct {
	sub *nats.Subscription
	ch  chan *nats.Msg
}

// subscribeLive subscribes to an activation's live events and waits until the server
// has the subscription.
func (c *Client) subscribeLive(ctx context.Context, activationID string) (*liveSub, error) {
	ch := make(chan *nats.Msg, 1024)
	sub, err := c.b.NC.ChanSubscribe(c.b.Subjects.LiveEvents(activationID), ch)
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", activationID, err)
	}
	if err := c.b.NC.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("follow %s: %w", activationID, err)
	}
	return &liveSub{sub: sub, ch: ch}, nil
}

// Publish publishes t and returns its activation. It records the PRODUCER span of
// the publication, whose context the trigger carries in its traceparent
// extension, so the whole activation joins one trace.
func (c *Client) Publish(ctx context.Context, t Trigger) (act Activation, err error) {
	if t.Type == "" {
		if t.Skill == "" {
			return Activation{}, errors.New("client: a trigger needs a Type or a Skill")
		}
		t.Type = events.TriggerInvoke
	}
	if err := events.CheckType(t.Type); err != nil {
		return Activation{}, fmt.Errorf("client: %w", err)
	}
	if t.Skill != "" {
		if err := events.CheckToken("skill", t.Skill); err != nil {
			return Activation{}, fmt.Errorf("client: %w", err)
		}
	}
	t.defaults()
	e := event.New()
	e.SetID(t.ID)
	e.SetSource(t.Source)
	e.SetType(t.Type)
	e.SetTime(time.Now())
	for k, v := range t.Extensions {
		e.SetExtension(k, v)
	}
	subject := c.b.Subjects.Trigger(t.Type)
	if t.Skill != "" {
		subject = c.b.Subjects.TriggerSkill(t.Skill)
	}
	if t.Meta.TraceParent != "" {
		ctx = telemetry.Extract(ctx, t.Meta.TraceParent, t.Meta.TraceState)
	}
	var attrs []attribute.KeyValue
	if t.Skill != "" {
		attrs = append(attrs, telemetry.AttrSkillName.String(t.Skill))
	}
	ctx, span := telemetry.StartPublish(ctx, telemetry.Message{Destination: subject, ID: t.ID, BodySize: len(t.Data)}, attrs...)
	defer func() { telemetry.End(span, err) }()
	for k, v := range map[string]string{"traceparent": t.Meta.TraceParent, "tracestate": t.Meta.TraceState} {
		if v != "" {
			e.SetExtension(k, v)
		}
	}
	// The publish span's context, which replaces Meta's when tracing is on.
	bustrace.InjectEvent(ctx, &e)
	if err := e.Validate(); err != nil {
		return Activation{}, fmt.Errorf("client: %w", err)
	}
	if len(t.Data) > 0 {
		e.SetDataContentType("application/json")
		e.DataEncoded = t.Data
	}
	// The message id is the activation's: CloudEvents makes an event unique by
	// source and id together, so two sources' id "1" are two triggers.
	actID := events.ActivationID(t.Source, t.ID)
	ack, err := c.b.JS.PublishMsg(ctx, bus.Encode(subject, actID, &e))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return Activation{}, fmt.Errorf("publish %s: no stream takes it (%v); is skillbus running here, with prefix %q?", subject, err, c.b.Subjects.Prefix)
		}
		return Activation{}, fmt.Errorf("publish %s: %w", subject, err)
	}
	return Activation{ID: actID, Subject: subject, Seq: ack.Sequence, Source: t.Source, EventID: t.ID, Duplicate: ack.Duplicate}, nil
}

// Result is how an activation ended.
type Result struct {
	// Completed is true when the last execution completed; Outputs are its outputs.
	Completed   bool
	Outputs     map[string]any
	ExecutionID string // the execution that produced the result
	Skill       string
	// Failed is set when the activation's last skill failed.
	Failed *events.ExecutionFailed
	// Unmatched is set when the router did not route the trigger.
	Unmatched *events.RouteUnmatched
	// Repairing is set, by a client made with StopAtRepair only, when the execution
	// was parked for a repair whose patch waits for a person's approval: the
	// activation goes on once someone approves it (or ends failed when it is
	// rejected or expires), not before. Completed, Failed and Unmatched are unset.
	Repairing *Repairing
}

// Repairing is an execution parked on a repair that waits for approval.
type Repairing struct {
	ExecutionID string
	Skill       string
	RepairID    string
	Fault       events.RepairFault
	Error       string
	// Summary says what the proposed patch changes.
	Summary string
}

// String is the line every view of a parked run shows: "repairing: reference
// fault "titel" in step post, repair 3f2a9c1d0b7e waiting for approval".
func (r *Repairing) String() string {
	return fmt.Sprintf("repairing: %s, repair %s waiting for approval", FaultString(r.Fault), shortID(r.RepairID))
}

// FaultString describes a repairable fault in a few words: `reference fault
// "titel" in step post`.
func FaultString(f events.RepairFault) string {
	s := fmt.Sprintf("%s fault %q", f.Kind, f.Name)
	if f.Step != "" {
		s += " in step " + f.Step
	}
	return s
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Err returns nil for a completed activation, else an error saying why it did not
// complete.
func (r *Result) Err() error {
	switch {
	case r.Completed:
		return nil
	case r.Unmatched != nil:
		return fmt.Errorf("not routed (%s): %s", r.Unmatched.Code, r.Unmatched.Reason)
	case r.Failed != nil:
		return fmt.Errorf("%s failed (%s): %s", r.Failed.Skill, r.Failed.Class, r.Failed.Error)
	case r.Repairing != nil:
		return fmt.Errorf("%s: %s", r.Repairing.Skill, r.Repairing)
	}
	return errors.New("no result")
}

// Follow reads the activation's events in order — the routing decision, then each
// execution's progress, following fallbacks and repairs — calling fn (if not nil)
// with each, and returns when the activation ends or ctx does, or, for a client
// made with StopAtRepair, when its execution is parked on a repair that waits for
// approval (Result.Repairing): when the repair's events, read to their end, have
// a proposal and no decision, and the execution's, read to their end, no outcome
// (an outcome or a decision read later wins). Persisted events published before
// Follow was called are read too; live progress events (see events.Level) only from
// when it subscribes, which Run does before publishing.
func (c *Client) Follow(ctx context.Context, activationID string, fn func(*event.Event)) (*Result, error) {
	live, err := c.subscribeLive(ctx, activationID)
	if err != nil {
		return nil, err
	}
	defer func() { _ = live.sub.Unsubscribe() }()
	return c.follow(ctx, activationID, fn, live.ch)
}

func (c *Client) follow(ctx context.Context, activationID string, fn func(*event.Event), live <-chan *nats.Msg) (*Result, error) {
	// Each message comes with the id whose events its consumer reads.
	type idMsg struct {
		m  jetstream.Msg
		id string
	}
	msgs := make(chan idMsg, 256)
	done := make(chan struct{})
	defer close(done)
	var cons, repairCons jetstream.ConsumeContext
	consume := func(id string) (jetstream.ConsumeContext, error) {
		oc, err := c.b.JS.OrderedConsumer(ctx, c.b.StreamEvents(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{c.b.Subjects.Events(id)},
			DeliverPolicy:  jetstream.DeliverAllPolicy,
			// The server keeps a consumer while a pull of it waits, as one always
			// does while this follows; one whose follower vanished without deleting
			// it goes after this.
			InactiveThreshold: releaseTimeout,
		})
		if err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, fmt.Errorf("no %s stream: is skillbus running against this NATS server?", c.b.StreamEvents())
			}
			return nil, fmt.Errorf("follow %s: %w", id, err)
		}
		cc, err := oc.Consume(func(m jetstream.Msg) {
			select {
			case msgs <- idMsg{m, id}:
			case <-done:
			}
		})
		if err != nil {
			return nil, err
		}
		return released{ConsumeContext: cc, c: c, oc: oc}, nil
	}
	// followed is the id whose events cons reads: the activation's, then its
	// execution's.
	var followed string
	watch := func(id string) (err error) {
		if cons != nil {
			cons.Stop()
		}
		followed = id
		cons, err = consume(id)
		return err
	}
	// A parked execution's repair has events of its own (proposed, failed, ...),
	// followed beside the execution's, which go on when the repair releases it.
	var parked *events.RepairRequested
	// proposal is the parked repair's proposal waiting for approval, as far as its
	// events read so far say. It is reported (with StopAtRepair) only once both
	// the repair's and the execution's consumers have caught up with their
	// subjects' ends without a decision or an outcome: their histories are read
	// from the start, side by side, so a proposal read first may have been
	// decided long ago, or the run may have ended since.
	var proposal *Repairing
	// pending is how many messages each consumer (by id) had still to deliver
	// after its last one.
	pending := map[string]uint64{}
	caughtUp := func(id string) bool {
		n, ok := pending[id]
		return ok && n == 0
	}
	// stopped is the result of a run parked on the proposal, once the repair's
	// and the execution's histories are read to their ends: an outcome already
	// in the execution's, or a decision in the repair's, comes before the end.
	stopped := func() *Result {
		if proposal == nil || !caughtUp(proposal.RepairID) || !caughtUp(followed) {
			return nil
		}
		return &Result{ExecutionID: proposal.ExecutionID, Skill: proposal.Skill, Repairing: proposal}
	}
	watchRepair := func(d *events.RepairRequested) (err error) {
		if parked != nil && parked.RepairID == d.RepairID {
			return nil
		}
		parked, proposal = d, nil
		if repairCons != nil {
			repairCons.Stop()
		}
		repairCons, err = consume(d.RepairID)
		return err
	}
	defer func() {
		for _, cc := range []jetstream.ConsumeContext{cons, repairCons} {
			if cc != nil {
				cc.Stop()
			}
		}
	}()
	decided := false
	// Progress that the fleet's events level does not persist arrives on live, to
	// fn only: it never decides the result.
	if err := watch(activationID); err != nil {
		return nil, err
	}
	// The routing decision travels in the jobs of the plan (an event of its own only
	// at the full events level). The router announces a decision on the live
	// subjects once its jobs are stored when the trigger asked for live progress (Run
	// does); the subscription to them is older than this look-up, so such a decision
	// made after it is announced to us. For a trigger that did not ask, the look-up
	// is repeated every DecisionPoll until the decision is there.
	next := c.decisionMsg(ctx, activationID)
	poll := time.NewTicker(DecisionPoll)
	defer poll.Stop()
	onLive := func(lm *nats.Msg) {
		if strings.HasSuffix(lm.Subject, "."+events.Kind(events.TypeRouteDecided)) {
			if !decided && next == nil {
				next = c.decisionMsg(ctx, activationID)
			}
			return
		}
		if fn != nil {
			if e, err := bus.Decode(lm); err == nil {
				fn(e)
			}
		}
	}
	for {
		var nm *nats.Msg
		if next != nil && !decided {
			nm, next = next, nil
		} else {
			next = nil
			select {
			case im := <-msgs:
				m := im.m
				if md, err := m.Metadata(); err == nil {
					pending[im.id] = md.NumPending
				}
				if m.Headers().Get(jetstream.ScheduleHeader) != "" {
					// A scheduled message waiting for its time (a confirmation's timeout)
					// is not an event yet; it becomes one if it fires.
					if r := stopped(); r != nil {
						return r, nil
					}
					continue
				}
				nm = &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
				// Live progress that arrived before this event goes first: select picks
				// at random among ready channels, and an outcome ends the follow.
				for drained := false; !drained; {
					select {
					case lm := <-live:
						onLive(lm)
					default:
						drained = true
					}
				}
			case lm := <-live:
				onLive(lm)
				continue
			case <-poll.C:
				if !decided {
					next = c.decisionMsg(ctx, activationID)
				}
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("no result for activation %s yet: %w", activationID, ctx.Err())
			}
		}
		e, err := bus.Decode(nm)
		if err != nil {
			continue
		}
		if fn != nil {
			fn(e)
		}
		switch e.Type() {
		case events.TypeRouteUnmatched:
			var d events.RouteUnmatched
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			return &Result{Unmatched: &d}, nil
		case events.TypeRouteDecided:
			var d events.RouteDecided
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			decided = true
			if err := watch(d.Plan.Primary.ExecutionID); err != nil {
				return nil, err
			}
		case events.TypeExecutionFallback:
			var d events.ExecutionFallback
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			if err := watch(d.NextExecutionID); err != nil {
				return nil, err
			}
			// The failed execution's repair, if any, is no longer the run's.
			parked, proposal = nil, nil
		case events.TypeExecutionCompleted:
			var d events.ExecutionCompleted
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			return &Result{Completed: true, Outputs: d.Outputs, ExecutionID: d.ExecutionID, Skill: d.Skill}, nil
		case events.TypeExecutionFailed:
			var d events.ExecutionFailed
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			return &Result{Failed: &d, ExecutionID: d.ExecutionID, Skill: d.Skill}, nil
		case events.TypeRepairRequested:
			var d events.RepairRequested
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			if err := watchRepair(&d); err != nil {
				return nil, err
			}
		case events.TypeRepairProposed:
			var d events.RepairProposed
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			if c.stopAtRepair && parked != nil && d.RepairID == parked.RepairID && !d.Auto {
				proposal = &Repairing{
					ExecutionID: parked.ExecutionID, Skill: parked.Skill, RepairID: d.RepairID,
					Fault: parked.Fault, Error: parked.Error, Summary: d.Summary,
				}
			}
		case events.TypeRepairSucceeded, events.TypeRepairFailed:
			// Decided: the parked execution goes on, or fails, on its own subject.
			var d events.RepairProgress
			if err := json.Unmarshal(e.Data(), &d); err != nil {
				return nil, err
			}
			if proposal != nil && d.RepairID == proposal.RepairID {
				proposal = nil
			}
		}
		if r := stopped(); r != nil {
			return r, nil
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
		_ = r.c.b.JS.DeleteConsumer(ctx, r.c.b.StreamEvents(), info.Name)
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
