package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Every broken wait_for_event is reported at its file:line:col, and the one
// written right loads with its match, type and timeout.
func TestWaitForEventValidation(t *testing.T) {
	t.Parallel()
	const path = "bad/yaml/waits.yaml"
	want := []diag{
		{path + ":7:21", SeverityError, "wait_for_event needs type"},
		{path + ":11:33", SeverityError, "steps[1].wait_for_event.match is not a valid expression: Syntax error"},
		{path + ":13:28", SeverityError, `wait_for_event.type "com.example.*" is not a CloudEvent type`},
		{path + ":15:60", SeverityError, "a match must be true or false"},
		{path + ":17:61", SeverityError, "wait_for_event.timeout must be positive"},
		{path + ":19:52", SeverityError, "unknown field steps[5].wait_for_event.mach"},
		{path + ":20:5", SeverityError, "step looped waits for an event; loop, args, timeout and cache do not apply"},
		{path + ":23:5", SeverityError, "step both has tool and wait_for_event; a step does one of them"},
		// The inputs and steps a match names are checked as a template's are:
		// misspelt, the wait would never match and would time out.
		{path + ":29:87", SeverityError, "unknown input ordr; did you mean order?"},
		{path + ":33:37", SeverityError, "unknown step fien; did you mean fine?"},
		{path + ":33:71", SeverityError, "steps.misspelt_step is the result of this step, which is not available yet"},
		{path + ":35:70", SeverityError, "step last (line 36) runs after this wait"},
		{path + ":35:105", SeverityError, "step last (line 36) runs after this wait"},
		{path + ":39:93", SeverityError, "steps[13].wait_for_event.match is not a valid expression: Syntax error: mismatched input 'and' expecting <EOF>"},
		{path + ":41:112", SeverityError, "steps[14].wait_for_event.match is not a valid expression: Syntax error: mismatched input '<EOF>'"},
	}
	_, ds := LoadOptions{}.LoadPath(fixture(path))
	checkFiles(t, ds)
	if diff := cmp.Diff(want, project(ds, fixtures, want), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
	}
	hints := map[int]string{ // by line
		29: "declared inputs: order",
		35: "a wait reads the steps before it; move step last before reads_later",
		// and, or and not written as words; the words of a string or a field are not.
		39: "CEL writes and/or/not as &&, ||, !",
		41: "CEL over event (id, type, source, subject, time, data), inputs and steps; see docs/authoring.md, Sleeps and waits",
	}
	for _, d := range ds {
		if h, ok := hints[d.Line]; ok && d.Hint != h {
			t.Errorf("line %d: hint %q, want %q", d.Line, d.Hint, h)
		}
	}
}

func TestWaitForEventLoads(t *testing.T) {
	t.Parallel()
	src := `name: waits
description: Waits for the payment.
inputs:
  - name: order
steps:
  - id: pay
    wait_for_event: {type: com.example.order.paid, match: "event.data.order == inputs.order", timeout: 1h}
  - id: later
    wait_for_event: {type: com.example.order.shipped}
`
	s, ds := ParseWorkflow("waits.yaml", []byte(src))
	if ds.HasErrors() || s == nil {
		t.Fatalf("errors: %v", ds)
	}
	got := []*WaitForEvent{s.Workflow.Steps[0].WaitForEvent, s.Workflow.Steps[1].WaitForEvent}
	want := []*WaitForEvent{
		{Type: "com.example.order.paid", Match: "event.data.order == inputs.order", Timeout: Duration(time.Hour)},
		{Type: "com.example.order.shipped", Timeout: Duration(DefaultWaitTimeout)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wait_for_event (-want +got):\n%s", diff)
	}
}

// A wait or a sleep longer than the events stream keeps events by default is a
// warning that says what happens instead, and how to give it that long: the wait
// ends at the retention, and such a sleep fails.
func TestWaitAndSleepLongerThanTheEventsRetention(t *testing.T) {
	t.Parallel()
	src := `name: await-pay
description: waits for the payment of an invoice
inputs:
  - name: order
steps:
  - id: paid
    wait_for_event:
      type: com.acme.invoice.paid
      timeout: 400h
  - id: later
    sleep: 200h
  - id: week
    sleep: 168h
  - id: soon
    sleep: 167h
`
	_, ds := ParseWorkflow("w.yaml", []byte(src))
	want := []diag{
		{"w.yaml:9:16", SeverityWarning, "wait_for_event.timeout 400h0m0s is longer than a run may wait where events are kept 7d, the default (their retention less a minute): the wait ends then"},
		{"w.yaml:11:12", SeverityWarning, "sleep 200h0m0s is longer than a run may sleep where events are kept 7d, the default (their retention less a minute): such a run fails when it reaches this step"},
		// A week exactly is a minute too long: the worker allows the retention less a minute.
		{"w.yaml:13:12", SeverityWarning, "sleep 168h0m0s is longer than a run may sleep where events are kept 7d"},
	}
	if diff := cmp.Diff(want, project(ds, ".", want)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
	}
	if len(ds) != 3 || ds[0].Hint != "make it at most 167h, or run the fleet with --keep-events 17d (the events stream's retention; $SKILLBUS_KEEP_EVENTS)" ||
		!strings.Contains(ds[1].Hint, "--keep-events 9d") {
		t.Errorf("hints: %v", ds)
	}
}
