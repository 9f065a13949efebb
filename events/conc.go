package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// KeyHash is the <key hash> of a concurrency gate or a throttle key: the first
// 128 bits of the value's SHA-256, in hex. Key values come from senders, so the
// hash must resist chosen collisions: a value colliding with another tenant's
// would take its slots or its rate.
func KeyHash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:16])
}

// Keys of the runs bucket for keyed concurrency (see the worker):
//
//	conc.<skill>.<entry>.<key hash>.<n>   slot n of a limit's key value, held by a running
//	                                      execution (its id is the value), expiring unless renewed
//
// A limit's key value is a gate, conc.<skill>.<entry>.<key hash>: its runs take its slots,
// and a run that finds none free waits in a run.Held record naming the gate.
const (
	concKey = "conc."
	// ConcSlotsFilter matches the keys of every concurrency slot.
	ConcSlotsFilter = concKey + ">"
)

// ConcGate names the gate of one value of a skill's concurrency limit: entry is
// the limit's place in the skill's concurrency list, keyHash the value's KeyHash.
func ConcGate(skill string, entry int, keyHash string) string {
	return concKey + skill + "." + strconv.Itoa(entry) + "." + keyHash
}

// ConcSlotKey is the runs key of slot n of a gate.
func ConcSlotKey(gate string, n int) string { return gate + "." + strconv.Itoa(n) }

// ConcSlotGate returns the gate a slot's runs key belongs to; ok is false for a
// key of anything else.
func ConcSlotGate(key string) (gate string, ok bool) {
	if !strings.HasPrefix(key, concKey) || strings.Count(key, ".") != 4 {
		return "", false
	}
	return key[:strings.LastIndexByte(key, '.')], true
}

// StageSlot is the stage of a job published again when a concurrency slot it
// waited for was freed.
const StageSlot = "slot"

// HeaderConcGate names, on a job published again for a freed slot, the gate
// whose slot it was: a run that ends without taking it (cancelled meanwhile)
// passes the turn on to the gate's next waiting run.
const HeaderConcGate = "Skillbus-Conc-Gate"

// HeaderBurstDigest names, on a debounced burst's latest trigger, on each
// trigger of a batch's log and on the run of either (subjects only routers
// write), the version of the skill the trigger was taken for: the run's version
// if the skill is deleted before it starts.
const HeaderBurstDigest = "Skillbus-Burst-Digest"

// Keys of the runs bucket for throttles (see the worker):
//
//	thr.<skill>.<key hash>     a throttle's next start time for a key value (GCRA), "<unix ns>/<rate>"
//	<execution>.throttle       the start time a throttled run waits for, "<unix ns>/<rate>"
const (
	throttleKey = "thr."
	runThrottle = ".throttle"
)

// ThrottleKey is the runs key of a skill's throttle for one key value; keyHash is
// the value's KeyHash.
func ThrottleKey(skill, keyHash string) string { return throttleKey + skill + "." + keyHash }

// RunThrottleKey is the runs key of the start time a throttled execution waits for.
func RunThrottleKey(executionID string) string { return executionID + runThrottle }

// StageThrottle is the stage of a throttled job published again when the start
// time it was set aside for came.
const StageThrottle = "throttle"

// ThrottleTimer is the subject of the scheduled message that says a throttled run
// set aside is due (an io.skillbus.throttle.due on the execution's events).
func (s Subjects) ThrottleTimer(executionID string) string {
	return s.Prefix + ".events." + executionID + ".throttle.timer"
}
