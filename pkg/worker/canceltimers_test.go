package worker_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

// scheduled is how many scheduled messages that would resume the execution
// (a confirmation's timeout, a sleep's or a wait's end) EVENTS holds.
func (f *fixture) scheduled(id string) uint64 {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	var n uint64
	for _, subject := range f.b.Subjects.Timers(id) {
		info, err := s.Info(f.ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			f.t.Fatal(err)
		}
		for _, c := range info.State.Subjects {
			n += c
		}
	}
	return n
}

// answersHandled waits until the routers have handled every answer and end of
// a wait published.
func (f *fixture) answersHandled() {
	f.t.Helper()
	natstest.Eventually(f.t, 20*time.Second, func() bool {
		c, err := f.b.JS.Consumer(f.ctx, f.b.StreamEvents(), "router-confirmations")
		if err != nil {
			return false
		}
		info, err := c.Info(f.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "answers not handled")
}

// A run cancelled while it sleeps or waits for a confirmation leaves nothing
// scheduled: the message that would have resumed it is gone, and a resume
// message published for it anyway resumes nothing.
func TestCancelledParkedRunLeavesNoTimer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		skill  *skill.Skill
		step   string
		resume func(f *fixture, id string)
	}{
		{"sleeping", napper("napper", skill.Step{Sleep: skill.Duration(time.Hour)}), "nap", func(f *fixture, id string) {
			bt := f.b.Batch()
			bt.PublishEvent(f.b.Subjects.Event(id, events.TypeWaitEnded), bus.Event{
				ID: id + ".late-wake", Source: "/t", Type: events.TypeWaitEnded,
				Data: events.WaitEnded{ExecutionID: id, StepID: "nap", Answer: events.Answer{Approved: true, By: run.PausedSleep}},
			})
			if err := bt.Wait(f.ctx); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"confirming", twoSteps("careful", confirmSecond(time.Hour)), "second", func(f *fixture, id string) {
			f.answer(id, "second", true)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, tt.skill)
			f.start()
			f.startRouter()
			id := f.job("1", tt.skill.Name)
			natstest.Eventually(t, 20*time.Second, func() bool {
				p, _, err := run.LoadPaused(f.ctx, f.runs, id)
				return err == nil && p != nil && p.Step == tt.step
			}, "the run did not park")
			if n := f.scheduled(id); n != 1 {
				t.Fatalf("%d scheduled messages for the parked run, want 1", n)
			}
			f.cancel(id)
			f.waitCancelled(id)
			natstest.Eventually(t, 20*time.Second, func() bool { return f.scheduled(id) == 0 }, "the cancelled run's scheduled message is left")
			tt.resume(f, id)
			f.answersHandled()
			f.drained()
			if n := f.calls["greet"].Load(); n != 1 {
				t.Fatalf("greet called %d times, want 1 (the step before it parked)", n)
			}
			if f.outcomes(id) != 1 {
				t.Fatal("more than one outcome")
			}
			s, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetLastMsgForSubject(f.ctx, f.b.Subjects.Exec("*", "*", "*", events.StageAnswered(tt.step))); err == nil {
				t.Fatal("the resume message resumed the cancelled run")
			}
		})
	}
}
