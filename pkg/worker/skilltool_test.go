package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

// A child skill parked on a repair waiting for approval has not ended: the skill
// tool waits for it within the step's time, and fails retryably when that runs
// out. It never succeeds with no outputs. Once the repair is approved and the
// child completes, the call (the step's retry, with the same child) returns the
// child's outputs.
func TestSkillToolWaitsForAChildParkedOnARepair(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "parent-exec/call-child"
	act := events.ActivationID("/skillbus/skill-tool", key)
	exec := events.ExecutionID("/skillbus/skill-tool", key, "child")
	repairID := "3f2a9c1d0b7e5a6b7c8d9e0f"
	bt := b.Batch()
	bt.PublishEvent(b.Subjects.Event(act, events.TypeRouteDecided), bus.Event{ID: act + ".route.decided", Source: "/t", Type: events.TypeRouteDecided,
		Data: events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "child", ExecutionID: exec}}}})
	bt.PublishEvent(b.Subjects.Event(exec, events.TypeRepairRequested), bus.Event{ID: exec + ".repair.requested", Source: "/t", Type: events.TypeRepairRequested,
		Data: events.RepairRequested{ExecutionID: exec, Skill: "child", RepairID: repairID, Fault: events.RepairFault{Kind: "reference", Name: "titel"}}})
	bt.PublishEvent(b.Subjects.Event(repairID, events.TypeRepairProposed), bus.Event{ID: repairID + ".repair.proposed", Source: "/t", Type: events.TypeRepairProposed,
		Data: events.RepairProposed{RepairID: repairID, Skill: "child", Summary: "titel → title"}})
	if err := bt.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	st := worker.SkillTool(b, 0)
	call := tool.Call{Args: map[string]any{"name": "child"}, ExecutionID: "parent-exec", Step: "call-child", IdempotencyKey: key}

	// The step's time runs out while the child waits for approval.
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	out, err := st.Call(sctx, call)
	scancel()
	if err == nil || failure.ClassOf(err) != failure.Retryable {
		t.Fatalf("skill tool on a child parked on a repair: outputs %v, error %v; want a retryable error (the child has not ended)", out, err)
	}

	// Approved meanwhile, the child completes: the retried call waits for it and
	// returns its outputs.
	type result struct {
		out any
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := st.Call(ctx, call)
		done <- result{out, err}
	}()
	// The call follows the repair (it read the proposal) before the child ends.
	natstest.Eventually(t, 20*time.Second, func() bool {
		select {
		case r := <-done:
			t.Fatalf("the skill tool returned while the child waits for approval: outputs %v, error %v", r.out, r.err)
		default:
		}
		s, err := b.JS.Stream(ctx, b.StreamEvents())
		if err != nil {
			return false
		}
		l := s.ListConsumers(ctx)
		seen := false
		for ci := range l.Info() {
			if slices.Contains(append(ci.Config.FilterSubjects, ci.Config.FilterSubject), b.Subjects.Events(repairID)) && ci.Delivered.Consumer >= 1 {
				seen = true
			}
		}
		return seen && l.Err() == nil
	}, "the skill tool does not follow the child's repair")
	bt = b.Batch()
	bt.PublishEvent(b.Subjects.Event(repairID, events.TypeRepairSucceeded), bus.Event{ID: repairID + ".repair.succeeded", Source: "/t", Type: events.TypeRepairSucceeded,
		Data: events.RepairProgress{RepairID: repairID, Skill: "child"}})
	bt.PublishEvent(b.Subjects.Event(exec, events.TypeExecutionCompleted), bus.Event{ID: exec + ".outcome", Source: "/t", Type: events.TypeExecutionCompleted,
		Data: events.ExecutionCompleted{ExecutionID: exec, Skill: "child", Outputs: map[string]any{"title": "after repair"}}})
	if err := bt.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if got, _ := r.out.(map[string]any); r.err != nil || got["title"] != "after repair" {
			t.Fatalf("skill tool after the child completed: outputs %v, error %v; want the child's outputs", r.out, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the skill tool did not return once the child completed")
	}
}
