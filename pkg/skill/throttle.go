package skill

import (
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/flow"
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

var throttleKeys = []string{"key", "limit", "period", "burst"}

func throttleFields() []*field {
	return []*field{{name: "throttle", container: true, decode: decodeThrottle}}
}

func decodeThrottle(b *builder, d *decoder, p pair) {
	const hint = "write throttle: {limit: 10, period: 1s} and, to throttle per customer, key: data.customer"
	ps, ok := d.pairs(p.v, "throttle", hint)
	if !ok {
		return
	}
	th := Throttle{}
	good, seen := true, map[string]bool{}
	for _, e := range ps {
		f := "throttle." + e.key
		seen[e.key] = true
		switch e.key {
		case "key":
			s, ok := d.str(e.v, f)
			if ok && d.celAt(e.v, f, s, flow.Key) {
				th.Key = strings.TrimSpace(s)
			} else {
				good = false
			}
		case "limit", "burst":
			n, ok := d.integer(e.v, f)
			switch {
			case !ok:
				good = false
			case e.key == "limit" && (n < 1 || n > 10000):
				d.errAt(e.v, f, "omit throttle for no limit", "throttle.limit must be from 1 to 10000, not %d", n)
				good = false
			case e.key == "burst" && (n < 0 || n > 10000):
				d.errAt(e.v, f, "burst is how many runs beyond the rate may start at once", "throttle.burst must be from 0 to 10000, not %d", n)
				good = false
			case e.key == "limit":
				th.Limit = n
			default:
				th.Burst = n
			}
		case "period":
			if v, ok := d.ratePeriod(e.v, f, "1s or 1m"); ok {
				th.Period = v
			} else {
				good = false
			}
		default:
			d.errAt(e.k, f, hintFor(e.key, throttleKeys), "unknown field %s", f)
			good = false
		}
	}
	for _, k := range []string{"limit", "period"} {
		if !seen[k] && ok {
			d.errAt(p.k, "throttle", hint, "throttle needs %s", k)
			good = false
		}
	}
	if good {
		b.s.Throttle = &th
	}
}
