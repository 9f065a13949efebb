package router

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/skill"
)

// cancelOnTrigger is a parsed trigger of type typ for order, at seq in TRIGGERS.
func cancelOnTrigger(b *testing.B, r *Router, id, typ string, order int, seq uint64) *trigger {
	b.Helper()
	m := &stubMsg{
		subject: r.cfg.Bus.Subjects.Trigger(typ),
		header: nats.Header{"ce-specversion": {"1.0"}, "ce-source": {"/bench"}, "ce-type": {typ}, "ce-id": {id},
			"Content-Type": {"application/json"}},
		data: fmt.Appendf(nil, `{"order": %d}`, order),
	}
	m.md.NumDelivered = 1
	m.md.Sequence.Stream = seq
	var t trigger
	if o := parse(context.Background(), m, r.parseConfig, &t); o != nil {
		b.Fatalf("parse: %#v", o)
	}
	return &t
}

// BenchmarkCancelOnEvent is one event of a cancel_on type, matching none of
// 10,000 runs of the skill that are within the rule's timeout (24 h), each of
// another order: what every such event costs its router.
func BenchmarkCancelOnEvent(b *testing.B) {
	s := &skill.Skill{Name: "remind", Description: "reminds a customer of an unpaid order", Kind: skill.KindWorkflow, Digest: "rem1nd0123456789",
		Triggers: []string{"com.example.order.created"},
		CancelOn: []skill.CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: skill.Duration(24 * time.Hour)}}}
	r := benchRouter(b, s)
	ctx := context.Background()
	const open = 10000
	for i := range open {
		id := fmt.Sprintf("c%d", i)
		t := cancelOnTrigger(b, r, id, "com.example.order.created", i, uint64(i+1))
		o := &routed{one: [1]plannedJob{{job: events.Job{Skill: events.SkillRef{Name: "remind", ExecutionID: events.ExecutionID("/bench", id, "remind")}}}}}
		if _, err := r.indexCancels(ctx, t, o); err != nil {
			b.Fatal(err)
		}
	}
	paid := cancelOnTrigger(b, r, "p", "com.example.order.paid", -1, 1<<40)
	for b.Loop() {
		if err := r.cancelMatching(ctx, paid); err != nil {
			b.Fatal(err)
		}
	}
}
