package skill

import (
	"fmt"
	"slices"
	"strings"
)

// Concurrency bounds how many runs of a skill run at once across the whole fleet:
// at most Limit for each value of Key. Runs beyond it wait without holding a worker
// (package worker), and start as soon as a run of the same key ends.
//
// An entry without a Key is max_concurrent: one limit for all the skill's runs.
type Concurrency struct {
	// Key is a CEL expression over the run's trigger (package flow) whose value
	// names the runs that share the limit (a customer, a tenant); "" is one limit
	// for all.
	Key string `json:"key,omitempty"`
	// Limit is how many runs of one key value run at once, at least 1.
	Limit int `json:"limit"`
}

// Bounds of the concurrency field.
const (
	// MaxConcurrencyEntries is how many limits a skill may set.
	MaxConcurrencyEntries = 2
	// MaxConcurrencyLimit bounds one entry's limit: each run of a key takes one
	// of its limit's slots, and a slot is looked for one at a time.
	MaxConcurrencyLimit = 1000
)

// KeyedConcurrency returns the entries with a key: the limits a worker enforces
// itself (an entry without a key is MaxConcurrent).
func (s *Skill) KeyedConcurrency() []Concurrency {
	var out []Concurrency
	for _, c := range s.Concurrency {
		if c.Key != "" {
			out = append(out, c)
		}
	}
	return out
}

func concurrencyFields() []*field {
	return []*field{{name: "concurrency", container: true, decode: decodeConcurrency}}
}

func decodeConcurrency(b *builder, d *decoder, p pair) {
	const hint = "write concurrency: [{key: data.customer, limit: 2}] (at most two entries; an entry without key limits all runs)"
	items, ok := d.seq(p.v, "concurrency", hint)
	if !ok {
		return
	}
	if len(items) > MaxConcurrencyEntries {
		d.errAt(items[MaxConcurrencyEntries], "concurrency", "keep at most two limits, such as one per customer and one for all",
			"concurrency has %d entries; at most %d", len(items), MaxConcurrencyEntries)
		return
	}
	var out []Concurrency
	good, keyless := true, 0
	for i, it := range items {
		c := Concurrency{}
		if _, ok := d.members(it, it, "concurrency", fmt.Sprintf("concurrency entry %d", i+1), hint,
			runKeyMember(b, &c.Key),
			countMember("limit", &c.Limit, 1, MaxConcurrencyLimit, "omit the entry for no limit").must(),
		); !ok {
			good = false
		}
		if c.Key == "" && c.Limit > 0 {
			keyless++
			if keyless > 1 {
				d.errAt(it, "concurrency", "give the second entry a key", "concurrency has two entries without a key")
				good = false
			}
			if b.s.MaxConcurrent != 0 && b.s.MaxConcurrent != c.Limit {
				d.errAt(it, "concurrency", "an entry without key is max_concurrent: write one of them",
					"concurrency limit %d without a key contradicts max_concurrent %d", c.Limit, b.s.MaxConcurrent)
				good = false
			}
		}
		out = append(out, c)
	}
	if !good {
		return
	}
	for _, c := range out {
		if c.Key == "" {
			b.s.MaxConcurrent = c.Limit // one consumer's MaxAckPending enforces it
		}
	}
	b.s.Concurrency = out
}

// checkRunKeyInputs reports a concurrency or throttle key that reads a field of
// data which the workflow's inputs do not declare (and no "*"): such keys read
// the run's inputs, so a run without the field fails on the key, and one with
// it fails on its inputs, which refuse an undeclared field. A batched skill's
// keys are checked against its run's data instead (checkBatchKeys).
func (b *builder) checkRunKeyInputs() {
	wf := b.s.Workflow
	if b.s.Batch != nil || wf == nil || len(wf.Inputs) == 0 {
		return
	}
	names := make([]string, 0, len(wf.Inputs))
	for _, in := range wf.Inputs {
		if in.Name == AnyInput {
			return
		}
		names = append(names, in.Name)
	}
	for _, k := range b.runKeys {
		if k.field != "concurrency.key" && k.field != "throttle.key" {
			continue
		}
		for _, r := range k.reads {
			if r.Name != "data" || r.Field == "" || slices.Contains(names, r.Field) {
				continue
			}
			hint := fmt.Sprintf("declare input %s, or key on one the skill declares (%s)", r.Field, strings.Join(names, ", "))
			if c := closest(r.Field, names); c != "" {
				hint = "did you mean data." + c + "?"
			}
			line, col := k.d.exprPos(k.n, r.Line, r.Column)
			k.d.add(SeverityError, line, col, k.field, hint,
				"%s reads data.%s, an input the skill does not declare: every run would fail, one with it on its inputs, one without it on the key", k.field, r.Field)
		}
	}
}
