package bus_test

import (
	"encoding/json"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// withLog embeds an outcome and shadows its log, as a publisher may to encode the
// log with the rest: it inherits the outcome's AppendJSON, which must not be used
// for it.
type withLog struct {
	events.ExecutionCompleted
	Log map[string]string `json:"log,omitempty"`
}

// An event's data is written as json.Marshal writes it, whether it encodes itself
// (the hot path's jobs and outcomes) or not.
func TestEventDataAsJSONMarshal(t *testing.T) {
	done := events.ExecutionCompleted{ExecutionID: "e1", ActivationID: "a1", Skill: "s<", Outputs: map[string]any{"b": 1.5, "a": []any{"x", nil}},
		Attempt: 1, Log: json.RawMessage(` [ {"step" : "one"} ] `)}
	for name, data := range map[string]any{
		"job": events.Job{ExecutionID: "e1", Skill: events.SkillRef{Name: "s", Pool: "p", ExecutionID: "e1"},
			Inputs: json.RawMessage(`{"a": "<b>"}`), Trigger: events.TriggerRef{Subject: "t"}},
		"completed": done,
		"failed":    events.ExecutionFailed{ExecutionID: "e1", Class: "fatal", Error: "boom", History: []events.Attempt{{Skill: "s"}}},
		"fallback":  events.ExecutionFallback{ExecutionID: "e1", Next: "t", DurationMS: 2.5},
		"embedding": withLog{ExecutionCompleted: done, Log: map[string]string{"step": "one"}},
		"other":     events.ExecutionStarted{ExecutionID: "e1", Skill: "s"},
	} {
		want, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, job := range []bool{false, true} {
			e := bus.Event{ID: "id", Source: "src", Type: events.TypeExecutionCompleted, Data: data}
			m, err := e.Msg("subj")
			if job {
				m, err = e.JobMsg("subj")
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := bus.DecodeFast(bus.FromNATS(m)) // a structured-mode event: the data is inside it
			if err != nil {
				t.Fatal(err)
			}
			got := b.Data
			if string(got) != string(want) {
				t.Errorf("%s (job %v): data\n%s\nwant (json.Marshal)\n%s", name, job, got, want)
			}
		}
	}
	if _, err := (bus.Event{Type: events.TypeExecutionCompleted, Data: events.ExecutionCompleted{Log: json.RawMessage(`{`)}}).Msg("subj"); err == nil {
		t.Error("an outcome with an invalid log was encoded")
	}
}
