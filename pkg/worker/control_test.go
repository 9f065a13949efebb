package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
)

func (f *fixture) control() *control.Controller {
	f.t.Helper()
	c, err := control.New(f.ctx, f.b)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) cancel(id string) control.Cancellation {
	f.t.Helper()
	res, err := f.control().Cancel(f.ctx, id, control.Request{By: "ada", Reason: "wrong input"})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// outcomes counts the outcome events EVENTS holds for an execution, of every type.
func (f *fixture) outcomes(id string) int {
	f.t.Helper()
	n := 0
	for _, typ := range run.OutcomeTypes() {
		n += len(f.events(id, typ))
	}
	return n
}

// waitCancelled waits for the execution's execution.cancelled and checks who and
// why it names.
func (f *fixture) waitCancelled(id string) map[string]any {
	f.t.Helper()
	ev := f.waitEvent(id, events.TypeExecutionCancelled)
	if ev["by"] != "ada" || ev["reason"] != "wrong input" {
		f.t.Fatalf("execution.cancelled %v: want by ada, reason wrong input", ev)
	}
	rec, err := f.outcome(id)
	if err != nil || rec == nil || rec.Status != run.StatusCancelled || rec.Error != "cancelled by ada: wrong input" {
		f.t.Fatalf("outcome %+v (%v), want cancelled by ada", rec, err)
	}
	return ev
}

// A queued run never starts: cancelled while no worker runs (and recorded before
// any worker starts, as after a restart of the fleet), its worker ends it with
// execution.cancelled without calling its tool; --skill cancels every queued run of
// a skill and lists them; a run that ended is reported as such.
func TestCancelQueuedRunsNeverStart(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0), oneStep("other", "echo", 0))
	one := f.job("1", "hello")
	res := f.cancel(one)
	if res.State != control.StateActive || res.ExecutionID != one {
		t.Fatalf("cancel of a queued run: %+v", res)
	}
	more := []string{f.job("2", "hello"), f.job("3", "hello")}
	f.job("4", "other")
	cs, err := f.control().CancelSkill(f.ctx, "hello", time.Time{}, control.Request{By: "ada", Reason: "wrong input"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.ExecutionID)
	}
	if want := append([]string{one}, more...); strings.Join(got, ",") != strings.Join(want, ",") || !cs[0].Again {
		t.Fatalf("CancelSkill cancelled %v (first again: %v), want %v, the first a second time", got, cs[0].Again, want)
	}
	f.start()
	for _, id := range append([]string{one}, more...) {
		ev := f.waitCancelled(id)
		if ev["started"] != false {
			t.Errorf("execution.cancelled of a queued run says started: %v", ev)
		}
	}
	f.drained()
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times: a cancelled queued run ran", n)
	}
	// The other skill's run was not touched, and a cancel now finds it ended.
	other := events.ExecutionID("/t", "4", "other")
	f.waitEvent(other, events.TypeExecutionCompleted)
	if res := f.cancel(other); res.State != control.StateEnded || res.Outcome != run.StatusCompleted ||
		!strings.Contains(res.String(), "already ended (completed)") {
		t.Fatalf("cancel of an ended run: %+v %q", res, res.String())
	}
	if f.outcomes(other) != 1 {
		t.Fatal("a cancel of an ended run added an outcome")
	}
}

// A job whose run a router cancelled before publishing it (a cancel_on event
// kept before it, a runs cancel --skill of a pending burst) says so, and its
// worker reads the cancel from KV runs even while its own copy of the cancels is
// behind: the run never starts. A job that does not say so takes the fast path,
// which reads only that copy: this is what the header is for.
func TestJobCancelledBeforeItWasPublished(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0))
	f.start()
	marked, unmarked := events.ExecutionID("/t", "m", "hello"), events.ExecutionID("/t", "u", "hello")
	unset := worker.SetCancelWatchBehind(func(id string) bool { return id == marked || id == unmarked })
	defer unset()
	for _, id := range []string{marked, unmarked} {
		if _, err := f.control().CancelKnown(f.ctx, id, control.Request{By: "ada", Reason: "wrong input"}); err != nil {
			t.Fatal(err)
		}
	}
	f.jobWith(map[string]string{events.HeaderCheckCancel: "1"}, "default", "m", "", "hello")
	ev := f.waitCancelled(marked)
	if ev["started"] != false {
		t.Errorf("execution.cancelled says started: %v", ev)
	}
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times: the marked run ran", n)
	}
	// Unmarked, the same job runs: the worker's copy does not have its cancel.
	f.jobWith(nil, "default", "u", "", "hello")
	f.waitEvent(unmarked, events.TypeExecutionCompleted)
}

// A running multi-step run stops at its next step boundary: the step under way
// finishes, the later ones never run, and the outcome is execution.cancelled,
// naming who and why.
func TestCancelRunningRunStopsAtTheNextStep(t *testing.T) {
	t.Parallel()
	s := &skill.Skill{Name: "long", Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", Digest: strings.Repeat("ef", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{
			{ID: "first", Tool: "wait"},
			{ID: "second", Tool: "greet", Args: map[string]any{"who": "{{ first }}"}},
			{ID: "third", Tool: "greet", Args: map[string]any{"who": "{{ second }}"}},
		}}}
	f := setup(t, s)
	seen := &logged{msg: "stopping a cancelled execution"}
	f.startWorkerOn(f.b, "w", slog.New(seen), nil)
	id := f.job("1", "long")
	<-f.blocked
	if res := f.cancel(id); res.State != control.StateActive {
		t.Fatalf("cancel of a running run: %+v", res)
	}
	natstest.Eventually(t, 10*time.Second, seen.seen, "the worker did not see the cancel")
	close(f.release)
	ev := f.waitCancelled(id)
	if ev["started"] != true {
		t.Errorf("execution.cancelled of a running run: %v", ev)
	}
	f.drained()
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times: steps after the boundary ran", n)
	}
	if len(f.events(id, events.TypeStepStarted)) != 1 || f.outcomes(id) != 1 {
		t.Fatalf("%d steps started, %d outcomes: want 1 and 1", len(f.events(id, events.TypeStepStarted)), f.outcomes(id))
	}
}

// A running exec step is signalled: its process, which ignores SIGTERM, is killed
// when the worker's grace is over, and the run ends cancelled, naming the step.
func TestCancelSignalsARunningExecStep(t *testing.T) {
	t.Parallel()
	s := &skill.Skill{Name: "sleepy", Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", Digest: strings.Repeat("fa", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{
			{ID: "nap", Tool: "exec", Args: map[string]any{"command": []any{"sleep", "60"}, "timeout": "2m"}},
			{ID: "after", Tool: "greet", Args: map[string]any{"who": "x"}},
		}}}
	f := setup(t, s)
	f.tools = mustSet(t, f.tools, tool.NewExec(tool.ExecConfig{}))
	const grace = time.Second
	f.startWorkerOn(f.b, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *worker.Config) {
		c.CancelGrace, c.AckWait = grace, 5*time.Second
	})
	id := f.job("1", "sleepy")
	f.waitEvent(id, events.TypeStepStarted)
	start := time.Now()
	f.cancel(id)
	ev := f.waitCancelled(id)
	// Under load the watch, the kill and the outcome take a moment more than the
	// grace; a run left to sleep would take a minute.
	if took := time.Since(start); took > grace+15*time.Second {
		t.Fatalf("the run ended %s after the cancel; the grace is %s", took, grace)
	}
	if ev["step_id"] != "nap" {
		t.Errorf("execution.cancelled names step %v, want nap", ev["step_id"])
	}
	// Its log says cancelled, by whom, at the step cut short: not a fatal failure.
	if l, _ := ev["log"].(map[string]any); l["status"] != "cancelled" || l["error"] != "cancelled by ada: wrong input" || l["failed_step"] != "nap" || l["class"] != nil {
		t.Errorf("the cancelled run's log: %v; want status cancelled, by ada, at step nap, no class", l)
	}
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatal("the step after the signalled one ran")
	}
}

// A cancel racing completion leaves exactly one outcome per execution: completed,
// or cancelled. The runs take three steps of 10ms each, and each is cancelled as
// soon as it is published, so the cancels land before, during and after them.
func TestCancelRacingCompletionHasOneOutcome(t *testing.T) {
	t.Parallel()
	s := &skill.Skill{Name: "quick", Description: "d", Kind: skill.KindWorkflow, Version: "1.0.0", Digest: strings.Repeat("ab", 32),
		Workflow: &skill.Workflow{Steps: []skill.Step{{ID: "a", Tool: "work"}, {ID: "b", Tool: "work"}, {ID: "c", Tool: "work"}}}}
	f := setup(t, s)
	f.tools = mustSet(t, f.tools, tool.Func("work", func(ctx context.Context, _ tool.Call) (any, error) {
		select { // a step that takes a moment, as real ones do
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
		return "done", nil
	}))
	f.start()
	ctl := f.control()
	var ids []string
	for i := range 30 {
		id := f.job(string(rune('a'+i)), "quick")
		ids = append(ids, id)
		if i%3 == 2 {
			continue // left alone: these complete
		}
		if _, err := ctl.Cancel(f.ctx, id, control.Request{By: "ada"}); err != nil {
			t.Fatal(err)
		}
	}
	f.drained()
	kinds := map[string]int{}
	for _, id := range ids {
		natstest.Eventually(t, 10*time.Second, func() bool { return f.outcomes(id) > 0 }, "no outcome for %s", id)
		if n := f.outcomes(id); n != 1 {
			t.Fatalf("%s has %d outcomes, want 1", id, n)
		}
		rec, err := f.outcome(id)
		if err != nil {
			t.Fatal(err)
		}
		kinds[rec.Status]++
	}
	if kinds[run.StatusCompleted]+kinds[run.StatusCancelled] != len(ids) || kinds[run.StatusCompleted] < 10 {
		t.Fatalf("outcomes %v: want only completed and cancelled, the 10 left alone completed", kinds)
	}
	t.Logf("outcomes: %v", kinds)
}

// A run paused for a confirmation is cancelled at once, without an answer: its
// job is released to a worker, which ends it; the second step never runs and the
// paused record is gone.
func TestCancelARunWaitingForConfirmation(t *testing.T) {
	t.Parallel()
	f := setup(t, twoSteps("careful", confirmSecond(time.Hour)))
	f.start()
	id := f.job("1", "careful")
	f.waitEvent(id, events.TypeConfirmationRequested)
	if res := f.cancel(id); res.State != control.StatePaused || res.Skill != "careful" {
		t.Fatalf("cancel of a paused run: %+v", res)
	}
	f.waitCancelled(id)
	f.drained()
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1 (the step before the confirmation)", n)
	}
	if _, err := f.runs.Get(f.ctx, events.RunPausedKey(id)); err != jetstream.ErrKeyNotFound {
		t.Fatalf("paused record after the cancel: %v", err)
	}
	if f.outcomes(id) != 1 {
		t.Fatal("more than one outcome")
	}
}

// A paused skill's runs wait, holding no worker and burning no retry; resumed,
// each runs exactly once. A held run can be cancelled.
func TestPausedSkillHoldsItsRunsUntilResumed(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0), oneStep("other", "echo", 0))
	f.start()
	ctl := f.control()
	req := control.Request{By: "ada", Reason: "maintenance"}
	if ok, err := ctl.Pause(f.ctx, "hello", req); err != nil || !ok {
		t.Fatalf("pause: %v %v", ok, err)
	}
	if ok, _ := ctl.Pause(f.ctx, "hello", req); ok {
		t.Fatal("a second pause reports the skill as running until then")
	}
	// The worker sees the pause a moment after it is written.
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, err := ctl.Paused(f.ctx)
		return err == nil && p["hello"].By == "ada"
	}, "the pause is not listed")
	var ids []string
	for i := range 5 {
		ids = append(ids, f.job(string(rune('a'+i)), "hello"))
	}
	other := f.job("z", "other")
	f.waitEvent(other, events.TypeExecutionCompleted) // the paused skill holds up no other
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _ := ctl.Paused(f.ctx)
		return p["hello"].Held == 5
	}, "the paused skill's runs are not all held")
	f.drained() // held: acked, holding no worker
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("a paused skill's run ran %d times", n)
	}
	// One held run is cancelled; the others run once resumed.
	if res := f.cancel(ids[0]); res.State != control.StateHeld {
		t.Fatalf("cancel of a held run: %+v", res)
	}
	f.waitCancelled(ids[0])
	n, was, err := ctl.Resume(f.ctx, "hello", req)
	if err != nil || !was || n != 4 {
		t.Fatalf("resume released %d (paused: %v, %v), want 4", n, was, err)
	}
	for _, id := range ids[1:] {
		done := f.waitEvent(id, events.TypeExecutionCompleted)
		if done["attempt"] != float64(1) {
			t.Errorf("a held run completed on attempt %v, want 1", done["attempt"])
		}
	}
	f.drained()
	if n := f.calls["greet"].Load(); n != 4 {
		t.Fatalf("greet called %d times after the resume, want 4", n)
	}
	for _, id := range ids {
		if n := f.outcomes(id); n != 1 {
			t.Fatalf("%s has %d outcomes, want 1", id, n)
		}
	}
	if p, _ := ctl.Paused(f.ctx); len(p) != 0 {
		t.Fatalf("still paused after resume: %v", p)
	}
	if _, was, _ := ctl.Resume(f.ctx, "hello", req); was {
		t.Fatal("a second resume reports the skill as paused")
	}
}

// The records the watch reads are JSON a person could write by hand; one that is
// not is ignored, and the worker goes on, honouring the readable ones.
func TestUnreadableControlRecordIsIgnored(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0), oneStep("other", "greet", 0))
	if _, err := f.runs.Put(f.ctx, events.RunCancelKey("nope"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(run.Hold{By: "ada"})
	if _, err := f.runs.Put(f.ctx, events.SkillHoldKey("other"), b); err != nil {
		t.Fatal(err)
	}
	f.start()
	f.waitEvent(f.job("1", "hello"), events.TypeExecutionCompleted)
	// The readable hold beside the unreadable records is honoured.
	held := f.job("2", "other")
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, events.RunHeldKey(held))
		return err == nil
	}, "the paused skill's run is not held")
	f.drained()
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1 (the paused skill's run is not)", n)
	}
}

// A pause and the jobs it holds outlast KV runs' TTL: a held job was acked, so its
// record is its only copy, and a hold that expired would leave running workers
// holding a skill that new workers run.
func TestPauseOutlastsTheRunsTTL(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0))
	// KV runs as every process configures it, but keeping entries seconds, not days.
	for _, kc := range f.b.Buckets() {
		if kc.Bucket == f.b.BucketRuns() {
			kc.TTL = 3 * time.Second
			if _, err := f.b.JS.UpdateKeyValue(f.ctx, kc); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctl := f.control()
	req := control.Request{By: "ada", Reason: "maintenance"}
	if ok, err := ctl.Pause(f.ctx, "hello", req); err != nil || !ok {
		t.Fatalf("pause: %v %v", ok, err)
	}
	f.start() // reads the hold before it takes a job
	one := f.job("1", "hello")
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _ := ctl.Paused(f.ctx)
		return p["hello"].Held == 1
	}, "the paused skill's run is not held")
	// An ordinary entry written after them expires; they do not.
	if _, err := f.runs.Put(f.ctx, "ordinary", []byte("x")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, "ordinary")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, "an ordinary entry of KV runs did not expire")
	if p, err := ctl.Paused(f.ctx); err != nil || p["hello"].By != "ada" || p["hello"].Held != 1 {
		t.Fatalf("after KV runs' TTL the pause is %+v (%v), want hello paused by ada, 1 held", p["hello"], err)
	}
	two := f.job("2", "hello")
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _ := ctl.Paused(f.ctx)
		return p["hello"].Held == 2
	}, "a run after KV runs' TTL is not held")
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("a paused skill's run ran %d times", n)
	}
	n, was, err := ctl.Resume(f.ctx, "hello", req)
	if err != nil || !was || n != 2 {
		t.Fatalf("resume released %d (paused: %v, %v), want 2", n, was, err)
	}
	f.waitEvent(one, events.TypeExecutionCompleted)
	f.waitEvent(two, events.TypeExecutionCompleted)
}

// A cancel of an id nothing knows of (mistyped) is ErrNoExecution and records no
// cancel; a queued job's execution is found in JOBS (TestCancelQueuedRunsNeverStart).
func TestCancelOfAnUnknownExecution(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0))
	f.job("1", "hello") // JOBS holds another execution's job
	bogus := events.ExecutionID("/t", "never-triggered", "hello")
	_, err := f.control().Cancel(f.ctx, bogus, control.Request{By: "ada"})
	if !errors.Is(err, control.ErrNoExecution) || !strings.Contains(err.Error(), "no such execution: "+bogus) {
		t.Fatalf("cancel of an unknown execution: %v, want no such execution: %s", err, bogus)
	}
	if _, err := f.runs.Get(f.ctx, events.RunCancelKey(bogus)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a cancel was recorded for an unknown execution: %v", err)
	}
}

// A sleeping run is paused like one waiting for a confirmation: a cancel ends it
// at once, reported "was paused", and its steps after the sleep never run.
func TestCancelOfASleepingRun(t *testing.T) {
	t.Parallel()
	f := setup(t, napper("napper", skill.Step{Sleep: skill.Duration(time.Hour)}))
	f.start()
	id := f.job("1", "napper")
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		return err == nil && p != nil && p.Kind == run.PausedSleep
	}, "no sleeping record")
	res := f.cancel(id)
	if res.State != control.StatePaused || !strings.Contains(res.String(), "cancelled, was paused") {
		t.Fatalf("cancel of a sleeping run: %+v (%s)", res, res)
	}
	f.waitCancelled(id)
	f.drained()
	if n := f.calls["greet"].Load(); n != 1 {
		t.Fatalf("greet called %d times, want 1 (the step before the sleep)", n)
	}
}

// A run the router queued (its job published create-only, as every plan job is)
// and no worker took yet is found by a cancel: cancelled before any worker of its
// pool runs, it ends execution.cancelled when one starts, and never runs.
func TestCancelOfARoutedRunNoWorkerTookYet(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("hello", "greet", 0))
	f.startRouter()
	m, err := bus.Event{ID: "q1", Source: "/t", Type: "io.example.greet", Data: map[string]any{"who": "ada"}}.
		Msg(f.b.Subjects.TriggerSkill("hello"))
	if err != nil {
		t.Fatal(err)
	}
	bt := f.b.Batch()
	bt.Publish(m)
	if err := bt.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.triggersRouted()
	id := events.ExecutionID("/t", "q1", "hello")
	if res := f.cancel(id); res.State != control.StateActive || res.ExecutionID != id {
		t.Fatalf("cancel of a routed, queued run: %+v", res)
	}
	f.start()
	if ev := f.waitCancelled(id); ev["started"] != false {
		t.Errorf("execution.cancelled of a queued run says started: %v", ev)
	}
	f.drained()
	if n := f.calls["greet"].Load(); n != 0 {
		t.Fatalf("greet called %d times: a cancelled queued run ran", n)
	}
}
