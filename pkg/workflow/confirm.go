package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SkillApproval is the step id under which a skill with execution.approval: ask is
// confirmed as a whole, before any step runs: the PausedError's Step and the key of
// its answer in Run.Confirmations. It cannot be a step id.
const SkillApproval = "*"

// Answer is a human's (or a timeout's) answer to a confirmation. It has the fields of
// events.Answer, so one converts to the other: workflow.Answer(a).
type Answer struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"` // who answered; "timeout" when nobody did
	Reason   string `json:"reason,omitempty"`
	// Data is what ended a wait_for_event: the matched event's data (JSON).
	Data json.RawMessage `json:"data,omitempty"`
}

func (a Answer) denial() string {
	s := "denied"
	if a.By != "" {
		s += " by " + a.By
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// PausedError is returned by Execute when the run reached a step that needs a human's
// confirmation and Run.Confirmations has no answer for it. It is not a failure: every
// step that could run has run and been checkpointed; the worker asks the question
// (confirmation.requested), acks the job, and runs it again with the answer, when the
// run resumes from its checkpoints. If several steps are waiting, the error names the
// first in list order; the others are asked on later runs, one at a time.
type PausedError struct {
	// Step is the id of the waiting step, or SkillApproval for the whole skill.
	Step string
	// Message is the confirmation's message, rendered with what the step sees.
	Message string
	// Default is the confirmation's default: the answer its author suggests, for
	// example on timeout.
	Default bool
	// Timeout is how long to wait for an answer; 0 if the skill does not say (the
	// worker's default applies). Unanswered past it is a denial.
	Timeout time.Duration
	// Until, when set, makes this a sleep rather than a confirmation: the run is
	// resumed at Until with an answer for Step (any answer), and nobody is asked.
	Until time.Time
	// Wait, when set, makes this a wait_for_event: the run is resumed with an
	// answer for Step when an event matches (approved, with its data) or at the
	// timeout (denied).
	Wait *EventWait
}

func (e *PausedError) Error() string {
	if e.Wait != nil {
		return fmt.Sprintf("step %s waits for a %s event", e.Step, e.Wait.Type)
	}
	if !e.Until.IsZero() {
		return fmt.Sprintf("step %s sleeps until %s", e.Step, e.Until.UTC().Format(time.RFC3339))
	}
	if e.Step == SkillApproval {
		return "waiting for approval of the skill: " + e.Message
	}
	return fmt.Sprintf("waiting for confirmation of step %s: %s", e.Step, e.Message)
}

// ErrDenied is wrapped by the error of a run whose skill (execution.approval: ask)
// was denied as a whole. The error is failure.Fatal; a worker may prefer to end the
// execution without falling back, since a human said no.
var ErrDenied = errors.New("denied")

// deniedError is the error of a skill denied as a whole; it is ErrDenied.
type deniedError struct{ msg string }

func (e *deniedError) Error() string        { return e.msg }
func (e *deniedError) Is(target error) bool { return target == ErrDenied }
