package cli

import (
	"bytes"
	"strings"
	"testing"

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
