package events

import "fmt"

// Level says which of an execution's events are persisted in the EVENTS stream and
// which are only published live, on the live subjects (skillbus.live.<id>.<kind>),
// to whoever is subscribed at that moment.
//
// A persisted event costs a JetStream write that is acknowledged before the job is;
// a live event costs one plain NATS publish and is gone once delivered. Every level
// persists what exactly-once and recovery need — the jobs (which carry the routing
// decision and are the activation's record), retries, fallbacks, dead letters,
// confirmations and the outcome — so the level changes what a late watcher can
// replay as events, never what happens to a run.
type Level string

// Levels, cheapest last.
const (
	// LevelFull persists every event: the routing decision as an event of its own,
	// started, each step's started, completed, skipped and failed. A one-step
	// execution writes 7 messages.
	LevelFull Level = "full"
	// LevelSteps persists, besides the jobs and the outcome, the checkpoint of
	// each tool step that a later step could fail after (its step.completed), so a
	// redelivered job resumes after the side effects it already had. The default.
	// A one-step execution writes 3 messages: trigger, job, outcome.
	LevelSteps Level = "steps"
	// LevelTerminal persists only the jobs and the outcome: a redelivered
	// multi-step job runs every step again (tools see the same Idempotency-Key).
	LevelTerminal Level = "terminal"
)

// DefaultLevel is the level of a fleet that does not choose one.
const DefaultLevel = LevelSteps

// ParseLevel validates a level name; "" is DefaultLevel.
func ParseLevel(s string) (Level, error) {
	switch Level(s) {
	case "":
		return DefaultLevel, nil
	case LevelFull, LevelSteps, LevelTerminal:
		return Level(s), nil
	}
	return "", fmt.Errorf("events level %q: want full, steps or terminal", s)
}

// Persisted reports whether an event of type typ is written to the EVENTS stream at
// this level. Step checkpoints (step.completed, step.skipped) are decided per step by
// the worker (see LevelSteps); Persisted answers for every other type.
func (l Level) Persisted(typ string) bool {
	if l == LevelFull || l == "" {
		return true
	}
	switch typ {
	case TypeRouteDecided, TypeExecutionStarted, TypeStepStarted, TypeStepFailed, TypeStepCompleted, TypeStepSkipped:
		return false
	}
	return true
}

// Outcome reports whether typ is an execution's outcome: completed, failed, handed
// to the next skill of the fallback chain, or cancelled. Each execution has exactly
// one.
func Outcome(typ string) bool {
	return typ == TypeExecutionCompleted || typ == TypeExecutionFailed || typ == TypeExecutionFallback || typ == TypeExecutionCancelled
}
