package worker

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// The completed outcome encodes itself as json.Marshal encodes it, byte for byte,
// with a log or without, and fails where json.Marshal fails; an event of it is
// encoded that way.
func TestCompletedEncodesAsMarshal(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 22, 0, 0, 5, time.UTC)
	log := &workflow.Log{ExecutionID: "e1", Skill: "s", Status: workflow.RunCompleted, Started: t0, Finished: t0,
		Steps: []workflow.StepLog{{ID: "a", Kind: "tool", Status: workflow.StatusCompleted, Started: t0, Finished: t0, DurationMS: 0.5, Result: `{"x":"<y>"}`}}}
	base := events.ExecutionCompleted{ExecutionID: "e1", ActivationID: "a1", Skill: "s", Version: "1", Outputs: map[string]any{"n": 1.0, "s": "<&>"},
		DurationMS: 1.25, Attempt: 2, Worker: "w", RepairID: "r1", Digest: "d"}
	for name, c := range map[string]completed{
		"log":         {ExecutionCompleted: base, Log: log},
		"no log":      {ExecutionCompleted: base},
		"no outputs":  {ExecutionCompleted: events.ExecutionCompleted{ExecutionID: "e1"}, Log: &workflow.Log{}},
		"shadowed":    {ExecutionCompleted: events.ExecutionCompleted{ExecutionID: "e1", Log: json.RawMessage(`{"old":1}`)}, Log: log},
		"shadow only": {ExecutionCompleted: events.ExecutionCompleted{ExecutionID: "e1", Log: json.RawMessage(`{"old":1}`)}},
	} {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.AppendEventData([]byte("x"))
		if err != nil || string(got) != "x"+string(want) {
			t.Errorf("%s:\n got %s (%v)\nwant x%s", name, got, err, want)
		}
		m, err := bus.Event{ID: "e1.outcome", Source: "/w", Type: events.TypeExecutionCompleted, Data: c}.Msg("subj")
		if err != nil {
			t.Fatal(err)
		}
		if e, err := bus.DecodeFast(bus.FromNATS(m)); err != nil || string(e.Data) != string(want) {
			t.Errorf("%s: the event %s (%v)", name, m.Data, err)
		} else if n := c.EventDataSize(); n < len(want) {
			t.Errorf("%s: EventDataSize %d, but the data is %d bytes: its buffer is made twice", name, n, len(want))
		}
	}
	for _, c := range []completed{
		{ExecutionCompleted: events.ExecutionCompleted{DurationMS: math.Inf(1)}},
		{ExecutionCompleted: events.ExecutionCompleted{ExecutionID: "e1"}, Log: &workflow.Log{DurationMS: math.NaN()}},
	} {
		if _, err := json.Marshal(c); err == nil {
			t.Fatal("json.Marshal took it")
		}
		if got, err := c.AppendEventData([]byte("x")); err == nil || string(got) != "x" {
			t.Errorf("AppendEventData: %q, %v; want an error and b as it was", got, err)
		}
	}
}
