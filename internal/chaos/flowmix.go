package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
)

// The flow-control skills of the mix. Their triggers are counted apart from the
// others': a debounced trigger has no execution of its own, a scheduled run no
// trigger, and a cancelled run is meant to end without completing.
const (
	// keyedSkill runs at most one run per key value at once (concurrency, limit 1).
	keyedSkill = "chaos-keyed"
	// debouncedSkill folds each key's bursts into one run (debounce, 1s, at most 5s).
	debouncedSkill = "chaos-debounced"
	// scheduledSkill runs on a schedule of one tick every scheduleEvery.
	scheduledSkill = "chaos-every"
	scheduleEvery  = 2 * time.Second
	// keyedKeys and debounceKeys are how many key values the triggers spread over.
	keyedKeys, debounceKeys = 5, 3
	// keyedCancels is how many of chaos-keyed's runs the run cancels.
	keyedCancels = 30
)

// flowSkill reports whether skill is one of the flow-control skills of the mix.
func flowSkill(skill string) bool {
	return skill == keyedSkill || skill == debouncedSkill || skill == scheduledSkill
}

// KeyedTally is what chaos-keyed's runs did: each trigger is one run, whose final
// outcome is completed, or cancelled when the run cancelled it in time.
type KeyedTally struct {
	// Runs is how many triggers; by their first outcome, Completed, Cancelled (as
	// the run asked), Failed (failed, or cancelled unasked) and Lost (none).
	Runs, Completed, Cancelled, Failed, Lost int
	// Duplicates is how many outcome events there are beyond one per run;
	// Conflicting the runs with outcomes of different kinds.
	Duplicates, Conflicting int
	// MaxOverlap is the most runs of one key whose side effects overlapped in time
	// (the limit is 1), and OverlapKey that key.
	MaxOverlap int
	OverlapKey string
	// Asked is how many runs the run cancelled; of them CancelledEnded ended
	// cancelled, CompletedFirst completed (the cancel came after the run had
	// finished, or after its last step had begun), EndedOtherwise ended another way
	// and CancelLost have no outcome. AlreadyEnded of them had ended when asked.
	// Undelivered cancels could not be recorded (the run was not found in time).
	Asked, CancelledEnded, CompletedFirst, EndedOtherwise, CancelLost, AlreadyEnded, Undelivered int
	// LostIDs are the first lost triggers' ids (at most 20).
	LostIDs []string
}

// OK reports whether chaos-keyed kept its promises: every run ended once, each key
// ran one run at a time, a run that was not cancelled completed, and a cancelled
// run ended cancelled or completed.
func (k KeyedTally) OK() bool {
	return k.Lost == 0 && k.Failed == 0 && k.Duplicates == 0 && k.Conflicting == 0 && k.MaxOverlap <= 1 &&
		k.EndedOtherwise == 0 && k.CancelLost == 0
}

// CountKeyed tallies chaos-keyed's runs: ts are its triggers (Key their key value),
// cancels the state each cancel answered by execution (StateEnded for a run that
// had ended; "" for a cancel that could not be recorded), effects its side effects.
func CountKeyed(o Outcomes, ts []Trigger, cancels map[string]string, effects []Effect) KeyedTally {
	var k KeyedTally
	keyOf := make(map[string]string, len(ts))
	for _, t := range ts {
		keyOf[t.Execution] = t.Key
		k.Runs++
		recs := o[t.Execution]
		if len(recs) == 0 {
			k.Lost++
			if len(k.LostIDs) < 20 {
				k.LostIDs = append(k.LostIDs, t.ID)
			}
		} else {
			k.Duplicates += len(recs) - 1
			if slices.ContainsFunc(recs[1:], func(r *run.Record) bool { return r.Status != recs[0].Status }) {
				k.Conflicting++
			}
		}
		state, asked := cancels[t.Execution]
		if asked {
			k.Asked++
			switch state {
			case "":
				k.Undelivered++
			case control.StateEnded:
				k.AlreadyEnded++
			}
		}
		switch {
		case len(recs) == 0:
			if asked && state != "" {
				k.CancelLost++
			}
		case recs[0].Status == run.StatusCompleted:
			k.Completed++
			if asked && state != "" {
				k.CompletedFirst++
			}
		case recs[0].Status == run.StatusCancelled && asked && state != "":
			k.Cancelled++
			k.CancelledEnded++
		default: // failed, or cancelled by no one: neither is designed
			k.Failed++
			if asked && state != "" {
				k.EndedOtherwise++
			}
		}
	}
	byKey := map[string][]Effect{}
	for _, e := range effects {
		key, ok := keyOf[e.Execution]
		if !ok {
			key = "?" + e.Execution // a run of no trigger: counted on its own
		}
		byKey[key] = append(byKey[key], e)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if n := MaxConcurrent(byKey[key]); n > k.MaxOverlap {
			k.MaxOverlap, k.OverlapKey = n, key
		}
	}
	return k
}

// DebounceTally is what chaos-debounced's runs did with its triggers: a burst of
// one key's triggers is one run with the data of the last of them.
type DebounceTally struct {
	Triggers int
	// Runs are the outcome events of its runs; Failed of them did not complete, so
	// their data is unknown.
	Runs, Failed int
	// Folded is how many triggers' data no run had: folded into a later trigger's run.
	Folded int
	// Twice are the triggers (by number) whose data more than one run had.
	Twice []int
	// LastLost are the keys whose last trigger's data no run had.
	LastLost []string
	// Unknown are runs whose data is no trigger's of this run.
	Unknown int
}

// OK reports whether no burst ran twice and each key's last trigger ran.
func (d DebounceTally) OK() bool {
	return len(d.Twice) == 0 && len(d.LastLost) == 0 && d.Failed == 0 && d.Unknown == 0
}

// CountDebounce tallies chaos-debounced's runs (every outcome event of the skill,
// copies included) against its triggers, in the order they were published, each
// run's output n naming the trigger whose data it ran with.
func CountDebounce(ts []Trigger, runs []*run.Record) DebounceTally {
	d := DebounceTally{Triggers: len(ts), Runs: len(runs)}
	known := map[int]bool{}
	last := map[string]int{}
	for _, t := range ts {
		known[t.N] = true
		last[t.Key] = t.N // ts are in publishing order
	}
	ran := map[int]int{}
	for _, r := range runs {
		n, ok := intOutput(r, "n")
		switch {
		case r.Status != run.StatusCompleted:
			d.Failed++
		case !ok || !known[n]:
			d.Unknown++
		default:
			ran[n]++
		}
	}
	for _, n := range slices.Sorted(maps.Keys(ran)) {
		if ran[n] > 1 {
			d.Twice = append(d.Twice, n)
		}
	}
	d.Folded = len(ts) - len(ran)
	for _, key := range slices.Sorted(maps.Keys(last)) {
		if ran[last[key]] == 0 {
			d.LastLost = append(d.LastLost, key)
		}
	}
	return d
}

// intOutput reads an integer output of a run, written as a number or a string.
func intOutput(r *run.Record, name string) (int, bool) {
	switch v := r.Outputs[name].(type) {
	case float64:
		return int(v), v == float64(int(v))
	case int:
		return v, true
	case int64:
		return int(v), true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// ScheduleTally is what chaos-every's ticks did.
type ScheduleTally struct {
	// Runs are the outcome events of its runs, Ticks the distinct ticks
	// (scheduled_at) they ran for, Duplicates the runs beyond one per tick, and
	// Failed those that did not complete.
	Runs, Ticks, Duplicates, Failed int
	// Expected is how many ticks the run's time held, one per period; Missed how
	// many ticks are missing between the first and the last seen.
	Expected, Missed int
	First, Last      time.Time
	// Bad are runs whose scheduled_at output is not a time.
	Bad int
}

// OK reports whether no tick ran twice, each run completed, and some ticks ran.
// Missed ticks are not a fault: with catch_up latest, ticks missed while no router
// ran, or while nats-server was down or its store full, are run once, as the
// latest of them.
func (s ScheduleTally) OK() bool {
	return s.Duplicates == 0 && s.Failed == 0 && s.Bad == 0 && (s.Ticks > 0 || s.Expected < 5)
}

// CountSchedule tallies chaos-every's runs (every outcome event of the skill),
// each run's output scheduled_at naming its tick, over a run that lasted span
// with one tick per every.
func CountSchedule(runs []*run.Record, every, span time.Duration) ScheduleTally {
	s := ScheduleTally{Runs: len(runs), Expected: int(span / every)}
	seen := map[time.Time]int{}
	for _, r := range runs {
		if r.Status != run.StatusCompleted {
			s.Failed++
			continue
		}
		v, _ := r.Outputs["scheduled_at"].(string)
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.Bad++
			continue
		}
		seen[at.UTC()]++
	}
	ticks := slices.SortedFunc(maps.Keys(seen), func(a, b time.Time) int { return a.Compare(b) })
	s.Ticks = len(ticks)
	for i, at := range ticks {
		s.Duplicates += seen[at] - 1
		if i > 0 {
			// Ticks are every apart, counted from the previous one: a longer gap is
			// that many ticks missed (rounded, as a tick is whole seconds).
			s.Missed += max(int((at.Sub(ticks[i-1])+every/2)/every)-1, 0)
		}
	}
	if len(ticks) > 0 {
		s.First, s.Last = ticks[0], ticks[len(ticks)-1]
	}
	return s
}

// printFlow writes the flow-control skills' lines of the report.
func (r *Report) printFlow(line func(name string, v any, note string)) {
	k := r.Keyed
	line("chaos-keyed runs", k.Runs, fmt.Sprintf("%d completed, %d cancelled, %d failed, %d lost, %d duplicate terminals, %d conflicting",
		k.Completed, k.Cancelled, k.Failed, k.Lost, k.Duplicates, k.Conflicting))
	over := ""
	if k.OverlapKey != "" {
		over = fmt.Sprintf(", key %s", k.OverlapKey)
	}
	line("max overlap within a key", k.MaxOverlap, fmt.Sprintf("chaos-keyed: concurrency limit 1 per key, %d keys%s", keyedKeys, over))
	line("cancels", k.Asked, fmt.Sprintf("%d ended cancelled, %d completed first (%d had ended when asked), %d ended otherwise, %d lost, %d not recorded: run not found in time",
		k.CancelledEnded, k.CompletedFirst, k.AlreadyEnded, k.EndedOtherwise, k.CancelLost, k.Undelivered))
	d := r.Debounce
	line("chaos-debounced", fmt.Sprintf("%d triggers, %d runs", d.Triggers, d.Runs),
		fmt.Sprintf("%d folded, %d ran twice, %d keys' last trigger never ran, %d failed, %d of no trigger", d.Folded, len(d.Twice), len(d.LastLost), d.Failed, d.Unknown))
	s := r.Schedule
	line("chaos-every ticks", fmt.Sprintf("%d of %d", s.Ticks, s.Expected),
		fmt.Sprintf("@every 2s over the run; %d duplicates, %d failed; %d missed between the first and last: allowed, ticks missed while no router ran or nats-server was down or full run once, as the latest (catch_up latest)", s.Duplicates, s.Failed, s.Missed))
}
