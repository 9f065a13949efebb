package run

import (
	"encoding/json"
	"time"
)

// Wait is what an execution parked at a wait_for_event step waits for, kept in
// KV runs (events.RunWaitKey) beside its Paused record while it waits. Routers
// watch these records to match the triggers they route, so a router needs nothing
// of the run but this; the router that resumes the run removes it.
type Wait struct {
	ExecutionID string `json:"execution_id"`
	Step        string `json:"step"`
	// Type is the CloudEvent type of the events that may end the wait.
	Type string `json:"type"`
	// Match is the step's CEL match over event, inputs and steps; "" takes the
	// first event of Type.
	Match string `json:"match,omitempty"`
	// Inputs and Steps are what Match reads as inputs and steps: the fields it
	// reads of the run's inputs and of the results of the earlier steps it
	// names (flow.WaitMatch.Keep), at most workflow.MaxWaitBytes together.
	Inputs json.RawMessage            `json:"inputs,omitempty"`
	Steps  map[string]json.RawMessage `json:"steps,omitempty"`
	// TimeoutAt is when the wait ends unmatched.
	TimeoutAt time.Time `json:"timeout_at"`
	// CorrelationID is the execution's, for the event that ends the wait.
	CorrelationID string `json:"correlation_id,omitempty"`
}
