package chaos

import (
	"slices"

	"github.com/skillbus/skillbus/pkg/run"
)

// Trigger is one trigger the run publishes.
type Trigger struct {
	N         int
	ID        string // CloudEvent id; the source is the run's
	Skill     string // the skill it names, or "" for the fallback pair's event type
	Execution string // the primary execution's id
	// Key is, for a flow-control skill's trigger, the value of the skill's key
	// in its data.
	Key string
}

// Outcomes are the outcome events read from the EVENTS stream: every copy of each
// execution's outcome, in stream order.
type Outcomes map[string][]*run.Record

// Add records one outcome event.
func (o Outcomes) Add(rec *run.Record) { o[rec.ExecutionID] = append(o[rec.ExecutionID], rec) }

// Final follows t's executions through their fallbacks to the one that completed or
// failed, or returns nil when the chain ends without an outcome: the trigger is lost
// (so far).
func (o Outcomes) Final(t Trigger) *run.Record {
	id := t.Execution
	for range 16 { // a chain is as long as the skills that handle one event type
		recs := o[id]
		if len(recs) == 0 {
			return nil
		}
		r := recs[0]
		if r.Status != run.StatusFallback {
			return r
		}
		id = r.Next
	}
	return nil
}

// Chain lists t's executions that have outcomes, following fallbacks: the first
// execution, then each fallback's next.
func (o Outcomes) Chain(t Trigger) []string {
	var ids []string
	id := t.Execution
	for range 16 { // a chain is as long as the skills that handle one event type
		recs := o[id]
		if len(recs) == 0 {
			break
		}
		ids = append(ids, id)
		if recs[0].Status != run.StatusFallback {
			break
		}
		id = recs[0].Next
	}
	return ids
}

// Tally is what the outcomes say about the triggers.
type Tally struct {
	Completed, Failed, Lost int
	// Duplicates is how many outcome events there are beyond one per execution.
	Duplicates int
	// Conflicting lists executions with outcomes of different kinds.
	Conflicting []string
	// LostIDs are the first lost triggers' ids (at most 20).
	LostIDs []string
	// FailedBy counts the final failures by their error's first word (a class code
	// such as result_too_large, or the skill's message).
	Failures map[string]int
}

// Count tallies the triggers' final outcomes.
func (o Outcomes) Count(ts []Trigger) Tally {
	t := Tally{Failures: map[string]int{}}
	for _, tr := range ts {
		f := o.Final(tr)
		switch {
		case f == nil:
			t.Lost++
			if len(t.LostIDs) < 20 {
				t.LostIDs = append(t.LostIDs, tr.ID)
			}
		case f.Status == run.StatusCompleted:
			t.Completed++
		default:
			t.Failed++
			t.Failures[failureKey(f)]++
		}
	}
	for id, recs := range o {
		t.Duplicates += len(recs) - 1
		for _, r := range recs[1:] {
			if r.Status != recs[0].Status {
				t.Conflicting = append(t.Conflicting, id)
				break
			}
		}
	}
	slices.Sort(t.Conflicting)
	return t
}

func failureKey(r *run.Record) string {
	msg := r.Error
	for i, c := range msg {
		if c == ':' || c == ' ' {
			msg = msg[:i]
			break
		}
	}
	return r.Class + " " + msg
}
