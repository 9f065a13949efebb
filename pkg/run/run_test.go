package run_test

import (
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// An outcome reads the same from the structured-mode event this version writes and
// from the binary-mode one earlier versions wrote, which a stream may still hold.
func TestFromMsgReadsBothModes(t *testing.T) {
	t.Parallel()
	data := events.ExecutionCompleted{ExecutionID: "e1", ActivationID: "a1", Skill: "s", Version: "1", Outputs: map[string]any{"n": 1.0}, Attempt: 2, Worker: "w"}
	structured, err := bus.Event{ID: run.OutcomeID("e1"), Source: "/w", Type: events.TypeExecutionCompleted, Data: data}.Msg("skillbus.events.e1.execution.completed")
	if err != nil {
		t.Fatal(err)
	}
	e := event.New()
	e.SetID(run.OutcomeID("e1"))
	e.SetSource("/w")
	e.SetType(events.TypeExecutionCompleted)
	if err := e.SetData("application/json", data); err != nil {
		t.Fatal(err)
	}
	binary := bus.Encode("skillbus.events.e1.execution.completed", run.OutcomeID("e1"), &e)
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for name, m := range map[string]*nats.Msg{"structured": structured, "binary": binary} {
		r, err := run.FromMsg(m.Header, m.Data, at)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Status != run.StatusCompleted || r.ExecutionID != "e1" || r.ActivationID != "a1" || r.Outputs["n"] != 1.0 || r.Attempt != 2 || !r.FinishedAt.Equal(at) {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	if _, err := run.FromMsg(nil, []byte("not an event"), at); err == nil {
		t.Fatal("a message that is no event read as an outcome")
	}
}
