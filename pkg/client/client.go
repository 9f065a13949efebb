// Package client publishes triggers to skillbus and follows them to their result. It
// is what `skillbus trigger --wait` and the skill tool use, and what a Go program
// sending events to skillbus would use (see the package's examples for a whole
// program):
//
//	nc, err := bus.Connect("nats://127.0.0.1:4222", "my-app")
//	b, err := bus.New(nc, bus.Config{})
//	c := client.New(b)
//	act, res, err := c.Run(ctx, client.Trigger{Skill: "hello", Data: []byte(`{"name":"Ada"}`)}, nil)
//	fmt.Println(act.ID, res.Outputs["greeting"], res.Err())
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// Client publishes triggers and follows activations.
type Client struct {
	b             *bus.Bus
	stopAtRepair  bool
	maxEventBytes int
	log           *slog.Logger
}

// New returns a client on b. It refuses triggers heavier than
// bus.DefaultMaxEventBytes (see WithMaxEventBytes) and logs to slog.Default().
func New(b *bus.Bus) *Client {
	return &Client{b: b, maxEventBytes: bus.DefaultMaxEventBytes, log: slog.Default()}
}

// WithMaxEventBytes returns a copy of c that refuses, with ErrTooLarge, a trigger
// heavier than n bytes, headers and data, as a router weighs it (bus.EventSize):
// give it the routers' --max-event-bytes. n must be positive.
func (c *Client) WithMaxEventBytes(n int) *Client {
	cc := *c
	cc.maxEventBytes = n
	return &cc
}

// WithLog returns a copy of c that logs to log: a trigger sent again because
// JetStream could not take it (see Send).
func (c *Client) WithLog(log *slog.Logger) *Client {
	cc := *c
	cc.log = log
	return &cc
}

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
	// Time is the event's time; default the time it is published.
	Time time.Time
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
	sub, err := c.b.Subscribe(ctx, c.b.Subjects.LiveEvents(activationID), ch)
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", activationID, err)
	}
	return &liveSub{sub: sub, ch: ch}, nil
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
	// Cancelled is set when someone cancelled the execution (skillbus runs cancel).
	Cancelled *events.ExecutionCancelled
	// Unmatched is set when the router did not route the trigger.
	Unmatched *events.RouteUnmatched
	// Repairing is set, by a client made with StopAtRepair only, when the execution
	// was parked for a repair whose patch waits for a person's approval: the
	// activation goes on once someone approves it (or ends failed when it is
	// rejected or expires), not before. Completed, Failed and Unmatched are unset.
	Repairing *Repairing
}

// Deferred reports whether the trigger was taken into a debounced run or a batch,
// which runs later as its own activation (with a burst's last data, or a batch's
// events): Unmatched says so, with code debounced or batched, and its reason. No
// skill refused it.
func (r *Result) Deferred() bool {
	return r.Unmatched != nil && events.Deferred(r.Unmatched.Code)
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
	case r.Deferred():
		return fmt.Errorf("%s: %s; it runs later as its own activation", r.Unmatched.Code, r.Unmatched.Reason)
	case r.Unmatched != nil:
		return fmt.Errorf("not routed (%s): %s", r.Unmatched.Code, r.Unmatched.Reason)
	case r.Failed != nil:
		return fmt.Errorf("%s failed (%s): %s", r.Failed.Skill, r.Failed.Class, r.Failed.Error)
	case r.Cancelled != nil:
		return fmt.Errorf("%s %s", r.Cancelled.Skill, run.CancelText(r.Cancelled.By, r.Cancelled.Reason))
	case r.Repairing != nil:
		return fmt.Errorf("%s: %s", r.Repairing.Skill, r.Repairing)
	}
	return errors.New("no result")
}
