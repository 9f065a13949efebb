package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

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
