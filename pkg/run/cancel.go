package run

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
)

// Cancel is a request to cancel an execution, kept in KV runs under
// events.RunCancelKey until the bucket expires it. Workers watch these records
// and also read an execution's when they claim it, so a cancel holds across the
// fleet and across restarts; the execution's outcome, execution.cancelled, is
// written by the worker that ends it.
type Cancel struct {
	ExecutionID string    `json:"execution_id"`
	By          string    `json:"by"`
	Reason      string    `json:"reason,omitempty"`
	At          time.Time `json:"at"`
}

// Error is the text of the cancellation, as run records and logs show it.
func (c *Cancel) Error() string { return CancelText(c.By, c.Reason) }

// CancelText says who cancelled and why: "cancelled by ada: wrong input".
func CancelText(by, reason string) string {
	s := "cancelled by " + by
	if reason != "" {
		s += ": " + reason
	}
	return s
}

// LoadCancel returns an execution's cancel request, or nil.
func LoadCancel(ctx context.Context, kv jetstream.KeyValue, executionID string) (*Cancel, error) {
	e, err := kv.Get(ctx, events.RunCancelKey(executionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Cancel
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// SkillCancel is a runs cancel --skill as routers read it, kept in KV runs under
// events.SkillCancelledKey: the skill's runs not yet started then, but pending
// as a debounced burst or a batch of triggers stored up to Seq in the TRIGGERS
// stream, are cancelled when they come due. A later cancel replaces it.
type SkillCancel struct {
	Skill string `json:"skill"`
	Seq   uint64 `json:"seq"`
	// Stream is when the TRIGGERS stream Seq counts in was created: one made
	// again later counts from 1, and the cancel is not for its triggers.
	Stream time.Time `json:"stream"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Hold says a skill is paused: workers hold its new runs (see Held) until it is
// resumed. It is kept in KV runs under events.SkillHoldKey.
type Hold struct {
	Skill  string    `json:"skill"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Held is a job that a worker set aside because its skill is paused, or because
// every slot of its concurrency limit is taken, kept whole in KV runs under
// events.RunHeldKey so that resuming the skill, or a slot that frees, publishes it
// again.
type Held struct {
	ExecutionID string            `json:"execution_id"`
	Skill       string            `json:"skill"`
	Subject     string            `json:"subject"`        // where the job was published
	Job         json.RawMessage   `json:"job"`            // the events.Job data
	Meta        map[string]string `json:"meta,omitempty"` // extension attributes of the job event
	At          time.Time         `json:"at"`
	// Gate is the concurrency gate the job waits for a slot of
	// (events.ConcGate), Limit how many slots it has; "" for a paused skill's job.
	Gate  string `json:"gate,omitempty"`
	Limit int    `json:"limit,omitempty"`
	// Until is the start time a throttled job waits for (a scheduled
	// io.skillbus.throttle.due releases it then); zero for the others.
	Until time.Time `json:"until,omitzero"`
}
