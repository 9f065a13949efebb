package router_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/skill"
)

var bigOrders = &skill.Skill{Name: "big-orders", Description: "reviews big orders", Kind: skill.KindWorkflow, Digest: "b1g0rders0123456",
	Triggers: []string{"com.example.order"}, Filter: `data.amount > 100 && extensions.region != "test"`}

func TestFilterDecidesWhichTriggersRun(t *testing.T) {
	t.Parallel()
	f := setup(t, bigOrders)

	f.publish("skillbus.trigger.com.example.order", ce("big", "com.example.order"), `{"amount": 250}`)
	j := f.job("skillbus.exec.default.big-orders")
	if j.ActivationID != events.ActivationID("/test", "big") {
		t.Fatalf("job = %+v", j)
	}
	if c := j.Route.Candidates; len(c) != 1 || !strings.Contains(c[0].Reason, "filter true") {
		t.Fatalf("the plan's candidates do not show the filter's verdict: %+v", c)
	}

	f.publish("skillbus.trigger.com.example.order", ce("small", "com.example.order"), `{"amount": 5}`)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "small"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedFiltered || !strings.Contains(u.Reason, "big-orders: filter false: data.amount > 100") {
		t.Fatalf("unmatched = %+v", u)
	}
	if len(u.Candidates) != 1 || u.Candidates[0].Selected || !strings.Contains(u.Candidates[0].Reason, "filter false") {
		t.Fatalf("unmatched candidates = %+v", u.Candidates)
	}

	hdr := ce("tested", "com.example.order")
	hdr["ce-region"] = "test"
	f.publish("skillbus.trigger.com.example.order", hdr, `{"amount": 250}`)
	f.event(events.ActivationID("/test", "tested"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedFiltered {
		t.Fatalf("unmatched = %+v", u)
	}

	// A filter that fails on a trigger (a field it lacks) does not take it, and
	// says why; the router goes on.
	f.publish("skillbus.trigger.com.example.order", ce("odd", "com.example.order"), `["not", "an", "order"]`)
	f.event(events.ActivationID("/test", "odd"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedFilterError || !strings.Contains(u.Reason, "big-orders: filter error") {
		t.Fatalf("unmatched = %+v", u)
	}
	f.settled()
}
