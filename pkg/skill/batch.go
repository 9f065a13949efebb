package skill

import (
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/flow"
)

// Batch gathers triggers into one run: up to MaxSize triggers with the same Key
// become one run whose data is {"events": [...]}, started when the batch is full
// or Timeout after its first trigger, whichever comes first. The batch is held by
// the server (a log of its triggers and a scheduled message), not by a router
// (package router).
type Batch struct {
	// Key is a CEL expression over the trigger whose value names the batch a
	// trigger joins; "" is one batch for all.
	Key string `json:"key,omitempty"`
	// MaxSize is how many triggers make a full batch: from 1 to MaxBatchSize.
	MaxSize int `json:"max_size"`
	// Timeout is how long a batch waits for more triggers after its first: whole
	// seconds from MinBatchTimeout to MaxBatchTimeout.
	Timeout Duration `json:"timeout"`
}

// Bounds of a batch.
const (
	MaxBatchSize    = 1000
	MinBatchTimeout = time.Second
	MaxBatchTimeout = 24 * time.Hour
)

var batchKeys = []string{"key", "max_size", "timeout"}

func decodeBatch(b *builder, d *decoder, p pair) {
	const hint = "write batch: {max_size: 50, timeout: 5s} and, to batch per customer, key: data.customer"
	ps, ok := d.pairs(p.v, "batch", hint)
	if !ok {
		return
	}
	bt := Batch{}
	good, seen := true, map[string]bool{}
	for _, e := range ps {
		f := "batch." + e.key
		seen[e.key] = true
		switch e.key {
		case "key":
			s, ok := d.str(e.v, f)
			if ok && d.celAt(e.v, f, s, flow.Key) {
				bt.Key = strings.TrimSpace(s)
			} else {
				good = false
			}
		case "max_size":
			n, ok := d.integer(e.v, f)
			switch {
			case !ok:
				good = false
			case n < 1 || n > MaxBatchSize:
				d.errAt(e.v, f, fmt.Sprintf("a batch holds from 1 to %d triggers", MaxBatchSize), "batch.max_size %d is out of range", n)
				good = false
			default:
				bt.MaxSize = n
			}
		case "timeout":
			v, ok := d.duration(e.v, f)
			switch {
			case !ok:
				good = false
			case time.Duration(v) < MinBatchTimeout || time.Duration(v) > MaxBatchTimeout || time.Duration(v)%time.Second != 0:
				d.errAt(e.v, f, "write whole seconds from 1s to 24h, such as 5s or 1m", "batch.timeout %v is out of range", time.Duration(v))
				good = false
			default:
				bt.Timeout = v
			}
		default:
			d.errAt(e.k, f, hintFor(e.key, batchKeys), "unknown field batch.%s", e.key)
			good = false
		}
	}
	for _, k := range []string{"max_size", "timeout"} {
		if !seen[k] {
			d.errAt(p.k, "batch", hint, "batch needs %s", k)
			good = false
		}
	}
	if good && b.s.Debounce != nil {
		d.errAt(p.k, "batch", "a debounce runs a burst's last trigger, a batch all of them: keep one", "a skill has debounce or batch, not both")
		good = false
	}
	if good {
		b.s.Batch = &bt
	}
}

// String says what a batch is, as a person would: "50 in 5s by data.customer".
func (bt Batch) String() string {
	s := fmt.Sprintf("%d in %v", bt.MaxSize, time.Duration(bt.Timeout))
	if bt.Key != "" {
		s += " by " + bt.Key
	}
	return s
}
