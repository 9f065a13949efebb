package service

import (
	"encoding/json"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/repair"
)

// What a sender chose of a run includes the events its waits matched: whoever may
// publish the type waited for chose their keys, as the trigger's sender chose its
// data's.
func TestSendersIncludeWhatAWaitMatched(t *testing.T) {
	t.Parallel()
	j := events.Job{
		Inputs:  json.RawMessage(`{"order":"A-1"}`),
		Trigger: events.TriggerRef{ID: "t1", Source: "/shop", Type: "com.example.order"},
		Answers: map[string]events.Answer{
			"reply": {Approved: true, By: "event", Data: json.RawMessage(`{"payload":"{\"t\\u0069tel\":\"x\"}"}`)},
			"ok":    {Approved: true, By: "ada", Reason: "ship it with the zorblax flag"},
		},
	}
	var c repair.Chosen
	senders(&j, c.AddData, c.AddText)
	for _, n := range []string{"order", "titel", "zorblax"} {
		if !c.Has(n) {
			t.Errorf("%s, which a sender chose, is not among the chosen", n)
		}
	}
	if c.Has("quux") {
		t.Error("quux, which nobody sent, is among the chosen")
	}
}
