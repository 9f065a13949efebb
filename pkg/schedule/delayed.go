package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// Delayed is a trigger to publish at a later time: the value of at.<activation id>.
type Delayed struct {
	At          time.Time         `json:"at"`
	Type        string            `json:"type,omitempty"`
	Skill       string            `json:"skill,omitempty"`
	Source      string            `json:"source"`
	ID          string            `json:"id"`
	Data        json.RawMessage   `json:"data,omitempty"`
	Extensions  map[string]string `json:"extensions,omitempty"`
	TraceParent string            `json:"traceparent,omitempty"`
	TraceState  string            `json:"tracestate,omitempty"`
}

func (d Delayed) trigger() client.Trigger {
	return client.Trigger{Type: d.Type, Skill: d.Skill, Source: d.Source, ID: d.ID, Data: d.Data, Extensions: d.Extensions,
		Meta: bus.Meta{TraceParent: d.TraceParent, TraceState: d.TraceState}}
}

// ErrNotFuture is returned by At for a time that is not in the future.
var ErrNotFuture = errors.New("the time is not in the future")

// At stores t to be published at the given time by the leading scheduler (in a
// router): durably, so it survives the caller exiting and the routers
// restarting. The activation it returns is the one the trigger will set off;
// Duplicate says the same source and id were already waiting, and nothing was
// stored. A trigger due while no router runs is published when one starts.
func At(ctx context.Context, b *bus.Bus, t client.Trigger, at time.Time) (client.Activation, error) {
	if !at.After(time.Now()) {
		return client.Activation{}, fmt.Errorf("schedule: %s: %w", at.Format(time.RFC3339), ErrNotFuture)
	}
	// Checked as it will be published, so that it is refused now, not when due.
	if err := checkSender(t); err != nil {
		return client.Activation{}, fmt.Errorf("schedule: %w", err)
	}
	if err := client.New(b).Check(t); err != nil {
		return client.Activation{}, fmt.Errorf("schedule: %w", err)
	}
	subject := b.Subjects.Trigger(cmp.Or(t.Type, events.TriggerInvoke))
	if t.Skill != "" {
		subject = b.Subjects.TriggerSkill(t.Skill)
	}
	if t.Source == "" {
		t.Source = "skillbus-client"
	}
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	d := Delayed{At: at.UTC(), Type: t.Type, Skill: t.Skill, Source: t.Source, ID: t.ID, Data: t.Data, Extensions: t.Extensions,
		TraceParent: t.Meta.TraceParent, TraceState: t.Meta.TraceState}
	v, err := json.Marshal(d)
	if err != nil {
		return client.Activation{}, fmt.Errorf("schedule: %w", err)
	}
	if len(v) > bus.DelayedMaxValueBytes-1<<10 { // room for the create's headers
		return client.Activation{}, fmt.Errorf("schedule: %w: the delayed trigger is %d bytes as stored; at most %d", client.ErrTooLarge, len(v), bus.DelayedMaxValueBytes-1<<10)
	}
	act := client.Activation{ID: events.ActivationID(t.Source, t.ID), Subject: subject, Source: t.Source, EventID: t.ID}
	if _, err := b.KV(ctx, b.BucketDelayed()); err != nil {
		return client.Activation{}, fmt.Errorf("schedule: %w", err)
	}
	if err := b.CreateDelayed(ctx, atPfx+act.ID, v); err != nil {
		if errors.Is(err, bus.ErrDelayedExists) {
			act.Duplicate = true
			return act, nil
		}
		return client.Activation{}, fmt.Errorf("schedule: storing the delayed trigger: %w", err)
	}
	return act, nil
}

// checkSender refuses what only skillbus itself may publish (client.CheckOutside):
// a source beginning client.ReservedSource, a type beginning "skill.". A delayed
// trigger is a sender's, whoever stored it.
func checkSender(t client.Trigger) error {
	if err := client.CheckOutsideSource(t.Source); err != nil {
		return err
	}
	if strings.HasPrefix(t.Type, "skill.") {
		return fmt.Errorf("%w: type %q: types beginning skill. are reserved", client.ErrInvalidEvent, t.Type)
	}
	return nil
}

// Pending is a delayed trigger waiting to be published, as List and Cancel
// return it.
type Pending struct {
	Delayed
	// ActivationID is the activation the trigger will set off, the name of its
	// key (at.<activation id>).
	ActivationID string `json:"activation_id"`
	rev          uint64
}

// List returns the delayed triggers waiting to be published, soonest first.
// One stored by an earlier version in KV schedules is not listed (the routers
// still publish it).
func List(ctx context.Context, b *bus.Bus) ([]Pending, error) {
	kv, err := b.KV(ctx, b.BucketDelayed())
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	w, err := kv.Watch(ctx, atPfx+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("schedule: listing delayed triggers: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Pending
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("schedule: listing delayed triggers: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("schedule: listing delayed triggers: the watch ended")
			}
			if e == nil { // every key read
				slices.SortFunc(out, func(a, b Pending) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ActivationID, b.ActivationID)) })
				return out, nil
			}
			p := Pending{ActivationID: strings.TrimPrefix(e.Key(), atPfx), rev: e.Revision()}
			if err := json.Unmarshal(e.Value(), &p.Delayed); err != nil {
				// Listed all the same, so that it can be seen and cancelled.
				p.Delayed = Delayed{}
			}
			out = append(out, p)
		}
	}
}

// Waiting returns the delayed trigger that will set off activation actID, or
// nil if none waits for it.
func Waiting(ctx context.Context, b *bus.Bus, actID string) (*Pending, error) {
	kv, err := b.KV(ctx, b.BucketDelayed())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	e, err := kv.Get(ctx, atPfx+actID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schedule: reading delayed trigger %s: %w", actID, err)
	}
	p := &Pending{ActivationID: actID, rev: e.Revision()}
	_ = json.Unmarshal(e.Value(), &p.Delayed)
	return p, nil
}

// ErrNoDelayed is returned by Cancel for an activation no delayed trigger waits
// for: mistyped, never delayed, or published already.
var ErrNoDelayed = errors.New("no delayed trigger waits for that activation")

// Cancel deletes the delayed trigger that would set off activation actID, so no
// router publishes it, and returns it. One a router is publishing at that moment
// (it is due) may still be published: Cancel then fails with ErrNoDelayed if the
// router deleted it first.
func Cancel(ctx context.Context, b *bus.Bus, actID string) (Pending, error) {
	kv, err := b.KV(ctx, b.BucketDelayed())
	if err != nil {
		return Pending{}, fmt.Errorf("schedule: %w", err)
	}
	e, err := kv.Get(ctx, atPfx+actID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Pending{}, fmt.Errorf("schedule: %s: %w", actID, ErrNoDelayed)
	}
	if err != nil {
		return Pending{}, fmt.Errorf("schedule: reading delayed trigger %s: %w", actID, err)
	}
	p := Pending{ActivationID: actID, rev: e.Revision()}
	_ = json.Unmarshal(e.Value(), &p.Delayed) // cancelled whether it decodes or not
	if err := b.DeleteDelayed(ctx, atPfx+actID, p.rev); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			// Deleted since it was read: by a router that published it.
			return Pending{}, fmt.Errorf("schedule: %s: %w", actID, ErrNoDelayed)
		}
		return Pending{}, fmt.Errorf("schedule: cancelling delayed trigger %s: %w", actID, err)
	}
	return p, nil
}
