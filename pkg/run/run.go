// Package run reads and writes the records of executions.
//
// An execution's outcome is its outcome event in the EVENTS stream —
// execution.completed, execution.failed or execution.fallback — published once, under
// the message id "<executionid>.outcome" that the three share, so JetStream keeps the
// first and drops any later one as a duplicate. Outcome events are kept as long as
// EVENTS keeps events (7 days by default). KV bucket "runs" holds what is not an
// event: the claim of an execution taken over after a redelivery (see package
// worker) and the paused record of an execution waiting for a person's confirmation.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Record statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusFallback  = "fallback"
	StatusCancelled = "cancelled"
)

// Record is an execution's outcome, as read back from its outcome event.
type Record struct {
	ExecutionID  string         `json:"execution_id"`
	ActivationID string         `json:"activation_id"`
	Skill        string         `json:"skill"`
	Version      string         `json:"version,omitempty"`
	Status       string         `json:"status"`
	Outputs      map[string]any `json:"outputs,omitempty"`
	StepID       string         `json:"step_id,omitempty"`
	Class        string         `json:"class,omitempty"`
	Error        string         `json:"error,omitempty"`
	Next         string         `json:"next,omitempty"`   // fallback: the execution id of the next skill
	Denied       bool           `json:"denied,omitempty"` // a human denied the skill: no fallback, no dead letter
	Attempt      uint64         `json:"attempt"`
	Worker       string         `json:"worker,omitempty"`
	DurationMS   float64        `json:"duration_ms"`
	FinishedAt   time.Time      `json:"finished_at"`
	// Log is the execution log of the delivery that finished (workflow.Log as JSON).
	Log json.RawMessage `json:"log,omitempty"`
}

// OutcomeID is the message id every outcome event of an execution is published
// under, so that only the first is kept.
func OutcomeID(executionID string) string { return executionID + ".outcome" }

// Subjects is how Load finds an execution's events: events.Subjects implements it.
type Subjects interface {
	Event(id, typ string) string
}

// outcomeTypes are the outcome events, most frequent first: Load looks for each
// in turn.
var outcomeTypes = []string{events.TypeExecutionCompleted, events.TypeExecutionFailed, events.TypeExecutionFallback, events.TypeExecutionCancelled}

// OutcomeTypes returns the types of the outcome events (see events.Outcome).
func OutcomeTypes() []string { return append([]string(nil), outcomeTypes...) }

// Load returns the outcome of an execution from the events stream, or nil if it has
// none (yet, or any more).
func Load(ctx context.Context, stream jetstream.Stream, subj Subjects, executionID string) (*Record, error) {
	for _, typ := range outcomeTypes {
		m, err := stream.GetLastMsgForSubject(ctx, subj.Event(executionID, typ))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return FromMsg(m.Header, m.Data, m.Time)
	}
	return nil, nil
}

// FromMsg reads an outcome event as it is stored (in either CloudEvents mode) as a
// Record.
func FromMsg(h nats.Header, data []byte, at time.Time) (*Record, error) {
	e, err := bus.DecodeFast(bus.MsgOf("", h, data))
	if err != nil {
		return nil, err
	}
	return FromEvent(e.Type, e.Data, at)
}

// FromEvent reads an outcome event's data as a Record.
func FromEvent(typ string, data []byte, at time.Time) (*Record, error) {
	r := &Record{FinishedAt: at}
	switch typ {
	case events.TypeExecutionCompleted:
		var d events.ExecutionCompleted
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, err
		}
		r.ExecutionID, r.ActivationID, r.Skill, r.Version = d.ExecutionID, d.ActivationID, d.Skill, d.Version
		r.Status, r.Outputs, r.Attempt, r.Worker, r.DurationMS, r.Log = StatusCompleted, d.Outputs, d.Attempt, d.Worker, d.DurationMS, d.Log
	case events.TypeExecutionFailed:
		var d events.ExecutionFailed
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, err
		}
		r.ExecutionID, r.ActivationID, r.Skill, r.Version = d.ExecutionID, d.ActivationID, d.Skill, d.Version
		r.Status, r.StepID, r.Class, r.Error, r.Denied = StatusFailed, d.StepID, d.Class, d.Error, d.Denied
		r.Attempt, r.Worker, r.DurationMS, r.Log = d.Attempt, d.Worker, d.DurationMS, d.Log
	case events.TypeExecutionFallback:
		var d events.ExecutionFallback
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, err
		}
		r.ExecutionID, r.ActivationID, r.Skill, r.Version = d.ExecutionID, d.ActivationID, d.Skill, d.Version
		r.Status, r.StepID, r.Class, r.Error, r.Next = StatusFallback, d.StepID, d.Class, d.Error, d.NextExecutionID
		r.Attempt, r.Worker, r.DurationMS, r.Log = d.Attempt, d.Worker, d.DurationMS, d.Log
	case events.TypeExecutionCancelled:
		var d events.ExecutionCancelled
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, err
		}
		r.ExecutionID, r.ActivationID, r.Skill, r.Version = d.ExecutionID, d.ActivationID, d.Skill, d.Version
		r.Status, r.StepID, r.Error = StatusCancelled, d.StepID, CancelText(d.By, d.Reason)
		r.Attempt, r.Worker, r.DurationMS, r.Log = d.Attempt, d.Worker, d.DurationMS, d.Log
	default:
		return nil, errors.New("run: " + typ + " is not an outcome event")
	}
	return r, nil
}

// Paused is an execution waiting for a confirmation. The job is kept whole, so the
// router can publish it again with the answer; no worker holds it meanwhile.
type Paused struct {
	ExecutionID string `json:"execution_id"`
	Step        string `json:"step"`
	// Kind is what the execution waits for: "" a confirmation, PausedSleep the
	// end of a sleep step (TimeoutAt is when it wakes), PausedWait an event
	// (TimeoutAt is when the wait times out; see Wait).
	Kind      string            `json:"kind,omitempty"`
	Subject   string            `json:"subject"`        // where the job goes when answered
	Job       json.RawMessage   `json:"job"`            // the events.Job data
	Meta      map[string]string `json:"meta,omitempty"` // extension attributes of the job event
	TimeoutAt time.Time         `json:"timeout_at"`
	Message   string            `json:"message,omitempty"`
	// Log is the execution log up to the pause (workflow.Log as JSON).
	Log json.RawMessage `json:"log,omitempty"`
}

// Kinds of a Paused record besides a confirmation's.
const (
	// PausedSleep is the Kind of a Paused record of a sleeping execution.
	PausedSleep = "sleep"
	// PausedWait is the Kind of a Paused record of an execution waiting for an
	// event at a wait_for_event step.
	PausedWait = "wait"
)

// Waiting says what a paused execution waits for, for people: "sleeping until T"
// or "waiting for a confirmation until T".
func (p *Paused) Waiting() string {
	until := p.TimeoutAt.UTC().Format(time.RFC3339)
	if p.Kind == PausedSleep {
		return "sleeping until " + until
	}
	if p.Kind == PausedWait {
		return p.Message + " until " + until
	}
	return "waiting for a confirmation until " + until
}

// LoadPaused returns the paused record of an execution and its revision, or nil.
func LoadPaused(ctx context.Context, kv jetstream.KeyValue, executionID string) (*Paused, uint64, error) {
	e, err := kv.Get(ctx, events.RunPausedKey(executionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var p Paused
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, err
	}
	return &p, e.Revision(), nil
}
