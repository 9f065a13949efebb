package router_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/selector"
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

// route --explain (the router's service) gives a filter the data a routed trigger
// gives it: a value that is not an object is itself, not {"data": v}.
func TestExplainReadsDataAsRoutingDoes(t *testing.T) {
	t.Parallel()
	tagged := &skill.Skill{Name: "tagged", Description: "takes tagged lists", Kind: skill.KindWorkflow, Digest: "t4gged0123456789",
		Triggers: []string{"com.example.list"}, Filter: `data[0] == "urgent"`}
	f := setup(t, tagged)
	body, _ := json.Marshal(events.RouteRequest{Type: "com.example.list", Data: json.RawMessage(`["urgent", 2]`)})
	var msg *nats.Msg
	natstest.Eventually(t, 10*time.Second, func() bool {
		var err error
		msg, err = f.nc.Request(events.Subjects{Prefix: "skillbus"}.Router(events.RouterEndpointRoute), body, 5*time.Second)
		return err == nil
	}, "the router's service never answered")
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("router service: %s %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	var d selector.Decision
	if err := json.Unmarshal(msg.Data, &d); err != nil {
		t.Fatal(err)
	}
	if c := d.Candidate("tagged"); d.Primary != "tagged" || c == nil || !strings.Contains(c.Reason, "filter true") {
		t.Fatalf("explained: %+v", d)
	}

	f.publish("skillbus.trigger.com.example.list", ce("l1", "com.example.list"), `["urgent", 2]`)
	if j := f.job("skillbus.exec.default.tagged"); j.ActivationID != events.ActivationID("/test", "l1") {
		t.Fatalf("job = %+v", j)
	}
	f.settled()
}
