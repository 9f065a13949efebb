package worker_test

import (
	"encoding/json"
	"slices"
	"strconv"
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
)

// republished waits for the job published again on subject and checks that it
// carries the run's queue priority.
func (f *fixture) republished(subject string, prio int) {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		f.t.Fatal(err)
	}
	var m *jetstream.RawStreamMsg
	natstest.Eventually(f.t, 20*time.Second, func() bool {
		m, err = s.GetLastMsgForSubject(f.ctx, subject)
		return err == nil
	}, "no job on %s: %v", subject, err)
	if got := m.Header.Get(events.HeaderQueuePriority); got != strconv.Itoa(prio) {
		f.t.Errorf("job on %s has queue priority %q, want %d", subject, got, prio)
	}
}

// A run of priority 300 resumed after its confirmation is published again on
// its lane with its priority (as after a sleep or a wait: the router resumes
// all three alike), and it overtakes the runs of priority 0 queued while it
// waited for the answer.
func TestResumedRunKeepsItsQueuePriority(t *testing.T) {
	t.Parallel()
	vip := ticket("vip", "", "300")
	vip.Workflow.Steps = append(vip.Workflow.Steps, skill.Step{ID: "again", Tool: "order", Args: map[string]any{"who": "{{ inputs.who }} again"}})
	vip.Workflow.Confirmations = []skill.Confirmation{{Step: "again", Message: "again?", Timeout: skill.Duration(time.Hour)}}
	plain := ticket("plain", "", "")
	plain.Digest = strings.Repeat("9a", 32)
	f := setup(t, vip, plain)
	st := newStarts("first")
	w := f.startOne(st)
	f.startRouter()
	f.jobPrio("default", "vip", "high", 300)
	id := events.ExecutionID("/t", "high", "vip")
	natstest.Eventually(t, 20*time.Second, func() bool {
		p, _, err := run.LoadPaused(f.ctx, f.runs, id)
		return err == nil && p != nil && p.Step == "again"
	}, "the run did not pause at its confirmation")
	f.jobPrio("default", "plain", "first", 0)
	<-st.held
	lows := []string{"low1", "low2"}
	for _, l := range lows {
		f.jobPrio("default", "plain", l, 0)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return worker.LaneWaiting(w, "default", 0) == 2 }, "low runs not held")
	f.answer(id, "again", true)
	natstest.Eventually(t, 20*time.Second, func() bool {
		return worker.LaneWaiting(w, "default", 0)+worker.LaneWaiting(w, "default", 300) == 3
	}, "the resumed run is not held")
	close(st.release)
	want := []string{"high", "first", "high again", "low1", "low2"}
	natstest.Eventually(t, 30*time.Second, func() bool { return len(st.seen()) >= len(want) }, "runs started: %v", st.seen())
	if got := st.seen(); !slices.Equal(got, want) {
		t.Errorf("runs started in the order\n%v\nwant\n%v", got, want)
	}
	f.republished(f.b.Subjects.Exec(events.LanePool("default", 2), "vip", events.ActivationID("/t", "high"), events.StageAnswered("again")), 300)
}

// A run of priority 300 that waited for a concurrency slot is published again
// on its lane, with its priority, when the slot frees.
func TestRunReleasedFromASlotKeepsItsQueuePriority(t *testing.T) {
	t.Parallel()
	s := keyedSkill("per-customer", 1)
	s.QueuePriority = "300"
	f := setup(t, s)
	o := newOverlap("a")
	f.tools = mustSet(t, f.tools, o.tool())
	f.start()
	job := func(id string) string {
		ref := events.SkillRef{Name: s.Name, Pool: "default", ExecutionID: events.ExecutionID("/t", id, s.Name), Version: "1.0.0", QueuePriority: 300}
		j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref,
			Inputs: json.RawMessage(`{"key":"a"}`), Trigger: events.TriggerRef{ID: id, Source: "/t", Type: "com.example.order", Subject: "x"}}
		m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob, Data: j}.
			JobMsg(f.b.Subjects.Exec(ref.LanePool(), s.Name, j.ActivationID, events.StagePlan))
		if err != nil {
			t.Fatal(err)
		}
		bt := f.b.Batch()
		bt.Publish(m)
		if err := bt.Wait(f.ctx); err != nil {
			t.Fatal(err)
		}
		return j.ExecutionID
	}
	job("a0")
	<-o.started
	second := job("a1")
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := f.runs.Get(f.ctx, events.RunHeldKey(second))
		return err == nil
	}, "the second run does not wait for the slot")
	o.open("a")
	f.waitEvent(second, events.TypeExecutionCompleted)
	f.republished(f.b.Subjects.Exec(events.LanePool("default", 2), s.Name, events.ActivationID("/t", "a1"), events.StageSlot), 300)
}
