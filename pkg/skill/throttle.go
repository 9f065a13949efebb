package skill

import (
	"fmt"
	"time"
)

// Throttle bounds how fast a skill's runs start across the whole fleet: at most
// Limit per Period for each value of Key, with Burst more at once after a quiet
// spell. Unlike RateLimit, which skips the triggers beyond it, runs beyond a
// throttle wait for their turn (package worker) without holding a worker.
type Throttle struct {
	// Key is a CEL expression over the run's trigger whose value names the runs
	// that share the rate; "" is one rate for all.
	Key string `json:"key,omitempty"`
	// Limit is how many runs start per Period, at least 1.
	Limit int `json:"limit"`
	// Period is the length of the window Limit counts over: from MinRatePeriod to
	// MaxRatePeriod.
	Period Duration `json:"period"`
	// Burst is how many runs beyond the steady rate may start at once, default 0.
	Burst int `json:"burst,omitempty"`
}

// Interval is the steady time between two runs' starts: Period / Limit.
func (t Throttle) Interval() time.Duration { return time.Duration(t.Period) / time.Duration(t.Limit) }

// String says what a throttle is, as a person would: "10 per 1s (burst 2) by data.customer".
func (t Throttle) String() string {
	s := fmt.Sprintf("%d per %v", t.Limit, time.Duration(t.Period))
	if t.Burst > 0 {
		s += fmt.Sprintf(" (burst %d)", t.Burst)
	}
	if t.Key != "" {
		s += " by " + t.Key
	}
	return s
}

func throttleFields() []*field {
	return []*field{{name: "throttle", container: true, decode: decodeThrottle}}
}

func decodeThrottle(b *builder, d *decoder, p pair) {
	const hint = "write throttle: {limit: 10, period: 1s} and, to throttle per customer, key: data.customer"
	th := Throttle{}
	if _, ok := d.members(p.k, p.v, "throttle", "throttle", hint,
		runKeyMember(b, &th.Key),
		countMember("limit", &th.Limit, 1, 10000, "omit throttle for no limit").must(),
		secondsMember("period", &th.Period, MinRatePeriod, MaxRatePeriod, "1s or 1m").must(),
		countMember("burst", &th.Burst, 0, 10000, "burst is how many runs beyond the rate may start at once"),
	); ok {
		b.s.Throttle = &th
	}
}
