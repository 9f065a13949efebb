package router_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

func reminder(timeout time.Duration) *skill.Skill {
	return &skill.Skill{Name: "remind", Description: "reminds a customer of an unpaid order", Kind: skill.KindWorkflow, Digest: "rem1nd0123456789",
		Triggers: []string{"com.example.order.created"},
		CancelOn: []skill.CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: skill.Duration(timeout)}}}
}

func (f *fixture) orderEvent(id, typ string, order int) {
	f.t.Helper()
	f.publish("skillbus.trigger."+typ, ce(id, typ), fmt.Sprintf(`{"order": %d}`, order))
}

// cancelOf is the cancel request of the execution of remind for the trigger id,
// nil when there is none.
func (f *fixture) cancelOf(id string) *run.Cancel {
	f.t.Helper()
	runs, err := f.b.KV(f.ctx, f.b.BucketRuns())
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := run.LoadCancel(f.ctx, runs, events.ExecutionID("/test", id, "remind"))
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// An event of a cancel_on type cancels the run whose trigger its match pairs it
// with, and no other.
func TestCancelOnCancelsTheMatchingRun(t *testing.T) {
	t.Parallel()
	f := setup(t, reminder(time.Hour))
	f.orderEvent("c1", "com.example.order.created", 1)
	f.orderEvent("c2", "com.example.order.created", 2)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "c1"), events.TypeRouteDecided, &rd)
	f.event(events.ActivationID("/test", "c2"), events.TypeRouteDecided, &rd)
	f.settled()
	f.orderEvent("p1", "com.example.order.paid", 1)
	natstest.Eventually(t, 10*time.Second, func() bool { return f.cancelOf("c1") != nil }, "run of order 1 not cancelled")
	f.settled()
	c := f.cancelOf("c1")
	if c.By != "cancel_on" || !strings.Contains(c.Reason, "com.example.order.paid: event p1 from /test matched event.data.order == trigger.data.order") {
		t.Fatalf("cancel of order 1: %+v", c)
	}
	if c := f.cancelOf("c2"); c != nil {
		t.Fatalf("the run of order 2 was cancelled too: %+v", c)
	}
	// No skill takes the event, and its route.unmatched says what it did: a
	// sender waiting on it hears it cancelled a run, not only that it was not
	// routed. The same event again cancels nothing more.
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "p1"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedNoSkill || len(u.Cancelled) != 1 || u.Cancelled[0] != events.ExecutionID("/test", "c1", "remind") {
		t.Errorf("route.unmatched of the cancelling event: %+v", u)
	}
	f.orderEvent("p1-again", "com.example.order.paid", 1)
	var again events.RouteUnmatched
	f.event(events.ActivationID("/test", "p1-again"), events.TypeRouteUnmatched, &again)
	if again.Code != events.UnmatchedNoSkill || len(again.Cancelled) != 0 {
		t.Errorf("the event again: %+v, want it to say it cancelled nothing", again)
	}
}

// After the rule's timeout an event no longer cancels the run.
func TestCancelOnTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, reminder(time.Second))
	f.orderEvent("t1", "com.example.order.created", 1)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "t1"), events.TypeRouteDecided, &rd)
	runs, err := f.b.KV(f.ctx, f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	p, err := flow.CompileMatch(reminder(0).CancelOn[0].Match)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := p.Index().TriggerToken(&flow.Event{Data: map[string]any{"order": 1.0}})
	key := events.RunCancelOnKey("remind", "com.example.order.paid", tok, events.ExecutionID("/test", "t1", "remind"))
	if _, err := runs.Get(f.ctx, key); err != nil {
		t.Fatalf("the run is not indexed for cancel_on: %v", err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := runs.Get(f.ctx, key)
		return err != nil
	}, "the run's cancel_on key outlived its timeout")
	f.orderEvent("t2", "com.example.order.paid", 1)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "t2"), events.TypeRouteUnmatched, &u)
	f.settled()
	if c := f.cancelOf("t1"); c != nil {
		t.Fatalf("cancelled after the timeout: %+v", c)
	}
}

// An event cancels the runs of triggers published before it, not after: kept
// for the runs indexed after it is routed, it does not cancel a run whose
// trigger came later.
func TestCancelOnEventBeforeTheTrigger(t *testing.T) {
	t.Parallel()
	f := setup(t, reminder(time.Hour))
	f.orderEvent("b1", "com.example.order.paid", 1)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "b1"), events.TypeRouteUnmatched, &u)
	f.settled()
	f.orderEvent("b2", "com.example.order.created", 1)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "b2"), events.TypeRouteDecided, &rd)
	f.settled()
	if c := f.cancelOf("b2"); c != nil {
		t.Fatalf("cancelled by an event published before its trigger: %+v", c)
	}
}

// A rule whose match compares nothing for equality files every run under one
// token: an event still finds and cancels the runs its match is true of.
func TestCancelOnUnindexedMatch(t *testing.T) {
	t.Parallel()
	s := reminder(time.Hour)
	s.CancelOn[0].Match = "event.data.order >= trigger.data.order"
	f := setup(t, s)
	f.orderEvent("u1", "com.example.order.created", 1)
	f.orderEvent("u2", "com.example.order.created", 5)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "u1"), events.TypeRouteDecided, &rd)
	f.event(events.ActivationID("/test", "u2"), events.TypeRouteDecided, &rd)
	f.settled()
	f.orderEvent("u3", "com.example.order.paid", 3)
	natstest.Eventually(t, 10*time.Second, func() bool { return f.cancelOf("u1") != nil }, "run of order 1 not cancelled")
	f.settled()
	if c := f.cancelOf("u2"); c != nil {
		t.Fatalf("the run of order 5 was cancelled too: %+v", c)
	}
}

// An event sent while a debounced burst is pending cancels the burst's run,
// which is published when the burst is due, after the event: the run stands
// where its last trigger does. A burst of another key is not cancelled.
func TestCancelOnCancelsAPendingDebouncedRun(t *testing.T) {
	t.Parallel()
	s := reminder(time.Hour)
	s.Debounce = &skill.Debounce{Key: "data.order", Period: skill.Duration(2 * time.Second), Timeout: skill.Duration(20 * time.Second)}
	f := setup(t, s)
	f.orderEvent("d1", "com.example.order.created", 1)
	f.orderEvent("d2", "com.example.order.created", 2)
	var u events.RouteUnmatched
	for _, id := range []string{"d1", "d2"} {
		f.event(events.ActivationID("/test", id), events.TypeRouteUnmatched, &u)
		if u.Code != events.UnmatchedDebounced {
			t.Fatalf("%s: %+v, want debounced", id, u)
		}
	}
	f.orderEvent("p1", "com.example.order.paid", 1)
	f.event(events.ActivationID("/test", "p1"), events.TypeRouteUnmatched, &u)
	runs, err := f.b.KV(f.ctx, f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	src := router.DebounceSource("remind")
	cancelled := func(id string) *run.Cancel {
		c, err := run.LoadCancel(f.ctx, runs, events.ExecutionID(src, events.ActivationID("/test", id), "remind"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return cancelled("d1") != nil }, "the pending burst of order 1 was not cancelled")
	var rd events.RouteDecided
	f.event(events.ActivationID(src, events.ActivationID("/test", "d2")), events.TypeRouteDecided, &rd)
	f.quiet()
	if c := cancelled("d2"); c != nil {
		t.Fatalf("the burst of order 2 was cancelled too: %+v", c)
	}
	if c := cancelled("d1"); c.By != "cancel_on" || !strings.Contains(c.Reason, "event p1 from /test") {
		t.Fatalf("cancel of order 1's burst: %+v", c)
	}
}
