package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

func limitedOrders(limit int, key string) *skill.Skill {
	return &skill.Skill{Name: "orders", Description: "takes orders", Kind: skill.KindWorkflow, Digest: fmt.Sprintf("0rders%d%s", limit, key),
		Triggers:  []string{"com.example.order"},
		RateLimit: &skill.RateLimit{Key: key, Limit: limit, Period: skill.Duration(time.Hour)}}
}

// outcomes waits until every trigger of ids has a job or a route.unmatched, and
// returns the ids that ran and the unmatched records of the others.
func (f *fixture) outcomes(ids []string) (ran []string, skipped map[string]events.RouteUnmatched) {
	f.t.Helper()
	evs, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	jobs, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	skipped = map[string]events.RouteUnmatched{}
	for _, id := range ids {
		act := events.ActivationID("/test", id)
		natstest.Eventually(f.t, 20*time.Second, func() bool {
			if _, err := jobs.GetLastMsgForSubject(f.ctx, f.b.Subjects.Exec("*", "*", act, "*")); err == nil {
				ran = append(ran, id)
				return true
			}
			if _, err := evs.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(act, events.TypeRouteUnmatched)); err == nil {
				var u events.RouteUnmatched
				f.event(act, events.TypeRouteUnmatched, &u)
				skipped[id] = u
				return true
			}
			return false
		}, "trigger %s was neither run nor recorded", id)
	}
	return ran, skipped
}

// Two routers share the triggers of a skill limited to 5 an hour: however they
// race, exactly 5 of 30 run (per window: a test that spans the turn of the hour
// allows 5 in each); the others are recorded as rate_limited, not queued.
func TestRateLimitHoldsAcrossRouters(t *testing.T) {
	t.Parallel()
	const limit, n = 5, 30
	f := setup(t, limitedOrders(limit, ""))
	second, err := router.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop(context.Background()) })

	js, _ := jetstream.New(f.nc)
	trig, _ := js.Stream(f.ctx, f.b.StreamTriggers())
	var ids []string
	windows := map[int64]int{} // hour -> triggers stored in it
	acks := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		id := fmt.Sprintf("r%02d", i)
		ids = append(ids, id)
		m := nats.NewMsg("skillbus.trigger.com.example.order")
		for k, v := range ce(id, "com.example.order") {
			m.Header.Set(k, v)
		}
		m.Data = []byte(`{}`)
		a, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	<-js.PublishAsyncComplete()
	for _, a := range acks {
		ack := <-a.Ok()
		raw, err := trig.GetMsg(f.ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		windows[raw.Time.Unix()/3600]++
	}
	want := 0
	for _, c := range windows {
		want += min(c, limit)
	}
	ran, skipped := f.outcomes(ids)
	if len(ran) != want || len(skipped) != n-want {
		t.Fatalf("%d ran, %d skipped; want %d and %d (windows %v)", len(ran), len(skipped), want, n-want, windows)
	}
	for id, u := range skipped {
		if u.Code != events.UnmatchedRateLimited || !strings.Contains(u.Reason, "orders: rate_limit 5 per 1h0m0s: rate limited, 5 of 5 taken") {
			t.Fatalf("%s: %+v", id, u)
		}
		if len(u.Candidates) != 1 || u.Candidates[0].Selected {
			t.Fatalf("%s: candidates %+v", id, u.Candidates)
		}
	}
	f.settled()
}

// A key from the trigger's data counts each customer apart; a key that fails on
// a trigger is that trigger's filter_error, and the router goes on.
func TestRateLimitKeyFromData(t *testing.T) {
	t.Parallel()
	f := setup(t, limitedOrders(1, "data.customer"))
	for _, c := range []struct{ id, data string }{
		{"k1", `{"customer": "acme"}`}, {"k2", `{"customer": "globex"}`}, {"k3", `{"customer": "acme"}`}, {"k4", `{"amount": 3}`},
	} {
		f.publish("skillbus.trigger.com.example.order", ce(c.id, "com.example.order"), c.data)
		f.outcomes([]string{c.id}) // one at a time: the first of a key is the one that runs
	}
	ran, skipped := f.outcomes([]string{"k1", "k2", "k3", "k4"})
	if strings.Join(ran, ",") != "k1,k2" {
		t.Fatalf("ran %v; want k1 and k2 (one per customer)", ran)
	}
	if u := skipped["k3"]; u.Code != events.UnmatchedRateLimited || !strings.Contains(u.Reason, `by data.customer (key "acme")`) {
		t.Fatalf("k3: %+v", u)
	}
	if u := skipped["k4"]; u.Code != events.UnmatchedFilterError || !strings.Contains(u.Reason, "orders: rate_limit key error: no such key: customer") {
		t.Fatalf("k4: %+v", u)
	}
	j := f.job("skillbus.exec.default.orders")
	if c := j.Route.Candidates; len(c) != 1 || !strings.Contains(c[0].Reason, `rate_limit 1 per 1h0m0s by data.customer (key "globex"): 1 of 1 in the window`) {
		t.Fatalf("the plan does not show the rate limit: %+v", c)
	}

	// route --explain reads the window without counting: acme's is full.
	d, err := f.r.Decide(f.ctx, selector.Request{Type: "com.example.order", Data: map[string]any{"customer": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Candidate("orders"); d.Primary != "" || c == nil || !strings.Contains(c.Reason, "rate limited, 1 of 1 taken") {
		t.Fatalf("explained: %+v", d)
	}
	d, err = f.r.Decide(f.ctx, selector.Request{Type: "com.example.order", Data: map[string]any{"customer": "initech"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Candidate("orders"); d.Primary != "orders" || !strings.Contains(c.Reason, "0 of 1 taken") {
		t.Fatalf("explained: %+v", d)
	}
	f.settled()
}

// A skill over its limit leaves the trigger to the next skill that takes it.
func TestRateLimitedSkillGivesWayToTheNext(t *testing.T) {
	t.Parallel()
	limited := limitedOrders(1, "")
	limited.Priority = "high"
	spare := &skill.Skill{Name: "spare", Description: "takes orders too", Kind: skill.KindWorkflow, Digest: "sp4re0123456789",
		Triggers: []string{"com.example.order"}, Priority: "low"}
	f := setup(t, limited, spare)
	for _, id := range []string{"g1", "g2"} {
		f.publish("skillbus.trigger.com.example.order", ce(id, "com.example.order"), `{}`)
		f.outcomes([]string{id})
	}
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "g1"), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "orders" || len(rd.Plan.FallbackChain) != 1 {
		t.Fatalf("g1: %+v", rd.Plan)
	}
	rd = events.RouteDecided{}
	f.event(events.ActivationID("/test", "g2"), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "spare" || len(rd.Plan.FallbackChain) != 0 {
		t.Fatalf("g2: %+v", rd.Plan)
	}
	if c := candidate(rd.Candidates, "orders"); c == nil || c.Selected || !strings.Contains(c.Reason, "rate limited") {
		t.Fatalf("g2's candidates: %+v", rd.Candidates)
	}
	f.settled()
}

func candidate(cs []events.Candidate, name string) *events.Candidate {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
