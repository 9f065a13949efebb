package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// An execution's live progress overtakes its persisted events on the way to a
// follower (plain NATS against a JetStream consumer): fn still sees them in the
// order the worker stamped (events.ExtSeq), and the next execution's live events
// after the fallback that leads to it.
func TestFollowOrdersEventsBySequence(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	act, a, next := events.ActivationID("/t", "1"), events.ExecutionID("/t", "1", "a"), events.ExecutionID("/t", "1", "b")
	ev := func(exec, typ, id, seq string, data any) bus.Event {
		return bus.Event{ID: id, Source: "/t", Type: typ, Meta: bus.Meta{CorrelationID: act, ExecutionID: exec, Seq: seq}, Data: data}
	}
	persist := func(exec string, e bus.Event) {
		t.Helper()
		bt := b.Batch()
		bt.PublishEvent(b.Subjects.Event(exec, e.Type), e)
		if err := bt.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live := func(exec string, e bus.Event) {
		t.Helper()
		m, err := e.Msg(b.Subjects.Live(act, exec, e.Type))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.NC.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := b.NC.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// following waits until the follower reads exec's persisted events: it
	// subscribed to the live ones before that.
	following := func(exec string) {
		natstest.Eventually(t, 10*time.Second, func() bool {
			st, err := b.JS.Stream(ctx, b.StreamEvents())
			if err != nil {
				return false
			}
			for info := range st.ListConsumers(ctx).Info() {
				if info.Config.FilterSubject == b.Subjects.Events(exec) || (len(info.Config.FilterSubjects) == 1 && info.Config.FilterSubjects[0] == b.Subjects.Events(exec)) {
					return true
				}
			}
			return false
		}, "the follower does not read %s's events", exec)
	}
	persist(act, ev("", events.TypeRouteDecided, act+".decided", "", events.RouteDecided{ActivationID: act,
		Plan: events.Plan{Primary: events.SkillRef{Name: "a", ExecutionID: a}, FallbackChain: []events.SkillRef{{Name: "b", ExecutionID: next}}}}))

	var got []string
	done := make(chan *client.Result, 1)
	go func() {
		res, err := client.New(b).Follow(ctx, act, func(e *event.Event) {
			var d struct {
				Step string `json:"step_id"`
			}
			_ = json.Unmarshal(e.Data(), &d)
			got = append(got, strings.TrimSpace(events.Kind(e.Type())+" "+d.Step))
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	following(a)
	step := func(exec, id, seq string) bus.Event {
		return ev(exec, events.TypeStepCompleted, exec+"."+id, seq, map[string]any{"step_id": id})
	}
	live(a, ev(a, events.TypeExecutionStarted, a+".started", "7.1.1", map[string]any{}))
	live(a, step(a, "count", "7.1.3")) // overtakes the checkpoint of the step before it
	persist(a, step(a, "parse", "7.1.2"))
	live(next, ev(next, events.TypeExecutionStarted, next+".started", "9.1.1", map[string]any{})) // overtakes the fallback
	persist(a, ev(a, events.TypeExecutionFallback, a+".outcome", "7.1.4", events.ExecutionFallback{ExecutionID: a, Skill: "a", Next: "b", NextExecutionID: next}))
	following(next)
	persist(next, ev(next, events.TypeExecutionCompleted, next+".outcome", "9.1.2", events.ExecutionCompleted{ExecutionID: next, Skill: "b"}))
	var res *client.Result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("no result")
	}
	if res == nil || !res.Completed || res.ExecutionID != next {
		t.Fatalf("result %+v, want execution %s completed", res, next)
	}
	want := []string{"route.decided", "execution.started", "step.completed parse", "step.completed count", "execution.fallback", "execution.started", "execution.completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events in the order fn saw them (-want +got):\n%s", diff)
	}
}
