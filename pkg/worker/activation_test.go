package worker_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/stats"
)

// together publishes the jobs of a plan that started several at once: each slot
// is a chain of skills (its own, then its fallbacks), as the router writes them.
func (f *fixture) together(id string, slots ...[]string) (actID string, execs [][]string) {
	f.t.Helper()
	actID = events.ActivationID("/t", id)
	execs = make([][]string, len(slots))
	for i, chain := range slots {
		for _, n := range chain {
			execs[i] = append(execs[i], events.ExecutionID("/t", id, n))
		}
	}
	bt := f.b.Batch()
	for i, chain := range slots {
		refs := make([]events.SkillRef, len(chain))
		for k, n := range chain {
			refs[k] = events.SkillRef{Name: n, Pool: "default", ExecutionID: execs[i][k], Version: "1.0.0"}
		}
		j := events.Job{ExecutionID: refs[0].ExecutionID, ActivationID: actID, Skill: refs[0], Fallback: refs[1:],
			Inputs: json.RawMessage(`{"who":"ada"}`), Trigger: events.TriggerRef{ID: id, Source: "/t", Subject: "x"}, Together: execs}
		bt.PublishEvent(f.b.Subjects.Exec("default", chain[0], actID, events.StagePlan), bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob,
			Meta: bus.Meta{ExecutionID: j.ExecutionID, CorrelationID: actID}, Data: j})
	}
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	return actID, execs
}

// TestActivationOfSeveralJobsEndsOnce: the worker whose outcome ends the last of an
// activation's concurrent jobs publishes activation.completed, once, with each
// job's result in plan order — the result of a job that fell back being its
// fallback's.
func TestActivationOfSeveralJobsEndsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("ok", "greet", 0), oneStep("bad", "broken", 0), oneStep("worse", "broken", 0), oneStep("rescue", "greet", 0))
	f.startWorker("a")
	f.startWorker("b")

	// All three run at once on two workers: one completes, one fails, one fails and
	// its fallback completes.
	act, execs := f.together("p1", []string{"ok"}, []string{"bad"}, []string{"worse", "rescue"})
	ev := f.waitEvent(act, events.TypeActivationCompleted)
	var ac events.ActivationCompleted
	raw, _ := json.Marshal(ev)
	if err := json.Unmarshal(raw, &ac); err != nil {
		t.Fatal(err)
	}
	want := []events.ActivationResult{
		{Skill: "ok", ExecutionID: execs[0][0], Outcome: events.OutcomeCompleted},
		{Skill: "bad", ExecutionID: execs[1][0], Outcome: events.OutcomeFailed, Error: "permission denied"},
		{Skill: "rescue", ExecutionID: execs[2][1], Outcome: events.OutcomeCompleted},
	}
	if ac.ActivationID != act || ac.Outcome != events.OutcomePartial || len(ac.Executions) != 3 {
		t.Fatalf("activation.completed = %+v", ac)
	}
	for i, w := range want {
		if g := ac.Executions[i]; g.Skill != w.Skill || g.ExecutionID != w.ExecutionID || g.Outcome != w.Outcome || (w.Error != "" && g.Error == "") {
			t.Fatalf("execution %d = %+v, want %+v", i, g, w)
		}
	}
	f.drained()
	if n := len(f.events(act, events.TypeActivationCompleted)); n != 1 {
		t.Fatalf("%d activation.completed, want 1", n)
	}
}

// TestActivationWaitsForEveryJob: while one of the jobs still runs, the others'
// outcomes end nothing; its own outcome ends the activation.
func TestActivationWaitsForEveryJob(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("ok", "greet", 0), oneStep("slow", "wait", 0))
	f.start()
	act, execs := f.together("p2", []string{"ok"}, []string{"slow"})
	released := false
	defer func() { // a failure must not leave the worker's stop waiting on the step
		if !released {
			close(f.release)
		}
	}()
	select {
	case <-f.blocked:
	case <-f.ctx.Done():
		t.Fatal("the slow job never started")
	}
	f.waitEvent(execs[0][0], events.TypeExecutionCompleted)
	// Its worker acks the finished job only after looking at the activation: once
	// only the slow job is unacked, whatever it would have published is there.
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := cons.Info(f.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 1
	}, "the finished job was not acked")
	if evs := f.events(act, events.TypeActivationCompleted); len(evs) != 0 {
		t.Fatalf("activation.completed while a job runs: %v", evs)
	}
	close(f.release)
	released = true
	ev := f.waitEvent(act, events.TypeActivationCompleted)
	if ev["outcome"] != events.OutcomeCompleted {
		t.Fatalf("activation.completed = %v", ev)
	}
}

// TestOutcomesAreCountedForTheRouters: every outcome a worker publishes is counted,
// per skill version, in the stats bucket the routers' success rates read.
func TestOutcomesAreCountedForTheRouters(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("ok", "greet", 0), oneStep("bad", "broken", 0), oneStep("rescue", "greet", 0))
	f.start()
	f.job("s1", "ok")
	f.job("s2", "ok")
	f.job("s3", "bad", "rescue") // bad falls back: a failure of bad, a success of rescue
	kv, err := f.b.KV(f.ctx, f.b.BucketStats())
	if err != nil {
		t.Fatal(err)
	}
	w, err := stats.Watch(f.ctx, kv, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	count := func(name string) string {
		ok, total := w.Success(name, "1.0.0")
		return fmt.Sprintf("%d/%d", ok, total)
	}
	got := func() string { return count("ok") + " " + count("bad") + " " + count("rescue") }
	natstest.Eventually(t, 10*time.Second, func() bool { return got() == "2/2 0/1 1/1" },
		"counts of ok, bad, rescue never reached 2/2 0/1 1/1")
}
