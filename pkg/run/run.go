// Package run holds the records of executions in KV bucket "runs": the terminal
// record that makes each execution's result unique, and the paused record of an
// execution waiting for a human's confirmation. Workers write them; routers and the
// CLI read them.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Record statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusFallback  = "fallback"
)

// Record is the terminal record of an execution in KV runs under "<executionid>.result".
// It is created once (compare-and-set): whoever creates it owns the execution's
// outcome, so each execution has exactly one terminal result however many times its job
// is delivered.
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

// ResultKey is the runs key of an execution's terminal record.
func ResultKey(executionID string) string { return executionID + ".result" }

// Claim creates rec; if a record exists already it returns that one and false.
func Claim(ctx context.Context, kv jetstream.KeyValue, rec *Record) (*Record, bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, false, err
	}
	_, err = kv.Create(ctx, ResultKey(rec.ExecutionID), b)
	if err == nil {
		return rec, true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, false, err
	}
	prev, err := Load(ctx, kv, rec.ExecutionID)
	if err != nil {
		return nil, false, err
	}
	return prev, false, nil
}

// Load returns the terminal record of an execution, or nil if there is none.
func Load(ctx context.Context, kv jetstream.KeyValue, executionID string) (*Record, error) {
	e, err := kv.Get(ctx, ResultKey(executionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// PausedKey is the runs key of an execution paused for a confirmation.
func PausedKey(executionID string) string { return executionID + ".paused" }

// Paused is an execution waiting for a confirmation. The job is kept whole, so the
// router can publish it again with the answer; no worker holds it meanwhile.
type Paused struct {
	ExecutionID string            `json:"execution_id"`
	Step        string            `json:"step"`
	Subject     string            `json:"subject"`        // where the job goes when answered
	Job         json.RawMessage   `json:"job"`            // the events.Job data
	Meta        map[string]string `json:"meta,omitempty"` // extension attributes of the job event
	TimeoutAt   time.Time         `json:"timeout_at"`
	Message     string            `json:"message,omitempty"`
	// Log is the execution log up to the pause (workflow.Log as JSON).
	Log json.RawMessage `json:"log,omitempty"`
}

// LoadPaused returns the paused record of an execution and its revision, or nil.
func LoadPaused(ctx context.Context, kv jetstream.KeyValue, executionID string) (*Paused, uint64, error) {
	e, err := kv.Get(ctx, PausedKey(executionID))
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
