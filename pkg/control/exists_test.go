package control

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// queuedJobs publishes n plan jobs of skill hello the way the router does
// (create-only) and returns the controller and the executions, in order.
func queuedJobs(tb testing.TB, n int) (*Controller, []string) {
	tb.Helper()
	srv := natstest.Start(tb)
	b := srv.Bus(tb, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	ids := make([]string, n)
	bt := b.Batch()
	for i := range n {
		trig := fmt.Sprint("t", i)
		ref := events.SkillRef{Name: "hello", Pool: "default", ExecutionID: events.ExecutionID("/t", trig, "hello"), Version: "1.0.0"}
		j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", trig), Skill: ref,
			Inputs: json.RawMessage(`{"who":"ada"}`), Trigger: events.TriggerRef{ID: trig, Source: "/t", Subject: "x"}}
		m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "skillbus", Type: events.TypeJob}.
			JobMsg(b.Subjects.Exec("default", "hello", j.ActivationID, events.StagePlan))
		if err != nil {
			tb.Fatal(err)
		}
		bt.Create(m)
		ids[i] = j.ExecutionID
	}
	if err := bt.Wait(ctx); err != nil {
		tb.Fatal(err)
	}
	c, err := New(ctx, b)
	if err != nil {
		tb.Fatal(err)
	}
	return c, ids
}

// A job published create-only, as the router publishes every plan job, has no
// Nats-Msg-Id: it is found by the event id in its body, in whichever range of
// the newest-first lookup it is (the edges of the first two); an id no job has
// is not.
func TestQueuedFindsCreateOnlyJobs(t *testing.T) {
	t.Parallel()
	c, ids := queuedJobs(t, 3*queuedRange+5)
	ctx := context.Background()
	last := len(ids) - 1
	for _, i := range []int{last, last - queuedRange + 1, last - queuedRange, last - 3*queuedRange + 1, last - 3*queuedRange, 0} {
		if ok, err := c.queued(ctx, ids[i]); err != nil || !ok {
			t.Errorf("queued(job %d of %d) = %v, %v; want its job found", i, len(ids), ok, err)
		}
	}
	// An id that begins another's is not it.
	for _, id := range []string{events.ExecutionID("/t", "none", "hello"), ids[0][:16]} {
		if ok, err := c.queued(ctx, id); err != nil || ok {
			t.Errorf("queued(%s) = %v, %v; want not found", id, ok, err)
		}
	}
}

// The cost of telling whether a queued, never-claimed execution exists, with
// 10,000 jobs in JOBS: the last one's, the first one's, and an id no job has.
func BenchmarkExistsQueued(b *testing.B) {
	c, ids := queuedJobs(b, 10_000)
	ctx := context.Background()
	for _, bc := range []struct{ name, id string }{{"last", ids[len(ids)-1]}, {"first", ids[0]}, {"unknown", events.ExecutionID("/t", "none", "hello")}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.exists(ctx, bc.id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
