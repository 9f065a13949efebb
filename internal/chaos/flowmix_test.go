package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
)

func TestCountKeyed(t *testing.T) {
	var ts []Trigger
	for i, key := range []string{"k0", "k0", "k1", "k1", "k0", "k2", "k2", "k2", "k1", "k0"} {
		ts = append(ts, Trigger{N: i, ID: fmt.Sprintf("t-%d", i), Execution: fmt.Sprintf("e%d", i), Key: key})
	}
	o := Outcomes{}
	add := func(exec, status string) { o.Add(&run.Record{ExecutionID: exec, Skill: keyedSkill, Status: status}) }
	add("e0", run.StatusCompleted)
	add("e1", run.StatusCompleted)
	add("e1", run.StatusCompleted) // a duplicate terminal
	add("e2", run.StatusCancelled) // cancelled while queued
	add("e3", run.StatusCompleted) // the cancel came after it finished
	add("e4", run.StatusCompleted) // asked when it had ended
	add("e5", run.StatusFailed)    // failed, not cancelled
	add("e6", run.StatusCancelled)
	add("e6", run.StatusCompleted) // two outcomes of different kinds
	// e7 is lost; e8's cancel is lost with its run; e9's cancel never got recorded.
	add("e9", run.StatusCompleted)
	cancels := map[string]string{"e2": control.StateActive, "e3": control.StateActive, "e4": control.StateEnded, "e8": control.StateActive, "e9": ""}
	eff := func(exec string, from, to int) Effect {
		return Effect{Skill: keyedSkill, Execution: exec, Step: "hold", Start: at(from), End: at(to)}
	}
	effects := []Effect{
		eff("e0", 0, 300), eff("e1", 300, 600), eff("e4", 600, 900), // k0 back to back
		eff("e2", 0, 300), eff("e3", 100, 400), // k1: two at once
		eff("e5", 0, 300), eff("e6", 0, 300), eff("e7", 0, 300), // k2: three at once
	}
	got := CountKeyed(o, ts, cancels, effects)
	want := KeyedTally{Runs: 10, Completed: 5, Cancelled: 1, Failed: 2, Lost: 2, Duplicates: 2, Conflicting: 1,
		MaxOverlap: 3, OverlapKey: "k2", Asked: 5, CancelledEnded: 1, CompletedFirst: 2, AlreadyEnded: 1, CancelLost: 1, Undelivered: 1,
		LostIDs: []string{"t-7", "t-8"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keyed tally (-want +got):\n%s", diff)
	}
	if got.OK() {
		t.Error("a tally with lost runs and an overlap is OK")
	}
	// e6 counts by its first outcome: cancelled, though no one asked, so failed.
	ok := CountKeyed(Outcomes{"e0": {{ExecutionID: "e0", Status: run.StatusCompleted}}, "e2": {{ExecutionID: "e2", Status: run.StatusCancelled}}},
		ts[:1:1], nil, []Effect{eff("e0", 0, 300)})
	if !ok.OK() || ok.MaxOverlap != 1 {
		t.Errorf("one completed run, one key: %+v, OK %v", ok, ok.OK())
	}
	asked := CountKeyed(Outcomes{"e0": {{ExecutionID: "e0", Status: run.StatusCancelled}}}, ts[:1:1], map[string]string{"e0": control.StateActive}, nil)
	if !asked.OK() || asked.CancelledEnded != 1 {
		t.Errorf("one run cancelled as asked: %+v, OK %v", asked, asked.OK())
	}
	otherwise := CountKeyed(Outcomes{"e0": {{ExecutionID: "e0", Status: run.StatusFailed}}}, ts[:1:1], map[string]string{"e0": control.StateActive}, nil)
	if otherwise.OK() || otherwise.EndedOtherwise != 1 {
		t.Errorf("a cancelled run that failed: %+v, OK %v", otherwise, otherwise.OK())
	}
}

func TestCountDebounce(t *testing.T) {
	var ts []Trigger
	for i, key := range []string{"d0", "d1", "d0", "d1", "d2", "d0", "d1", "d2"} {
		ts = append(ts, Trigger{N: 10 + i, Key: key})
	}
	rec := func(n any, status string) *run.Record {
		return &run.Record{Skill: debouncedSkill, Status: status, Outputs: map[string]any{"n": n}}
	}
	got := CountDebounce(ts, []*run.Record{
		rec(float64(12), run.StatusCompleted), // d0's first burst
		rec("13", run.StatusCompleted),        // d1's first burst, its n a string
		rec(float64(12), run.StatusCompleted), // d0's first burst again
		rec(float64(15), run.StatusCompleted), // d0's last
		rec(float64(99), run.StatusCompleted), // no trigger's
		rec(nil, run.StatusFailed),
		rec(float64(17), run.StatusCompleted), // d2's last; d1's last (16) never ran
	})
	want := DebounceTally{Triggers: 8, Runs: 7, Failed: 1, Folded: 4, Twice: []int{12}, LastLost: []string{"d1"}, Unknown: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("debounce tally (-want +got):\n%s", diff)
	}
	if got.OK() {
		t.Error("a tally with a burst run twice is OK")
	}
	good := CountDebounce(ts, []*run.Record{rec(float64(15), run.StatusCompleted), rec(float64(16), run.StatusCompleted), rec(float64(17), run.StatusCompleted)})
	if !good.OK() || good.Folded != 5 {
		t.Errorf("each key's last trigger ran once: %+v, OK %v", good, good.OK())
	}
}

func TestCountSchedule(t *testing.T) {
	tick := func(s int, status string) *run.Record {
		return &run.Record{Skill: scheduledSkill, Status: status, Outputs: map[string]any{"scheduled_at": at(s * 1000).UTC().Format(time.RFC3339)}}
	}
	runs := []*run.Record{tick(0, run.StatusCompleted), tick(2, run.StatusCompleted), tick(4, run.StatusCompleted),
		tick(4, run.StatusCompleted),  // the same tick twice
		tick(12, run.StatusCompleted), // 6, 8 and 10 missed while no router ran
		tick(14, run.StatusFailed),
		{Skill: scheduledSkill, Status: run.StatusCompleted, Outputs: map[string]any{"scheduled_at": "soon"}}}
	got := CountSchedule(runs, 2*time.Second, 20*time.Second)
	want := ScheduleTally{Runs: 7, Ticks: 4, Duplicates: 1, Failed: 1, Expected: 10, Missed: 3, First: at(0).UTC(), Last: at(12_000).UTC(), Bad: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedule tally (-want +got):\n%s", diff)
	}
	if got.OK() {
		t.Error("a tally with a tick run twice is OK")
	}
	gaps := CountSchedule(runs[:3], 2*time.Second, 20*time.Second)
	if !gaps.OK() || gaps.Missed != 0 {
		t.Errorf("three ticks in a row: %+v, OK %v", gaps, gaps.OK())
	}
	if none := CountSchedule(nil, 2*time.Second, time.Minute); none.OK() {
		t.Errorf("no tick in a minute is OK: %+v", none)
	}
}

// The report prints a line for each flow-control skill, and fails the run when
// one of them broke its promise.
func TestReportFlowLines(t *testing.T) {
	r := &Report{Keyed: KeyedTally{Runs: 150, Completed: 128, Cancelled: 22, MaxOverlap: 1, OverlapKey: "k0", Asked: 30, CancelledEnded: 22, CompletedFirst: 8},
		Debounce: DebounceTally{Triggers: 60, Runs: 15, Folded: 45}, Schedule: ScheduleTally{Ticks: 150, Expected: 160, Missed: 8}}
	var b strings.Builder
	r.Print(&b)
	for _, want := range []string{"max overlap within a key:          1   (chaos-keyed: concurrency limit 1 per key, 5 keys, key k0)",
		"cancels:                           30   (22 ended cancelled, 8 completed first",
		"chaos-debounced:                   60 triggers, 15 runs   (45 folded, 0 ran twice",
		"chaos-every ticks:                 150 of 160   (@every 2s", "catch_up latest"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	if !r.OK() {
		t.Error("the report is not OK")
	}
	r.Keyed.MaxOverlap = 2
	if r.OK() {
		t.Error("two runs of one key at once is OK")
	}
}
