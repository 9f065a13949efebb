package run

import (
	"fmt"
	"hash/fnv"
	"time"
)

// Ramp sends a share of a skill's new runs to another version of it, the rest to
// the current version. It is kept in KV runs (events.SkillRampKey) until rolled
// back; routers watch it and choose per activation (Ramp.Takes).
type Ramp struct {
	Skill string `json:"skill"`
	// Digest and Version name the version ramped to, a version the registry keeps.
	Digest  string `json:"digest"`
	Version string `json:"version,omitempty"`
	// Basis is the share of new runs sent to it, in hundredths of a percent
	// (1000 is 10%), from 0 to RampAll.
	Basis int       `json:"basis"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// RampAll is the Basis of a ramp that takes every run.
const RampAll = 10_000

// RampSlot is where an activation falls among RampAll slots: a hash of its id, so
// every delivery and every router puts it in the same slot.
func RampSlot(activationID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(activationID))
	return int(h.Sum32() % RampAll)
}

// Takes reports whether the ramp takes an activation: its slot is below Basis.
func (r *Ramp) Takes(activationID string) (bool, int) {
	slot := RampSlot(activationID)
	return slot < r.Basis, slot
}

// Percent is the ramp's share as people write it: "10%", "0.5%".
func (r *Ramp) Percent() string {
	if r.Basis%100 == 0 {
		return fmt.Sprintf("%d%%", r.Basis/100)
	}
	return fmt.Sprintf("%g%%", float64(r.Basis)/100)
}
