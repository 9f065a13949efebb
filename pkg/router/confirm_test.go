package router_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// pause writes what a worker leaves behind when a step needs confirmation.
func (f *fixture) pause(execID, step string) {
	f.t.Helper()
	job, _ := json.Marshal(events.Job{ExecutionID: execID, Skill: events.SkillRef{Name: "hello", Pool: "default", ExecutionID: execID}, Inputs: json.RawMessage(`{}`)})
	p, _ := json.Marshal(run.Paused{ExecutionID: execID, Step: "deploy", Subject: "skillbus.exec.default.hello", Job: job, TimeoutAt: time.Now().Add(time.Hour)})
	runs, _ := f.b.KV(f.ctx, f.b.BucketRuns())
	if _, err := runs.Put(f.ctx, run.PausedKey(execID), p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) answer(execID, step string, a events.Answer, opts ...jetstream.PublishOpt) {
	f.t.Helper()
	subject := f.b.Subjects.Event(execID, events.TypeConfirmationRecorded)
	if len(opts) > 0 {
		subject = f.b.Subjects.ConfirmationTimeout(execID, step)
	}
	m, err := bus.Event{ID: execID + ".answer." + a.By, Source: "/test", Type: events.TypeConfirmationRecorded,
		Data: events.ConfirmationRecorded{ExecutionID: execID, StepID: step, Answer: a}}.Msg(subject)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(opts) > 0 {
		opts = append(opts, jetstream.WithScheduleTarget(f.b.Subjects.Event(execID, events.TypeConfirmationRecorded)))
	}
	if _, err := f.b.JS.PublishMsg(f.ctx, m, opts...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pausedGone(execID string) bool {
	runs, _ := f.b.KV(f.ctx, f.b.BucketRuns())
	p, _, err := run.LoadPaused(f.ctx, runs, execID)
	return err == nil && p == nil
}

func TestAnswerResumesThePausedJob(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	f.pause("exec1", "deploy")
	// A pending timeout, to be cancelled by the human's answer.
	f.answer("exec1", "deploy", events.Answer{By: "timeout"}, jetstream.WithScheduleAt(time.Now().Add(time.Hour)))
	f.answer("exec1", "other-step", events.Answer{Approved: true, By: "stale"})
	f.answer("exec1", "deploy", events.Answer{Approved: true, By: "ada"})
	j := f.job("skillbus.exec.default.hello")
	if a := j.Answers["deploy"]; !a.Approved || a.By != "ada" || len(j.Answers) != 1 {
		t.Fatalf("answers = %+v", j.Answers)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.pausedGone("exec1") }, "paused record left")
	evs, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := evs.GetLastMsgForSubject(f.ctx, f.b.Subjects.ConfirmationTimeout("exec1", "deploy"))
		return err != nil
	}, "the pending timeout was not cancelled")
}

func TestUnansweredConfirmationIsDeniedAtItsDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	f.pause("exec2", "deploy")
	f.answer("exec2", "deploy", events.Answer{By: "timeout", Reason: "no answer within 1s"}, jetstream.WithScheduleAt(time.Now().Add(time.Second)))
	j := f.job("skillbus.exec.default.hello")
	if a := j.Answers["deploy"]; a.Approved || a.By != "timeout" {
		t.Fatalf("answers = %+v", j.Answers)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.pausedGone("exec2") }, "paused record left")
}
