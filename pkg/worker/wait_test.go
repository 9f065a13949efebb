package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

const paidType = "com.example.order.paid"

// waiter greets, waits for its order's payment, and reports the amount paid.
func waiter(name string, timeout time.Duration, onError string) *skill.Skill {
	zero := 0
	return &skill.Skill{Name: name, Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", MaxRetries: &zero,
		Digest: strings.Repeat("7a", 32),
		Workflow: &skill.Workflow{
			Inputs: []skill.Input{{Name: "who"}, {Name: "order"}},
			Steps: []skill.Step{
				{ID: "first", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }}"}},
				{ID: "pay", OnError: onError, WaitForEvent: &skill.WaitForEvent{Type: paidType,
					Match:   `event.data.order == inputs.order && steps.first == "hi " + inputs.who`,
					Timeout: skill.Duration(timeout)}},
				{ID: "last", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }} again"}},
			},
			Outputs: []skill.Output{{Name: "paid", Value: "{{ pay }}"}},
		}}
}

// pay publishes a payment event as a trigger.
func (f *fixture) pay(id, order string, amount int) {
	f.t.Helper()
	m, err := bus.Event{ID: id, Source: "/shop", Type: paidType, Data: map[string]any{"order": order, "amount": amount}}.
		Msg(f.b.Subjects.Trigger(paidType))
	if err != nil {
		f.t.Fatal(err)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// parked waits until the execution is parked at step pay, waiting for an event.
func (f *fixture) parked(id string) {
	f.t.Helper()
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		if err != nil || p == nil || p.Kind != run.PausedWait || p.Step != "pay" {
			return false
		}
		_, err = f.runs.Get(f.ctx, events.RunWaitKey(id))
		return err == nil
	}, "execution %s not parked waiting for an event", id)
}

// triggersRouted waits until the routers have handled every trigger published.
func (f *fixture) triggersRouted() {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if err != nil {
		f.t.Fatal(err)
	}
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		l := s.ListConsumers(f.ctx)
		n, busy := 0, false
		for info := range l.Info() { // read to the end, or the lister's goroutine leaks
			n++
			busy = busy || info.NumPending > 0 || info.NumAckPending > 0
		}
		return l.Err() == nil && n > 0 && !busy
	}, "triggers not yet routed")
}

// timers is how many scheduled messages (a wait's timeout, a sleep's wake-up)
// EVENTS holds for an execution's step.
func (f *fixture) timers(id, step string) uint64 {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	subject := f.b.Subjects.WaitTimer(id, step)
	info, err := s.Info(f.ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		f.t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// startRouterNamed starts a router with its own durable consumers, so that it
// sees every trigger and every answer, as a router beside another group would.
func (f *fixture) startRouterNamed(durable string) {
	f.t.Helper()
	r, err := router.New(router.Config{Bus: f.b, Catalog: f.cat, Durable: durable, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := r.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { r.Stop(context.Background()) })
}

// A waiting run holds no worker slot; an event of the type that does not match
// leaves it waiting; the matching one resumes it with the event's data as the
// step's result, and the wait's records are gone.
func TestWaitForEventResumesWithTheMatchedData(t *testing.T) {
	t.Parallel()
	f := setup(t, waiter("waiter", time.Hour, ""), oneStep("quick", "echo", 0))
	f.startOneSlot("A")
	f.startRouter()
	id := f.jobInputs("w1", "waiter", `{"who":"ada","order":"o-1"}`)
	f.parked(id)
	q := f.job("q1", "quick")
	f.waitEvent(q, events.TypeExecutionCompleted)

	f.pay("pay-other", "o-2", 1)
	f.triggersRouted()
	if p, _, err := run.LoadPaused(f.ctx, f.runs, id); err != nil || p == nil {
		t.Fatalf("a payment of another order ended the wait (paused %v, err %v)", p, err)
	}
	if n := len(f.events(id, events.TypeWaitEnded)); n != 0 {
		t.Fatalf("%d wait.ended after a non-matching event, want 0", n)
	}

	f.pay("pay-1", "o-1", 250)
	done := f.waitEvent(id, events.TypeExecutionCompleted)
	paid, _ := done["outputs"].(map[string]any)["paid"].(map[string]any)
	if paid["order"] != "o-1" || paid["amount"] != 250.0 {
		t.Fatalf("output paid = %v, want the matched event's data {order: o-1, amount: 250}", done["outputs"])
	}
	if n := f.calls["greet"].Load(); n != 2 {
		t.Fatalf("greet called %d times, want 2", n)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		_, werr := f.runs.Get(f.ctx, events.RunWaitKey(id))
		return err == nil && p == nil && werr != nil
	}, "paused or wait record left")
}

// A wait that times out fails its step; on_error: continue goes on without the
// event, the step's result the timeout's error.
func TestWaitForEventTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		onError, want string
		greets        int64
	}{
		{"", events.TypeExecutionFailed, 1},
		{"continue", events.TypeExecutionCompleted, 2},
	} {
		t.Run("on_error "+tt.onError, func(t *testing.T) {
			t.Parallel()
			f := setup(t, waiter("waiter", time.Second, tt.onError))
			f.start()
			f.startRouter()
			start := time.Now()
			id := f.jobInputs("t1", "waiter", `{"who":"ada","order":"o-1"}`)
			f.parked(id)
			ev := f.waitEvent(id, tt.want)
			// The timeout, written when the run parked, is published at its
			// deadline (a whole second at least 1s after), and says so.
			if at := f.eventTimes(id, events.TypeWaitEnded); len(at) != 1 || at[0].Before(start.Add(time.Second)) || at[0].Nanosecond() != 0 {
				t.Fatalf("wait.ended at %v, want one at a whole second at least 1s after %v", at, start)
			}
			if tt.want == events.TypeExecutionFailed && !strings.Contains(ev["error"].(string), "no "+paidType+" event matched within 1s") {
				t.Fatalf("error %q does not say the wait timed out", ev["error"])
			}
			f.drained()
			if n := f.calls["greet"].Load(); n != tt.greets {
				t.Fatalf("greet called %d times, want %d", n, tt.greets)
			}
			// The payment after the timeout ends nothing.
			f.pay("late", "o-1", 1)
			f.triggersRouted()
			for _, e := range f.events(id, events.TypeWaitEnded) {
				if e["by"] != "timeout" {
					t.Fatalf("wait.ended by %v after the timeout", e["by"])
				}
			}
		})
	}
}

// The wait outlives the worker that parked it: a new worker resumes the run when
// the event comes, without running the first step again.
func TestWaitForEventSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	f := setup(t, waiter("waiter", time.Hour, ""))
	w := f.startOneSlot("A")
	f.startRouter()
	id := f.jobInputs("r1", "waiter", `{"who":"ada","order":"o-9"}`)
	f.parked(id)
	w.Stop(context.Background())
	f.startOneSlot("B")
	f.pay("pay-9", "o-9", 9)
	f.waitEvent(id, events.TypeExecutionCompleted)
	if n := f.calls["greet"].Load(); n != 2 {
		t.Fatalf("greet called %d times, want 2 (first before the wait, last after)", n)
	}
}

// Two routers that both see the matching event and both handle the wait's end
// resume the run once.
func TestWaitForEventTwoRoutersResumeOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, waiter("waiter", time.Hour, ""))
	f.start()
	f.startRouterNamed("r1")
	f.startRouterNamed("r2")
	id := f.jobInputs("d1", "waiter", `{"who":"ada","order":"o-5"}`)
	f.parked(id)
	f.pay("pay-5", "o-5", 5)
	f.waitEvent(id, events.TypeExecutionCompleted)
	f.triggersRouted()
	f.drained()
	if n := len(f.events(id, events.TypeWaitEnded)); n != 1 {
		t.Fatalf("%d wait.ended, want 1", n)
	}
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d execution.completed, want 1", n)
	}
	if n := f.calls["greet"].Load(); n != 2 {
		t.Fatalf("greet called %d times, want 2", n)
	}
}

// A run on a skill's debounced subject, which only routers publish, replays an
// event that came before: it ends no wait, even one its data matches. An event
// of the type on the ordinary subject still does.
func TestWaitForEventIgnoresDebouncedRuns(t *testing.T) {
	t.Parallel()
	f := setup(t, waiter("waiter", time.Hour, ""))
	f.start()
	f.startRouter()
	id := f.jobInputs("b1", "waiter", `{"who":"ada","order":"o-3"}`)
	f.parked(id)

	m, err := bus.Event{ID: "replayed", Source: events.SourceDebounced + "waiter", Type: paidType,
		Data: map[string]any{"order": "o-3", "amount": 3}}.Msg(f.b.Subjects.TriggerDebounced("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.triggersRouted()
	if n := len(f.events(id, events.TypeWaitEnded)); n != 0 {
		t.Fatalf("%d wait.ended after a debounced run, want 0", n)
	}
	if p, _, err := run.LoadPaused(f.ctx, f.runs, id); err != nil || p == nil {
		t.Fatalf("a debounced run ended the wait (paused %v, err %v)", p, err)
	}

	f.pay("pay-3", "o-3", 3)
	f.waitEvent(id, events.TypeExecutionCompleted)
}

// Cancelling a waiting run removes its wait record, so no router matches
// triggers for it, and its scheduled timeout; a record left anyway (a cancel that could not remove it) is
// removed by the router when a matching event's wait.ended finds the run no
// longer paused.
func TestWaitForEventCancelledRemovesTheWait(t *testing.T) {
	t.Parallel()
	f := setup(t, waiter("waiter", time.Hour, ""))
	f.start()
	f.startRouter()
	id := f.jobInputs("c1", "waiter", `{"who":"ada","order":"o-4"}`)
	f.parked(id)
	rec, err := f.runs.Get(f.ctx, events.RunWaitKey(id))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.timers(id, "pay"); n != 1 {
		t.Fatalf("%d timeouts scheduled for the waiting run, want 1", n)
	}
	if res := f.cancel(id); res.State != control.StatePaused {
		t.Fatalf("cancel state %q, want %q", res.State, control.StatePaused)
	}
	f.waitEvent(id, events.TypeExecutionCancelled)
	if _, err := f.runs.Get(f.ctx, events.RunWaitKey(id)); err == nil {
		t.Fatal("the cancelled run's wait record is still there")
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.timers(id, "pay") == 0 },
		"the cancelled run's timeout is still scheduled")
	f.pay("pay-4", "o-4", 4)
	f.triggersRouted()
	if n := len(f.events(id, events.TypeWaitEnded)); n != 0 {
		t.Fatalf("%d wait.ended for a cancelled run, want 0", n)
	}

	// A record left behind: the next matching event's wait.ended removes it.
	if _, err := f.runs.Put(f.ctx, events.RunWaitKey(id), rec.Value()); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		f.pay(fmt.Sprintf("pay-4-%d", time.Now().UnixNano()), "o-4", 4)
		f.triggersRouted()
		_, err := f.runs.Get(f.ctx, events.RunWaitKey(id))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, "the left wait record of a cancelled run not removed")
}

// waiterMatching is waiter with its own match.
func waiterMatching(name, match string) *skill.Skill {
	s := waiter(name, time.Hour, "")
	s.Workflow.Steps[1].WaitForEvent.Match = match
	return s
}

// The wait record keeps only what the match reads of the run: the input it
// selects, not the run's other inputs nor the results it does not name.
func TestWaitForEventKeepsOnlyWhatTheMatchReads(t *testing.T) {
	t.Parallel()
	f := setup(t, waiterMatching("waiter", `event.data.order == inputs.order`))
	f.start()
	f.startRouter()
	id := f.jobInputs("k1", "waiter", `{"who":"`+strings.Repeat("a", 8<<10)+`","order":"o-7"}`)
	f.parked(id)
	e, err := f.runs.Get(f.ctx, events.RunWaitKey(id))
	if err != nil {
		t.Fatal(err)
	}
	var rec run.Wait
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if string(rec.Inputs) != `{"order":"o-7"}` || rec.Steps != nil {
		t.Fatalf("wait record keeps inputs %s and steps %v, want only {\"order\":\"o-7\"}", rec.Inputs, rec.Steps)
	}
	if len(e.Value()) > 1<<10 {
		t.Fatalf("wait record is %d bytes, want under 1 KiB", len(e.Value()))
	}
	f.pay("pay-7", "o-7", 7)
	f.waitEvent(id, events.TypeExecutionCompleted)
}

// A match that reads more of the run than a wait may keep fails its step at
// once, saying why, rather than retrying a record the server refuses.
func TestWaitForEventReadingTooMuchFailsTheStep(t *testing.T) {
	t.Parallel()
	f := setup(t, waiterMatching("waiter", `event.data.order == inputs.order`))
	f.start()
	f.startRouter()
	id := f.jobInputs("big1", "waiter", `{"who":"ada","order":"`+strings.Repeat("o", workflow.MaxWaitBytes)+`"}`)
	ev := f.waitEvent(id, events.TypeExecutionFailed)
	msg, _ := ev["error"].(string)
	if !strings.Contains(msg, "wait_for_event") || !strings.Contains(msg, fmt.Sprintf("at most %d", workflow.MaxWaitBytes)) {
		t.Fatalf("error %q does not say the wait keeps too much", msg)
	}
	f.drained()
	if p, _, err := run.LoadPaused(f.ctx, f.runs, id); err != nil || p != nil {
		t.Fatalf("the run parked anyway (paused %v, err %v)", p, err)
	}
	if n := len(f.events(id, events.TypeExecutionRetrying)); n != 0 {
		t.Fatalf("%d retries, want 0", n)
	}
}
