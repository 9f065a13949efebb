package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Keys of the runs bucket: what is not an event but an execution needs kept.
//
//	<execution>.claim   a worker's claim on a running execution (see the worker)
//	<execution>.paused  an execution paused for a confirmation (a run.Paused)
//	<execution>.cancel  a request to cancel an execution (a run.Cancel)
//	<execution>.held    a job held because its skill is paused (a run.Held)
//	<execution>.wait    what an execution parked at a wait_for_event waits for (a run.Wait)
//	skill.<name>.hold   a paused skill: its new runs wait (a run.Hold)
//	skill.<name>.ramp   a share of a skill's new runs sent to another version (a run.Ramp)
//	skill.<name>.cancelled
//	                    runs cancel --skill: the skill's runs of triggers up to a
//	                    place in TRIGGERS that were still pending then (a debounced
//	                    burst, a batch) are cancelled when due (a run.SkillCancel)
//	cancelon.<skill>.<type>.<value>.<execution>
//	                    a run an event of a type may cancel (a skill's cancel_on),
//	                    kept until the rule's timeout; <type> hashes the type,
//	                    <value> what the rule's match compares
//	cancelby.<skill>.<type>.<value>.<activation>
//	                    an event of that type, kept as long, for runs indexed
//	                    after it was routed
const (
	runClaim  = ".claim"
	runPaused = ".paused"
	runCancel = ".cancel"
	runHeld   = ".held"
	runWait   = ".wait"
	skillHold = ".hold"
	skillRamp = ".ramp"
	skillCut  = ".cancelled"
	skillKey  = "skill."
	// RunsPausedFilter matches the keys of every paused execution.
	RunsPausedFilter = "*" + runPaused
	// RunsCancelFilter matches the keys of every cancel request.
	RunsCancelFilter = "*" + runCancel
	// RunsHeldFilter matches the keys of every job held by a paused skill.
	RunsHeldFilter = "*" + runHeld
	// RunsWaitFilter matches the keys of every execution waiting for an event.
	RunsWaitFilter = "*" + runWait
	// SkillsHoldFilter matches the keys of every paused skill.
	SkillsHoldFilter = skillKey + "*" + skillHold
	// SkillsRampFilter matches the keys of every version ramp.
	SkillsRampFilter = skillKey + "*" + skillRamp
)

// RunClaimKey is the runs key of an execution's claim.
func RunClaimKey(executionID string) string { return executionID + runClaim }

// RunPausedKey is the runs key of an execution paused for a confirmation.
func RunPausedKey(executionID string) string { return executionID + runPaused }

// RunCancelKey is the runs key of a request to cancel an execution.
func RunCancelKey(executionID string) string { return executionID + runCancel }

// RunHeldKey is the runs key of an execution's job held while its skill is paused.
func RunHeldKey(executionID string) string { return executionID + runHeld }

// RunWaitKey is the runs key of what an execution waits for at a wait_for_event.
func RunWaitKey(executionID string) string { return executionID + runWait }

// WaitingExecution returns the execution a runs key names as waiting for an
// event; ok is false for a key of anything else.
func WaitingExecution(key string) (executionID string, ok bool) {
	id, ok := strings.CutSuffix(key, runWait)
	return id, ok && !strings.Contains(id, ".")
}

// SkillHoldKey is the runs key that says a skill is paused.
func SkillHoldKey(skill string) string { return skillKey + skill + skillHold }

// SkillCancelledKey is the runs key of a skill's last runs cancel --skill: its
// runs of triggers taken before then, still pending, are cancelled when due.
func SkillCancelledKey(skill string) string { return skillKey + skill + skillCut }

// PausedExecution returns the execution a runs key names as paused; ok is false
// for a key of anything else.
func PausedExecution(key string) (executionID string, ok bool) {
	id, ok := strings.CutSuffix(key, runPaused)
	return id, ok && !strings.Contains(id, ".")
}

// CancelledExecution returns the execution a runs key asks to cancel; ok is false
// for a key of anything else.
func CancelledExecution(key string) (executionID string, ok bool) {
	id, ok := strings.CutSuffix(key, runCancel)
	return id, ok && !strings.Contains(id, ".")
}

// HeldExecution returns the execution whose held job a runs key names; ok is
// false for a key of anything else.
func HeldExecution(key string) (executionID string, ok bool) {
	id, ok := strings.CutSuffix(key, runHeld)
	return id, ok && !strings.Contains(id, ".")
}

// HeldSkill returns the skill a runs key says is paused; ok is false for a key of
// anything else.
func HeldSkill(key string) (skill string, ok bool) {
	rest, ok := strings.CutPrefix(key, skillKey)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, skillHold)
	return name, ok && name != "" && !strings.Contains(name, ".")
}

const (
	cancelOnKey = "cancelon."
	cancelByKey = "cancelby."
)

// RunCancelOnKey is the runs key of an execution of skill that an event of type
// typ may cancel (its skill's cancel_on); value is a key token that indexes the
// run by what its rule's match compares (see package router).
func RunCancelOnKey(skill, typ, value, executionID string) string {
	return cancelOnKey + skill + "." + typeToken(typ) + "." + value + "." + executionID
}

// RunsCancelOnFilter matches the keys of every execution of skill that an event
// of type typ may cancel and that is indexed under value ("*": under any).
func RunsCancelOnFilter(skill, typ, value string) string {
	return cancelOnKey + skill + "." + typeToken(typ) + "." + value + ".*"
}

// RunsCancelOnOfFilter matches the cancel_on keys of one execution of skill.
func RunsCancelOnOfFilter(skill, executionID string) string {
	return cancelOnKey + skill + ".*.*." + executionID
}

// RunCancelEventKey is the runs key of an event of type typ that a cancel_on
// rule of skill names, kept for runs whose cancel_on keys are written after it
// is routed; activationID is the event's.
func RunCancelEventKey(skill, typ, value, activationID string) string {
	return cancelByKey + skill + "." + typeToken(typ) + "." + value + "." + activationID
}

// RunsCancelEventFilter matches the keys of every event of type typ kept for
// skill's cancel_on under value.
func RunsCancelEventFilter(skill, typ, value string) string {
	return cancelByKey + skill + "." + typeToken(typ) + "." + value + ".*"
}

// typeToken is a CloudEvent type as one key token: a hash, since a type's dots
// would make it several.
func typeToken(typ string) string {
	sum := sha256.Sum256([]byte(typ))
	return hex.EncodeToString(sum[:8])
}

// SkillRampKey is the runs key of a skill's version ramp.
func SkillRampKey(skill string) string { return skillKey + skill + skillRamp }

// RampedSkill returns the skill a runs key holds the ramp of; ok is false for a
// key of anything else.
func RampedSkill(key string) (skill string, ok bool) {
	rest, ok := strings.CutPrefix(key, skillKey)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, skillRamp)
	return name, ok && name != "" && !strings.Contains(name, ".")
}
