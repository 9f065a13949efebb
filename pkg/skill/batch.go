package skill

import (
	"fmt"
	"time"
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

func decodeBatch(b *builder, d *decoder, p pair) {
	const hint = "write batch: {max_size: 50, timeout: 5s} and, to batch per customer, key: data.customer"
	bt := Batch{}
	_, good := d.members(p.k, p.v, "batch", "batch", hint,
		keyMember(&bt.Key),
		countMember("max_size", &bt.MaxSize, 1, MaxBatchSize, fmt.Sprintf("a batch holds from 1 to %d triggers", MaxBatchSize)).must(),
		secondsMember("timeout", &bt.Timeout, MinBatchTimeout, MaxBatchTimeout, "5s or 1m").must(),
	)
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
