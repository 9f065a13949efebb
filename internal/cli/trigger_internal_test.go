package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/client"
)

func watchEvent(t *testing.T, typ string, data any) *event.Event {
	t.Helper()
	e := event.New()
	e.SetID(typ)
	e.SetSource("/t")
	e.SetType(typ)
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	return &e
}

// trigger --wait on a run whose repair was approved before it read the repair's
// events (a trigger sent again with the same id follows the earlier run from its
// start) must not say the run waits for an approval it already has.
func TestWatcherApprovedRepairIsNotWaiting(t *testing.T) {
	const repair = "3f2a9c1d0b7e00000000"
	fault := events.RepairFault{Kind: "reference", Name: "titel", Step: "post"}
	var out bytes.Buffer
	w := &watcher{out: &out}
	for _, e := range []*event.Event{
		watchEvent(t, events.TypeRepairRequested, events.RepairRequested{ExecutionID: "x", Skill: "s", RepairID: repair, Fault: fault, Error: "no field titel"}),
		watchEvent(t, events.TypeRepairProposed, events.RepairProposed{RepairID: repair, Skill: "s", By: "reference", Summary: "titel → title"}),
		watchEvent(t, events.TypeRepairSucceeded, events.RepairProgress{RepairID: repair, Skill: "s", Version: "1.0.1"}),
		watchEvent(t, events.TypeExecutionCompleted, events.ExecutionCompleted{ExecutionID: "x", Skill: "s"}),
	} {
		w.print(e)
	}
	if strings.Contains(out.String(), "waiting for approval") || strings.Contains(out.String(), "approve:") {
		t.Errorf("an approved repair printed as waiting for approval:\n%s", out.String())
	}
	for _, want := range []string{"repair 3f2a9c1d0b7e proposed by reference: titel → title", "repair 3f2a9c1d0b7e applied as version 1.0.1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A run that stays parked ends the follow with Result.Repairing: then it says
// what it waits for and how to answer.
func TestWatcherParkedRepairWaits(t *testing.T) {
	const repair = "3f2a9c1d0b7e00000000"
	fault := events.RepairFault{Kind: "reference", Name: "titel", Step: "post"}
	var out bytes.Buffer
	w := &watcher{out: &out}
	w.print(watchEvent(t, events.TypeRepairRequested, events.RepairRequested{ExecutionID: "x", Skill: "s", RepairID: repair, Fault: fault}))
	w.print(watchEvent(t, events.TypeRepairProposed, events.RepairProposed{RepairID: repair, Skill: "s", By: "reference", Summary: "titel → title"}))
	w.waiting(&client.Repairing{ExecutionID: "x", Skill: "s", RepairID: repair, Fault: fault, Summary: "titel → title"})
	for _, want := range []string{
		`⏸ repairing: reference fault "titel" in step post, repair 3f2a9c1d0b7e waiting for approval`,
		"proposed by reference: titel → title",
		"approve: skillbus repair approve 3f2a9c1d0b7e",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A cancelled run says who cancelled it and why.
func TestWatcherPrintsACancel(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	w.print(watchEvent(t, events.TypeExecutionCancelled, events.ExecutionCancelled{ExecutionID: "x", Skill: "remind", By: "cancel_on", Reason: "cancel_on com.example.order.paid: event 7 from /shop matched"}))
	if want := "✘ remind cancelled by cancel_on: cancel_on com.example.order.paid: event 7 from /shop matched\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// A run that parks on a sleep says until when; once the sleep ends it says how,
// and the resumed run reads as one: resumed, its earlier steps not repeated.
func TestWatcherSleepAndResume(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	due := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	timer := watchEvent(t, events.TypeWaitEnded, events.WaitEnded{ExecutionID: "x", StepID: "nap", Answer: events.Answer{Approved: true, By: "sleep"}})
	timer.SetTime(due)
	client.MarkScheduled(timer, due.Add(-time.Hour))
	for _, e := range []*event.Event{
		watchEvent(t, events.TypeExecutionStarted, events.ExecutionStarted{ExecutionID: "x", Skill: "napper", Attempt: 1}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "first", DurationMS: 1}),
		timer,
		watchEvent(t, events.TypeWaitEnded, events.WaitEnded{ExecutionID: "x", StepID: "nap", Answer: events.Answer{Approved: true, By: "sleep"}}),
		watchEvent(t, events.TypeExecutionStarted, events.ExecutionStarted{ExecutionID: "x", Skill: "napper", Attempt: 1}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "first", DurationMS: 1, Resumed: true}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "nap"}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "last", DurationMS: 1}),
	} {
		w.print(e)
	}
	want := `  napper started (attempt 1), execution x
    ✓ first 1.0ms
  ⏸ step nap sleeps until 2030-01-02T03:04:05Z
  ▶ step nap woke up
  ▶ napper resumed
    ✓ nap 0.0ms
    ✓ last 1.0ms
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// A wait_for_event's park and its three ends.
func TestWatcherWaitForEvent(t *testing.T) {
	due := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var out bytes.Buffer
	w := &watcher{out: &out}
	timer := watchEvent(t, events.TypeWaitEnded, events.WaitEnded{ExecutionID: "x", StepID: "pay", EventType: "com.example.paid",
		Answer: events.Answer{By: "timeout", Reason: "no com.example.paid event matched within 1h0m0s"}})
	timer.SetTime(due)
	client.MarkScheduled(timer, due.Add(-time.Hour))
	w.print(timer)
	if want := "  ⏸ step pay waits for event com.example.paid until 2030-01-02T03:04:05Z\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	for _, tt := range []struct {
		a    events.Answer
		want string
	}{
		{events.Answer{Approved: true, By: "event", Reason: "matched com.example.paid 7 from /shop"}, "  ▶ step pay ended its wait: matched com.example.paid 7 from /shop\n"},
		{events.Answer{By: "timeout", Reason: "no com.example.paid event matched within 1h0m0s"}, "  ▶ step pay timed out: no com.example.paid event matched within 1h0m0s\n"},
	} {
		out.Reset()
		w.print(watchEvent(t, events.TypeWaitEnded, events.WaitEnded{ExecutionID: "x", StepID: "pay", EventType: "com.example.paid", Answer: tt.a}))
		if out.String() != tt.want {
			t.Errorf("got %q, want %q", out.String(), tt.want)
		}
	}
	// --json prints events: the scheduled timeout is not one (yet).
	out.Reset()
	(&watcher{out: &out, asJSON: true}).print(timer)
	if out.Len() != 0 {
		t.Errorf("--json printed the scheduled timeout: %s", out.String())
	}
}

// A step run again on a retry (a compute step before the one that failed) is
// done and printed once: its second start is not printed without its end.
func TestWatcherRetryDoesNotRepeatADoneStep(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	for _, e := range []*event.Event{
		watchEvent(t, events.TypeExecutionStarted, events.ExecutionStarted{ExecutionID: "x", Skill: "greet", Attempt: 1}),
		watchEvent(t, events.TypeStepStarted, events.StepStarted{ExecutionID: "x", StepID: "compose", StepType: "compute"}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "compose", DurationMS: 1}),
		watchEvent(t, events.TypeStepStarted, events.StepStarted{ExecutionID: "x", StepID: "send", StepType: "tool", Tool: "http"}),
		watchEvent(t, events.TypeExecutionStarted, events.ExecutionStarted{ExecutionID: "x", Skill: "greet", Attempt: 2}),
		watchEvent(t, events.TypeStepStarted, events.StepStarted{ExecutionID: "x", StepID: "compose", StepType: "compute"}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "compose", DurationMS: 1}),
		watchEvent(t, events.TypeStepStarted, events.StepStarted{ExecutionID: "x", StepID: "send", StepType: "tool", Tool: "http"}),
		watchEvent(t, events.TypeStepCompleted, events.StepCompleted{ExecutionID: "x", StepID: "send", DurationMS: 2}),
	} {
		w.print(e)
	}
	want := `  greet started (attempt 1), execution x
    ▸ compose (compute)
    ✓ compose 1.0ms
    ▸ send (tool http)
  greet started (attempt 2)
    ▸ send (tool http)
    ✓ send 2.0ms
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// A retryable failure after its retries ran out says how many attempts it had:
// "retryable" alone reads as if another attempt were coming.
func TestWatcherRetriesRanOut(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	w.print(watchEvent(t, events.TypeExecutionFailed, events.ExecutionFailed{ExecutionID: "x", Skill: "greet", Class: "retryable", Error: "503", Attempt: 4}))
	w.print(watchEvent(t, events.TypeExecutionFailed, events.ExecutionFailed{ExecutionID: "y", Skill: "greet", Class: "fatal", Error: "bad", Attempt: 1}))
	if want := "✘ greet failed (retryable, after 4 attempts): 503\n✘ greet failed (fatal): bad\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// An event no skill takes that cancelled runs by their cancel_on says so, and
// what else it did, not only that it was not routed.
func TestWatcherPrintsRunsAnEventCancelled(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	w.print(watchEvent(t, events.TypeRouteUnmatched, events.RouteUnmatched{Code: events.UnmatchedNoSkill, Reason: "no skill matches", Cancelled: []string{"e1", "e2"}}))
	w.print(watchEvent(t, events.TypeRouteUnmatched, events.RouteUnmatched{Code: events.UnmatchedNoSkill, Reason: "no skill matches", EndedWaits: []string{"w1"}, Cancelled: []string{"e3"}}))
	want := "▶ no skill takes it, but it cancelled 2 runs: e1, e2\n▶ no skill takes it, but it ended the wait of 1 run: w1; it cancelled 1 run: e3\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// A retry says which attempt failed and which comes next, out of how many.
func TestWatcherRetryLine(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{out: &out}
	w.print(watchEvent(t, events.TypeExecutionRetrying, events.ExecutionRetrying{ExecutionID: "x", Skill: "s", Attempt: 1, MaxRetries: 1, DelayMS: 185, Error: "http 503"}))
	if want := "  ↻ attempt 1 of 2 failed; attempt 2 in 185ms: http 503\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
