package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// parkedRun is an activation whose one execution is parked on a repair with a
// proposal waiting for approval, as the router, a worker and a repair worker leave
// it in EVENTS.
type parkedRun struct {
	t                 *testing.T
	b                 *bus.Bus
	act, exec, repair string
}

func newParkedRun(t *testing.T, ctx context.Context, b *bus.Bus, id string) *parkedRun {
	t.Helper()
	p := &parkedRun{t: t, b: b, act: events.ActivationID("/t", id), exec: events.ExecutionID("/t", id, "s"),
		repair: "3f2a9c1d0b7e" + events.ActivationID("/repair", id)[:20]}
	fault := events.RepairFault{Kind: "reference", Name: "titel", Step: "post"}
	bt := b.Batch()
	bt.PublishEvent(b.Subjects.Event(p.act, events.TypeRouteDecided), bus.Event{ID: p.act + ".route.decided", Source: "/t", Type: events.TypeRouteDecided,
		Data: events.RouteDecided{ActivationID: p.act, Plan: events.Plan{Primary: events.SkillRef{Name: "s", ExecutionID: p.exec}}}})
	bt.PublishEvent(b.Subjects.Event(p.exec, events.TypeRepairRequested), bus.Event{ID: p.exec + ".repair.requested", Source: "/t", Type: events.TypeRepairRequested,
		Data: events.RepairRequested{ExecutionID: p.exec, Skill: "s", RepairID: p.repair, Fault: fault, Error: `no field "titel"`}})
	bt.PublishEvent(b.Subjects.Event(p.repair, events.TypeRepairProposed), bus.Event{ID: p.repair + ".repair.proposed", Source: "/t", Type: events.TypeRepairProposed,
		Data: events.RepairProposed{RepairID: p.repair, Skill: "s", By: "reference", Summary: "titel → title"}})
	if err := bt.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// approve does what approving the repair does: the repair is applied, and the
// execution, run again on the repaired version, completes.
func (p *parkedRun) approve(ctx context.Context) {
	p.t.Helper()
	bt := p.b.Batch()
	bt.PublishEvent(p.b.Subjects.Event(p.repair, events.TypeRepairSucceeded), bus.Event{ID: p.repair + ".repair.succeeded", Source: "/t", Type: events.TypeRepairSucceeded,
		Data: events.RepairProgress{RepairID: p.repair, Skill: "s"}})
	bt.PublishEvent(p.b.Subjects.Event(p.exec, events.TypeExecutionCompleted), bus.Event{ID: p.exec + ".outcome", Source: "/t", Type: events.TypeExecutionCompleted,
		Data: events.ExecutionCompleted{ExecutionID: p.exec, Skill: "s", Outputs: map[string]any{"title": "after repair"}}})
	if err := bt.Wait(ctx); err != nil {
		p.t.Fatal(err)
	}
}

// A client that did not ask to stop at repairs — the skill tool's — follows a run
// parked on a repair past the proposal to its real end: approved, the run's
// outputs are the result. It must not return at the proposal with no outcome.
func TestFollowGoesOnPastARepairWaitingForApproval(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newParkedRun(t, ctx, b, "1")
	proposed := false
	res, err := client.New(b).Follow(ctx, p.act, func(e *event.Event) {
		if e.Type() == events.TypeRepairProposed && !proposed {
			// The follower has read the proposal; now someone approves it.
			proposed = true
			p.approve(ctx)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !proposed {
		t.Fatal("the follower never read the repair's proposal")
	}
	if !res.Completed || res.Repairing != nil || res.Outputs["title"] != "after repair" {
		t.Fatalf("result %+v (repairing %+v): want the completed run's outputs", res, res.Repairing)
	}
}

// A client made with StopAtRepair returns at the proposal, saying what the run
// waits for.
func TestFollowStopAtRepair(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newParkedRun(t, ctx, b, "1")
	res, err := client.New(b).StopAtRepair().Follow(ctx, p.act, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Repairing == nil || res.Completed || res.Failed != nil || res.Repairing.RepairID != p.repair || res.ExecutionID != p.exec {
		t.Fatalf("result %+v (repairing %+v): want the run parked on repair %s", res, res.Repairing, p.repair)
	}
	if want := `s: repairing: reference fault "titel" in step post, repair 3f2a9c1d0b7e waiting for approval`; res.Err().Error() != want {
		t.Fatalf("Err() = %q, want %q", res.Err(), want)
	}
}

// publish publishes events of the run, each on the events subject of its id.
func (p *parkedRun) publish(ctx context.Context, evs ...bus.Event) {
	p.t.Helper()
	bt := p.b.Batch()
	for _, e := range evs {
		id := p.exec
		if d, ok := e.Data.(events.RepairProgress); ok && d.RepairID != "" {
			id = d.RepairID
		}
		bt.PublishEvent(p.b.Subjects.Event(id, e.Type), e)
	}
	if err := bt.Wait(ctx); err != nil {
		p.t.Fatal(err)
	}
}

func (p *parkedRun) succeeded() bus.Event {
	return bus.Event{ID: p.repair + ".repair.succeeded", Source: "/t", Type: events.TypeRepairSucceeded, Data: events.RepairProgress{RepairID: p.repair, Skill: "s"}}
}

func (p *parkedRun) completed() bus.Event {
	return bus.Event{ID: p.exec + ".outcome", Source: "/t", Type: events.TypeExecutionCompleted,
		Data: events.ExecutionCompleted{ExecutionID: p.exec, Skill: "s", Outputs: map[string]any{"title": "after repair"}}}
}

// The repair's history is read from its start, so its proposal always comes
// before its decision: a run whose repair was approved already is not reported
// as waiting for approval, even by a client that stops at repairs. It is
// followed on to its outcome.
func TestFollowStopAtRepairNotForADecidedRepair(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newParkedRun(t, ctx, b, "1")
	p.publish(ctx, p.succeeded()) // approved and applied before anyone follows; the run goes on
	var seen []string
	res, err := client.New(b).StopAtRepair().Follow(ctx, p.act, func(e *event.Event) {
		seen = append(seen, e.Type())
		if e.Type() == events.TypeRepairSucceeded {
			p.publish(ctx, p.completed()) // the run, released, completes
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Completed || res.Repairing != nil {
		t.Fatalf("result %+v (repairing %v), events %v: want the completed run, not a repair waiting for approval", res, res.Repairing, seen)
	}
}

// Of a run that ended already, the execution's history and the repair's are
// read side by side: the proposal may be read before the outcome. The outcome
// is the result.
func TestFollowStopAtRepairPrefersTheOutcome(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, decided := range []bool{true, false} {
		name := "the repair's decision in EVENTS"
		if !decided {
			name = "no decision in EVENTS (yet)"
		}
		t.Run(name, func(t *testing.T) {
			p := newParkedRun(t, ctx, b, name)
			// The run, released, did a lot before completing: the outcome is far
			// down the execution's history, well after the proposal is read.
			var evs []bus.Event
			for i := range 600 {
				evs = append(evs, bus.Event{ID: fmt.Sprintf("%s.step.%d", p.exec, i), Source: "/t", Type: events.TypeStepStarted,
					Data: events.StepStarted{ExecutionID: p.exec, StepID: fmt.Sprint("step", i), StepType: "compute"}})
			}
			evs = append(evs, p.completed())
			if decided {
				evs = append(evs, p.succeeded())
			}
			p.publish(ctx, evs...)
			res, err := client.New(b).StopAtRepair().Follow(ctx, p.act, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Completed || res.Repairing != nil || res.Outputs["title"] != "after repair" {
				t.Fatalf("result %+v (repairing %v): want the completed run", res, res.Repairing)
			}
		})
	}
}
