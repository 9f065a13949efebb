package events

// TypeActivationCompleted ends an activation that ran more than one job at once (a
// parallel group, always-skills): it is published once every one of those jobs has
// reached its terminal event (execution.completed or execution.failed, after any
// fallback). An activation of one job ends with that job's terminal event alone.
const TypeActivationCompleted = Prefix + "activation.completed"

func init() { Catalog[TypeActivationCompleted] = ActivationCompleted{} }

// Outcomes of an activation.
const (
	OutcomeCompleted = "completed" // every job completed
	OutcomeFailed    = "failed"    // every job failed
	OutcomePartial   = "partial"   // some completed, some failed
)

// ActivationCompleted is the data of io.skillbus.activation.completed.
type ActivationCompleted struct {
	ActivationID string `json:"activation_id"`
	Outcome      string `json:"outcome"` // completed | failed | partial
	// Executions are the terminal results, one per job the plan started, in the
	// order the plan lists them.
	Executions []ActivationResult `json:"executions"`
}

// ActivationResult is one job's terminal result within an activation.
type ActivationResult struct {
	Skill       string `json:"skill"` // the skill that ran last (a fallback, maybe)
	ExecutionID string `json:"execution_id"`
	Outcome     string `json:"outcome"` // completed | failed
	Error       string `json:"error,omitempty"`
}

// Candidate is one recalled skill of a routing decision, with its score and the
// reason it was or was not selected.
type Candidate struct {
	Name       string          `json:"name"`
	Version    string          `json:"version,omitempty"`
	Source     string          `json:"source"` // forced | rule | lexical | semantic | llm | always
	Sources    []string        `json:"sources,omitempty"`
	Score      float64         `json:"score"`
	Components ScoreComponents `json:"components"`
	Selected   bool            `json:"selected"`
	Role       string          `json:"role,omitempty"` // primary | parallel | fallback | always
	Reason     string          `json:"reason"`
}

// ScoreComponents are the parts of a candidate's score, before weighting.
type ScoreComponents struct {
	Intent    float64 `json:"intent"`
	Trigger   float64 `json:"trigger"`
	Success   float64 `json:"success"`
	Context   float64 `json:"context"`
	Cost      float64 `json:"cost"`
	Conflict  float64 `json:"conflict"`
	Available bool    `json:"available"`
}
