package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A confirmation's timeout waits in EVENTS as a scheduled message from the moment
// the run pauses. A follower must not read it as the answer: only when it fires is
// the confirmation denied.
func TestFollowIgnoresScheduledTimeouts(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	act, exec := events.ActivationID("/t", "1"), events.ExecutionID("/t", "1", "s")
	bt := b.Batch()
	bt.PublishEvent(b.Subjects.Event(act, events.TypeRouteDecided), bus.Event{ID: act + ".route.decided", Source: "/t", Type: events.TypeRouteDecided,
		Data: events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "s", ExecutionID: exec}}}})
	timeout, err := bus.Event{ID: exec + ".confirmation.timeout.step", Source: "/t", Type: events.TypeConfirmationRecorded,
		Data: events.ConfirmationRecorded{ExecutionID: exec, StepID: "step", Answer: events.Answer{By: "timeout"}}}.
		Msg(b.Subjects.ConfirmationTimeout(exec, "step"))
	if err != nil {
		t.Fatal(err)
	}
	bt.Publish(timeout, jetstream.WithScheduleAt(time.Now().Add(time.Hour)), jetstream.WithScheduleTarget(b.Subjects.Event(exec, events.TypeConfirmationRecorded)))
	bt.PublishEvent(b.Subjects.Event(exec, events.TypeExecutionCompleted), bus.Event{ID: exec + ".outcome", Source: "/t", Type: events.TypeExecutionCompleted,
		Data: events.ExecutionCompleted{ExecutionID: exec, Skill: "s", Outputs: map[string]any{"ok": true}}})
	if err := bt.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []string
	res, err := client.New(b).Follow(ctx, act, func(e *event.Event) { seen = append(seen, e.Type()) })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Completed {
		t.Fatalf("result %+v", res)
	}
	for _, typ := range seen {
		if typ == events.TypeConfirmationRecorded {
			t.Fatalf("the scheduled timeout was reported as an answer: %v", seen)
		}
	}
}
