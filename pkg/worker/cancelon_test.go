package worker_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/worker"
)

// A run's cancel_on keys are deleted when its outcome is recorded — at the end
// of its fallback chain, not at a fallback — and no other run's.
func TestEndedRunDropsItsCancelOnKeys(t *testing.T) {
	t.Parallel()
	rule := []skill.CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: skill.Duration(time.Hour)}}
	remind, failing := oneStep("remind", "greet", 0), oneStep("remind-first", "broken", 0)
	remind.CancelOn, failing.CancelOn = rule, rule
	f := setup(t, remind, failing, oneStep("hello", "wait", 0))
	file := func(skill, exec string) string {
		key := events.RunCancelOnKey(skill, "com.example.order.paid", "0123456789abcdef", exec)
		if _, err := f.runs.Create(f.ctx, key, []byte(`{}`), jetstream.KeyTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
		return key
	}
	gone := func(key string) bool {
		_, err := f.runs.Get(f.ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}
	other := file("remind", events.ExecutionID("/t", "other", "remind"))
	own := file("remind", events.ExecutionID("/t", "j1", "remind"))
	first := file("remind-first", events.ExecutionID("/t", "j2", "remind-first"))
	f.start()

	exec := f.job("j1", "remind")
	natstest.Eventually(t, 30*time.Second, func() bool {
		o, err := f.outcome(exec)
		return err == nil && o != nil && o.Status == run.StatusCompleted
	}, "remind did not complete")
	natstest.Eventually(t, 10*time.Second, func() bool { return gone(own) }, "the completed run's cancel_on key is left")

	// remind-first fails and falls back to hello, which waits, then completes.
	f.job("j2", "remind-first", "hello")
	select {
	case <-f.blocked:
	case <-f.ctx.Done():
		t.Fatal("the fallback did not start")
	}
	if gone(first) {
		t.Fatal("a run's cancel_on key was deleted at its fallback, while the run goes on")
	}
	close(f.release)
	last := events.ExecutionID("/t", "j2", "hello")
	natstest.Eventually(t, 30*time.Second, func() bool {
		o, err := f.outcome(last)
		return err == nil && o != nil && o.Status == run.StatusCompleted
	}, "the fallback did not complete")
	natstest.Eventually(t, 10*time.Second, func() bool { return gone(first) }, "the fallen-back run's cancel_on key is left at the chain's end")
	f.drained()
	if gone(other) {
		t.Fatal("another run's cancel_on key was deleted")
	}
}

// At the end of a fallback chain a worker lists the cancel_on keys only of the
// executions whose skill has cancel_on: a skill without has none, and each list
// is a consumer created on the bucket's stream.
func TestChainEndListsCancelOnKeysOnlyOfSkillsWithCancelOn(t *testing.T) {
	t.Parallel()
	rule := []skill.CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: skill.Duration(time.Hour)}}
	plain, ruled := oneStep("plain-first", "broken", 0), oneStep("ruled-first", "broken", 0)
	ruled.CancelOn = rule
	f := setup(t, plain, ruled, oneStep("after", "greet", 0))
	var mu sync.Mutex
	listed := map[string]int{}
	defer worker.SetCancelOnListHook(func(_, exec string) {
		mu.Lock()
		listed[exec]++
		mu.Unlock()
	})()
	f.start()
	for _, first := range []string{"plain-first", "ruled-first"} {
		f.job("c-"+first, first, "after")
		f.waitEvent(events.ExecutionID("/t", "c-"+first, "after"), events.TypeExecutionCompleted)
	}
	f.drained()
	mu.Lock()
	defer mu.Unlock()
	if n := listed[events.ExecutionID("/t", "c-plain-first", "plain-first")]; n != 0 {
		t.Errorf("the cancel_on keys of an execution of a skill without cancel_on were listed %d times", n)
	}
	if n := listed[events.ExecutionID("/t", "c-ruled-first", "ruled-first")]; n != 1 {
		t.Errorf("the cancel_on keys of an execution of a skill with cancel_on were listed %d times, want 1", n)
	}
}
