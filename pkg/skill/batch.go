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
		keyMember(nil, &bt.Key),
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

// BatchInput is the input a batch's run gets: its triggers, as a list of events.
const BatchInput = "events"

// checkBatchInputs reports a batched workflow whose declared inputs would refuse
// every batch's run, whose data is {"events": [...]}: one that declares inputs but
// not events (or "*"), declares events as other than an array, or requires
// another input without a default.
func (b *builder) checkBatchInputs() {
	wf := b.s.Workflow
	set, ok := b.set["batch"]
	if b.s.Batch == nil || wf == nil || !ok {
		return
	}
	checkOnlyInput(wf, BatchInput, func(in Input) {
		if in.Type != "array" {
			typ := in.Type
			if typ == "" {
				typ = "string (the type of an input without type:)"
			}
			set.d.errAt(set.key, "batch", "declare events with type: array",
				"each batch's run gives input %s as an array of events, but it is declared as %s; every batch would fail", BatchInput, typ)
		}
	}, func(in Input) {
		set.d.errAt(set.key, "batch", "give input "+in.Name+" a default or make it optional, and read each trigger's data from inputs.events[i].data",
			"input %s is required, but a batch's run gives only %s; every batch would fail", in.Name, BatchInput)
	}, func() {
		set.d.errAt(set.key, "batch", "add an input events (type: array), or one named \"*\"; each trigger's data is inputs.events[i].data",
			"each batch's run has the data {%q: [...]}, an input the workflow does not declare; every batch would fail", BatchInput)
	})
}

// checkBatchKeys reports a key of a batched skill's rate_limit, concurrency or
// throttle that cannot tell batches apart, or fails on each of them. Those keys
// read the batch's run: its data is {"events": [...]}, so another field of data
// is not there and the key fails on every batch (a rate_limit's drops the
// batch's run with code filter_error; a concurrency's or throttle's fails it);
// it has no subject, time or extensions, so a rate_limit key on them is "" on
// every batch (a concurrency's or throttle's is refused for any skill); and
// its source is the same for every batch.
func (b *builder) checkBatchKeys() {
	if b.s.Batch == nil {
		return
	}
	if k := b.prio; k != nil {
		// Evaluated on the batch's run too: one on a trigger's field fails,
		// and the run is queued at 0.
		for _, r := range k.reads {
			if r.Name == "data" && r.Field != "" && r.Field != BatchInput {
				line, col := k.d.exprPos(k.n, r.Line, r.Column)
				k.d.add(SeverityWarning, line, col, k.field, fmt.Sprintf("read the batch's events, such as data.events[0].data.%s", r.Field),
					"queue_priority reads data.%s, but it is evaluated on the batch's run, whose data is {\"events\": [...]}: it would fail, and every batch be queued at 0", r.Field)
			}
		}
	}
	for _, k := range b.runKeys {
		for _, r := range k.reads {
			line, col := k.d.exprPos(k.n, r.Line, r.Column)
			switch {
			case r.Name == "data" && r.Field != "" && r.Field != BatchInput:
				k.d.add(SeverityError, line, col, k.field,
					fmt.Sprintf("key on the batch's events, such as data.events[0].data.%s, or move the key to batch.key", r.Field),
					"%s reads data.%s, but it is evaluated on the batch's run, whose data is {\"events\": [...]}: it would fail on every batch", k.field, r.Field)
			case r.Name == "source":
				k.d.add(SeverityError, line, col, k.field, "key on the batch's events, such as data.events[0].source",
					"%s reads source, but it is evaluated on the batch's run, whose source is %s on every batch: one key for all", k.field, "/skillbus/debounce/"+b.s.Name)
			case (r.Name == "subject" || r.Name == "time") && k.field == "rate_limit.key":
				k.d.add(SeverityError, line, col, k.field, "key on the batch's events, such as data.events[0]."+r.Name,
					"%s reads %s, but it is evaluated on the batch's run, which has none: it would be \"\" on every batch, one count for all", k.field, r.Name)
			case r.Name == "extensions" && k.field == "rate_limit.key":
				k.d.add(SeverityError, line, col, k.field, fmt.Sprintf("a batch's run cannot read extensions: key the batch itself (batch.key: %s) or on the events' data", r),
					"%s reads %s, but it is evaluated on the batch's run, which has no extensions: it would be \"\" on every batch, one count for all", k.field, r)
			}
		}
	}
}
