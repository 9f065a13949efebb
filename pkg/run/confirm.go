package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// ErrNotPaused means the execution is not waiting for a confirmation.
var ErrNotPaused = errors.New("not waiting for a confirmation")

// Confirmation is a person's answer to a step an execution is paused at.
type Confirmation struct {
	ExecutionID string
	// Step is the step answered; empty means the step the execution is paused at.
	Step     string
	Approved bool
	// By names who answers; it is recorded with the answer and must not be empty.
	By     string
	Reason string
	// Source is the CloudEvent source of the answer; default "skillbus".
	Source string
}

// Confirm publishes the answer as io.skillbus.confirmation.recorded on the
// execution's events subject; a router resumes the paused job with it. It returns
// the step answered. The CLI (`skillbus runs confirm`) and the console both answer
// through it, so an answer is recorded the same way whoever gives it.
func Confirm(ctx context.Context, b *bus.Bus, runs jetstream.KeyValue, c Confirmation) (string, error) {
	if err := events.CheckToken("execution id", c.ExecutionID); err != nil {
		return "", err
	}
	if c.By == "" {
		return "", errors.New("confirm: who answers (By) is empty")
	}
	if c.Step == "" {
		p, _, err := LoadPaused(ctx, runs, c.ExecutionID)
		if err != nil {
			return "", fmt.Errorf("confirm %s: %w", c.ExecutionID, err)
		}
		if p == nil {
			return "", fmt.Errorf("execution %s is %w", c.ExecutionID, ErrNotPaused)
		}
		if p.Kind != "" {
			return "", fmt.Errorf("execution %s is %s, not %w", c.ExecutionID, p.Waiting(), ErrNotPaused)
		}
		c.Step = p.Step
	}
	if c.Source == "" {
		c.Source = "skillbus"
	}
	ans := events.ConfirmationRecorded{ExecutionID: c.ExecutionID, StepID: c.Step, Answer: events.Answer{Approved: c.Approved, By: c.By, Reason: c.Reason}}
	m, err := bus.Event{ID: c.ExecutionID + ".answer." + uuid.NewString(), Source: c.Source, Type: events.TypeConfirmationRecorded,
		Meta: bus.Meta{ExecutionID: c.ExecutionID}, Data: ans}.Msg(b.Subjects.Event(c.ExecutionID, events.TypeConfirmationRecorded))
	if err != nil {
		return "", err
	}
	if _, err := b.Publish(ctx, m); err != nil {
		return "", fmt.Errorf("publish the answer: %w", err)
	}
	return c.Step, nil
}
