package bus_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A plan's job carries the routing decision in its data; a job written by an
// earlier router carries it in the Skillbus-Route header. DecisionOfJob reads the
// same decision from either, and none from a job without one.
func TestDecisionOfJobReadsTheDataAndTheOldHeader(t *testing.T) {
	primary := events.SkillRef{Name: "hello", Pool: "default", ExecutionID: "e1", Source: "rule", Score: 1}
	fallback := events.SkillRef{Name: "generic", Pool: "default", ExecutionID: "e2", Source: "generic"}
	want := events.RouteDecided{
		ActivationID: "a1",
		Trigger:      events.TriggerRef{ID: "t1", Source: "/test", Type: "io.skillbus.invoke", Subject: "skillbus.trigger.skill.hello", Seq: 7},
		Plan:         events.Plan{Primary: primary, FallbackChain: []events.SkillRef{fallback}, EstimatedCost: 2},
		Threshold:    0.3,
		Candidates:   []events.Candidate{{Name: "hello", Score: 1, Selected: true, Role: "primary", Reason: "named"}},
	}
	job := events.Job{ExecutionID: "e1", ActivationID: "a1", Skill: primary, Trigger: want.Trigger, Fallback: want.Plan.FallbackChain}
	encode := func(j events.Job) (*bus.Event, string) {
		return &bus.Event{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob, Data: j}, "skillbus.exec.default.hello.a1.job"
	}

	withRoute := job
	withRoute.Route = events.RouteOf(want, true)
	e, subj := encode(withRoute)
	m, err := e.JobMsg(subj)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(events.HeaderRoute) != "" {
		t.Fatalf("the route is in a header: %v", m.Header)
	}
	got, ok, err := bus.DecisionOfJob(bus.FromNATS(m))
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("from the data: %v %v\n%+v\nwant\n%+v", ok, err, got, want)
	}

	e, subj = encode(job)
	old, err := e.JobMsg(subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := bus.DecisionOfJob(bus.FromNATS(old)); ok || err != nil {
		t.Fatalf("a job without a route: ok %v, %v", ok, err)
	}
	route, _ := json.Marshal(events.RouteOf(want, true))
	old.Header.Set(events.HeaderRoute, string(route))
	got, ok, err = bus.DecisionOfJob(bus.FromNATS(old))
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("from the header: %v %v\n%+v\nwant\n%+v", ok, err, got, want)
	}
	old.Header.Set(events.HeaderRoute, "{")
	if _, _, err := bus.DecisionOfJob(bus.FromNATS(old)); err == nil {
		t.Fatal("a broken header gave no error")
	}
}
