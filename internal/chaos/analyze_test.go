package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/skillbus/skillbus/pkg/run"
)

func TestParseEffects(t *testing.T) {
	in := strings.Join([]string{
		"B e1 work 1 w1.2 1700000000.000001",
		"E e1 work 1 w1.2 1700000000.000001 1700000000.250000",
		"B e2 work 1 w1.2 1700000001.5",
		"", // a blank line is nothing
	}, "\n")
	done, begun, err := ParseEffects("chaos-once", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Effect{{Skill: "chaos-once", Execution: "e1", Step: "work", Attempt: 1, Worker: "w1.2",
		Start: time.Unix(1700000000, 1000), End: time.Unix(1700000000, 250000000)}}
	if diff := cmp.Diff(want, done); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	if begun != 2 {
		t.Errorf("begun = %d, want 2", begun)
	}
	for _, bad := range []string{"X e1 work 1 100 1", "E e1 work one 100 1 2", "E e1 work 1 100 1"} {
		if _, _, err := ParseEffects("s", strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseEffects(%q) = %v, want an error naming line 1", bad, err)
		}
	}
}

func at(ms int) time.Time { return time.Unix(1700000000, 0).Add(time.Duration(ms) * time.Millisecond) }

func TestRepeats(t *testing.T) {
	eff := func(exec string, worker, from, to int) Effect {
		return Effect{Execution: exec, Step: "s", Worker: fmt.Sprintf("w%d.1", worker), Start: at(from), End: at(to)}
	}
	kill := func(sent, exited int) Kill { return Kill{Sent: at(sent), Exited: at(exited)} }
	kills := Kills{"w1.1": kill(150, 152), "w3.1": kill(10_000, 10_001), "w4.1": kill(40, 60), "w5.1": kill(40, 45)}
	got := Repeats([]Effect{
		eff("once", 2, 0, 100),
		eff("killed", 1, 100, 200), eff("killed", 2, 6000, 6100), // worker 1 died mid-step
		eff("unexplained", 2, 0, 100), eff("unexplained", 2, 6000, 6100), // nobody died: a bug
		eff("late", 3, 0, 100), eff("late", 2, 6000, 6100), // its worker died long after: a bug
		eff("overlap", 1, 100, 200), eff("overlap", 2, 150, 300),
		// The signal was sent at 40 and the exit seen at 60: a step its worker
		// began at 50 was still being killed.
		eff("while dying", 4, 50, 55), eff("while dying", 2, 6000, 6100),
		// Dead at 45 for sure: a step that began at 50 on it is not its.
		eff("after death", 5, 50, 55), eff("after death", 2, 6000, 6100),
	}, kills, 2*time.Second)
	type verdict struct {
		Exec               string
		Killed, Concurrent bool
	}
	var v []verdict
	for _, r := range got {
		v = append(v, verdict{r.Execution, r.Killed, r.Concurrent})
	}
	want := []verdict{{"killed", true, false}, {"overlap", true, true}, {"unexplained", false, false}, {"late", false, false},
		{"while dying", true, false}, {"after death", false, false}}
	less := func(a, b verdict) bool { return a.Exec < b.Exec }
	if diff := cmp.Diff(want, v, cmpopts.SortSlices(less)); diff != "" {
		t.Errorf("repeats (-want +got):\n%s", diff)
	}
}

func TestMaxConcurrent(t *testing.T) {
	e := func(from, to int) Effect { return Effect{Start: at(from), End: at(to)} }
	for _, tc := range []struct {
		name string
		in   []Effect
		want int
	}{
		{"none", nil, 0},
		{"back to back", []Effect{e(0, 10), e(10, 20), e(20, 30)}, 1},
		{"two", []Effect{e(0, 10), e(5, 15), e(12, 20)}, 2},
		{"three", []Effect{e(0, 100), e(5, 15), e(12, 20), e(30, 40)}, 3},
	} {
		if got := MaxConcurrent(tc.in); got != tc.want {
			t.Errorf("%s: MaxConcurrent = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestOutcomesCount(t *testing.T) {
	o := Outcomes{}
	o.Add(&run.Record{ExecutionID: "a", Status: run.StatusCompleted})
	o.Add(&run.Record{ExecutionID: "p", Status: run.StatusFallback, Next: "s"})
	o.Add(&run.Record{ExecutionID: "s", Status: run.StatusCompleted})
	o.Add(&run.Record{ExecutionID: "big", Status: run.StatusFailed, Class: "fatal", Error: "result_too_large: the message ..."})
	o.Add(&run.Record{ExecutionID: "dup", Status: run.StatusCompleted})
	o.Add(&run.Record{ExecutionID: "dup", Status: run.StatusFailed, Class: "fatal", Error: "boom"})
	o.Add(&run.Record{ExecutionID: "p2", Status: run.StatusFallback, Next: "s2"}) // s2 never ended
	got := o.Count([]Trigger{{ID: "1", Execution: "a"}, {ID: "2", Execution: "p"}, {ID: "3", Execution: "big"},
		{ID: "4", Execution: "dup"}, {ID: "5", Execution: "p2"}, {ID: "6", Execution: "never"}})
	want := Tally{Completed: 3, Failed: 1, Lost: 2, Duplicates: 1, Conflicting: []string{"dup"}, LostIDs: []string{"5", "6"},
		Failures: map[string]int{"fatal result_too_large": 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tally (-want +got):\n%s", diff)
	}
}
