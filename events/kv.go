package events

import "strings"

// Keys of the runs bucket: what is not an event but an execution needs kept.
//
//	<execution>.claim   a worker's claim on a running execution (see the worker)
//	<execution>.paused  an execution paused for a confirmation (a run.Paused)
const (
	runClaim  = ".claim"
	runPaused = ".paused"
	// RunsPausedFilter matches the keys of every paused execution.
	RunsPausedFilter = "*" + runPaused
)

// RunClaimKey is the runs key of an execution's claim.
func RunClaimKey(executionID string) string { return executionID + runClaim }

// RunPausedKey is the runs key of an execution paused for a confirmation.
func RunPausedKey(executionID string) string { return executionID + runPaused }

// PausedExecution returns the execution a runs key names as paused; ok is false
// for a key of anything else.
func PausedExecution(key string) (executionID string, ok bool) {
	return strings.CutSuffix(key, runPaused)
}
