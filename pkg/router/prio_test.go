package router_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

var tickets = &skill.Skill{Name: "tickets", Description: "answers tickets", Kind: skill.KindWorkflow, Digest: "71ckets",
	Triggers: []string{"com.example.ticket"}, QueuePriority: `data.plan == "enterprise" ? 300 : (data.plan == "free" ? -30 : 0)`}

// The router publishes a run of a skill with queue_priority on the lane of its
// pool its priority falls in, with the priority in a header and in the plan; a
// priority of 0, or an expression that fails, keeps the pool's own subject.
func TestQueuePriorityPicksTheLane(t *testing.T) {
	t.Parallel()
	f := setup(t, tickets)
	jobs, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, data, pool string
		prio           int
		err            bool
	}{
		{id: "t1", data: `{"plan":"enterprise"}`, pool: "default~p2", prio: 300},
		{id: "t2", data: `{"plan":"free"}`, pool: "default~p-1", prio: -30},
		{id: "t3", data: `{"plan":"team"}`, pool: "default"},
		{id: "t4", data: `{}`, pool: "default", err: true}, // no data.plan: an error, priority 0
	} {
		f.publish("skillbus.trigger.com.example.ticket", ce(tc.id, "com.example.ticket"), tc.data)
		act := events.ActivationID("/test", tc.id)
		var raw *jetstream.RawStreamMsg
		natstest.Eventually(t, 10*time.Second, func() bool {
			raw, err = jobs.GetLastMsgForSubject(f.ctx, f.b.Subjects.Exec("*", "tickets", act, events.StagePlan))
			return err == nil
		}, "no job for %s: %v", tc.id, err)
		if want := f.b.Subjects.Exec(tc.pool, "tickets", act, events.StagePlan); raw.Subject != want {
			t.Errorf("%s: job on %s, want %s", tc.id, raw.Subject, want)
		}
		h := raw.Header.Get(events.HeaderQueuePriority)
		if (tc.prio == 0) != (h == "") {
			t.Errorf("%s: header %s %q with priority %d", tc.id, events.HeaderQueuePriority, h, tc.prio)
		}
		var d events.RouteDecided
		f.event(act, events.TypeRouteDecided, &d)
		if p := d.Plan.Primary; p.QueuePriority != tc.prio {
			t.Errorf("%s: plan's queue priority %d, want %d", tc.id, p.QueuePriority, tc.prio)
		}
		if len(d.Candidates) == 0 || strings.Contains(d.Candidates[0].Reason, "queue_priority error, queued at 0: no such key: plan") != tc.err {
			t.Errorf("%s: candidates %+v, want an error in the reason: %v", tc.id, d.Candidates, tc.err)
		}
	}
}

// route --explain's reasons say what queue_priority gave, or that it failed.
func TestQueuePriorityIsExplained(t *testing.T) {
	t.Parallel()
	sel := selector.New(selector.Config{})
	sel.Sync([]*skill.Skill{tickets})
	for data, want := range map[string]string{
		"enterprise": "queue_priority 300s",
		"":           "queue_priority error, queued at 0: no such key: plan",
	} {
		ev := &flow.Event{Type: "com.example.ticket", Data: map[string]any{}}
		if data != "" {
			ev.Data = map[string]any{"plan": data}
		}
		d, err := sel.Select(selector.Request{Type: "com.example.ticket"}, selector.Env{Admit: router.Filters([]*skill.Skill{tickets}, ev)})
		if err != nil {
			t.Fatal(err)
		}
		c := d.Candidate("tickets")
		if c == nil || !strings.Contains(c.Reason, want) {
			t.Errorf("plan %q: reason %+v, want it to hold %q", data, c, want)
		}
	}
}
