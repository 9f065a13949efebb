package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// napper greets, sleeps as the step nap says, and greets again.
func napper(name string, nap skill.Step) *skill.Skill {
	zero := 0
	nap.ID = "nap"
	return &skill.Skill{Name: name, Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", MaxRetries: &zero,
		Digest: strings.Repeat("5e", 32),
		Workflow: &skill.Workflow{
			Inputs: []skill.Input{{Name: "who"}, {Name: "due"}},
			Steps: []skill.Step{
				{ID: "first", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }}"}},
				nap,
				{ID: "last", Tool: "greet", Args: map[string]any{"who": "{{ inputs.who }} again"}},
			}}}
}

// eventTimes returns the CloudEvents times of an execution's events of type typ.
func (f *fixture) eventTimes(id, typ string) []time.Time {
	f.t.Helper()
	c, err := f.b.JS.OrderedConsumer(f.ctx, f.b.StreamEvents(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.b.Subjects.Event(id, typ)}})
	if err != nil {
		f.t.Fatal(err)
	}
	batch, err := c.FetchNoWait(1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []time.Time
	for m := range batch.Messages() {
		e, err := bus.Decode(m)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e.Time())
	}
	return out
}

// startOneSlot starts a worker that runs one job at a time.
func (f *fixture) startOneSlot(name string) *worker.Worker {
	f.t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := workflow.New(workflow.Config{Tools: f.tools, Log: log})
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Bus: f.b, Catalog: f.cat, Engine: eng, Log: log, AckWait: time.Second, Name: name, Concurrency: 1, Events: f.level})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := w.Start(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// A sleeping run holds no worker slot: another skill's run completes on a
// one-slot worker meanwhile. The worker is then replaced by a new one, and the
// run wakes after its sleep on the new worker and completes once, its first step
// not repeated.
func TestSleepHoldsNoSlotAndSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	f := setup(t, napper("napper", skill.Step{Sleep: skill.Duration(2 * time.Second)}), oneStep("quick", "echo", 0))
	w := f.startOneSlot("A")
	f.startRouter()
	start := time.Now()
	id := f.job("s1", "napper")
	var paused *run.Paused
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		paused = p
		return err == nil && p != nil && p.Kind == run.PausedSleep && p.Step == "nap"
	}, "no sleeping record")
	q := f.job("s2", "quick")
	f.waitEvent(q, events.TypeExecutionCompleted)
	if len(f.events(id, events.TypeExecutionCompleted)) != 0 {
		t.Fatal("the sleeper completed before the other run; the test proves nothing")
	}
	w.Stop(context.Background())
	f.startOneSlot("B")
	f.waitEvent(id, events.TypeExecutionCompleted)
	if slept := time.Since(start); slept < 2*time.Second {
		t.Fatalf("completed %s after it started; the sleep is 2s", slept)
	}
	if n := f.calls["greet"].Load(); n != 2 {
		t.Fatalf("greet called %d times, want 2 (first before the sleep, last after)", n)
	}
	// The wake-up, written when the run parked, is published when it is due: its
	// time is then, not when the sleep began.
	if at := f.eventTimes(id, events.TypeWaitEnded); len(at) != 1 || !at[0].Equal(paused.TimeoutAt) {
		t.Fatalf("wait.ended at %v, want one at the wake-up time %v", at, paused.TimeoutAt)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		return err == nil && p == nil
	}, "sleeping record left")
	f.drained()
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d execution.completed, want 1", n)
	}
}

// sleep_until renders its time from the inputs; a time past is no sleep, one
// beyond the events retention fails the step rather than waking early.
func TestSleepUntil(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, due string
		want      string // event type
		pauses    bool
	}{
		{"future", time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339), events.TypeExecutionCompleted, true},
		{"past", "2001-01-01T00:00:00Z", events.TypeExecutionCompleted, false},
		{"beyond retention", "2999-01-01T00:00:00Z", events.TypeExecutionFailed, false},
		{"not a time", "tomorrow", events.TypeExecutionFailed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, napper("until", skill.Step{SleepUntil: "{{ inputs.due }}"}))
			f.start()
			f.startRouter()
			id := f.jobInputs("u1", "until", `{"who":"ada","due":"`+tt.due+`"}`)
			f.waitEvent(id, tt.want)
			if due, err := time.Parse(time.RFC3339, tt.due); err == nil && tt.pauses && time.Now().Before(due) {
				t.Fatalf("completed before %s", tt.due)
			}
			if tt.want == events.TypeExecutionFailed {
				failed := f.waitEvent(id, events.TypeExecutionFailed)
				if !strings.Contains(failed["error"].(string), "sleep") {
					t.Fatalf("error %q does not say what is wrong with the sleep", failed["error"])
				}
			}
		})
	}
}

// jobInputs publishes a job for the named skill with the given inputs.
func (f *fixture) jobInputs(id, name, inputs string) string {
	f.t.Helper()
	ref := events.SkillRef{Name: name, Pool: "default", ExecutionID: events.ExecutionID("/t", id, name), Version: "1.0.0"}
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref,
		Inputs: json.RawMessage(inputs), Trigger: events.TriggerRef{ID: id, Source: "/t", Subject: "x"}}
	m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob, Data: j}.
		JobMsg(f.b.Subjects.Exec("default", name, j.ActivationID, events.StagePlan))
	if err != nil {
		f.t.Fatal(err)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	return j.ExecutionID
}
