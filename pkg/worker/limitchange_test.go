package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// gatedRuns is the "gated" tool's record: the executions in the order they
// started, how many ran at once when each started, and a hold per execution
// that the test releases.
type gatedRuns struct {
	mu      sync.Mutex
	order   []string
	atStart map[string]int
	active  int
	hold    map[string]chan struct{}
}

func newGatedRuns() *gatedRuns {
	return &gatedRuns{atStart: map[string]int{}, hold: map[string]chan struct{}{}}
}

func (g *gatedRuns) ch(id string) chan struct{} {
	if g.hold[id] == nil {
		g.hold[id] = make(chan struct{})
	}
	return g.hold[id]
}

func (g *gatedRuns) tool() tool.Tool {
	return tool.Func("gated", func(ctx context.Context, c tool.Call) (any, error) {
		g.mu.Lock()
		g.active++
		g.order = append(g.order, c.ExecutionID)
		g.atStart[c.ExecutionID] = g.active
		wait := g.ch(c.ExecutionID)
		g.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.active--
		g.mu.Unlock()
		return "ok", nil
	})
}

func (g *gatedRuns) open(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.ch(id))
}

func (g *gatedRuns) started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

// gatedSkill is version v of a skill whose runs call "gated" under a limit per
// data.key.
func gatedSkill(name string, v byte, limit int) *skill.Skill {
	s := oneStep(name, "gated", 0)
	s.Digest = strings.Repeat(string([]byte{'a' + v}), 64)
	s.Version = "1.0." + string([]byte{'0' + v})
	s.Workflow.Steps[0].Args = map[string]any{"key": "{{ inputs.key }}"}
	s.Concurrency = []skill.Concurrency{{Key: "data.key", Limit: limit}}
	return s
}

// publishVersion makes s the skill's current version, keeping it under its
// version key too.
func (f *fixture) publishVersion(s *skill.Skill) {
	f.t.Helper()
	v, _ := json.Marshal(s)
	if _, err := f.kv.Put(f.ctx, catalog.VersionKey(s.Name, s.Digest), v); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.kv.Put(f.ctx, s.Name, v); err != nil {
		f.t.Fatal(err)
	}
}

// pinnedJob publishes a job of s's version (the plan pinned it) for key.
func (f *fixture) pinnedJob(s *skill.Skill, id, key string) string {
	f.t.Helper()
	ref := events.SkillRef{Name: s.Name, Pool: "default", ExecutionID: events.ExecutionID("/t", id, s.Name), Version: s.Version, Digest: s.Digest}
	in, _ := json.Marshal(map[string]string{"key": key})
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref,
		Inputs: in, Trigger: events.TriggerRef{ID: id, Source: "/t", Type: "com.example.order", Subject: "x"}}
	m, err := bus.Event{ID: j.ExecutionID + ".job", Source: "/t", Type: events.TypeJob, Data: j}.
		JobMsg(f.b.Subjects.Exec("default", s.Name, j.ActivationID, events.StagePlan))
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

// waitsForSlot waits until execution id waits for a slot.
func (f *fixture) waitsForSlot(id string) {
	f.t.Helper()
	natstest.Eventually(f.t, 20*time.Second, func() bool {
		var h run.Held
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(id))
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && h.Gate != ""
	}, "%s does not wait for a slot", id)
}

// startedAre waits until exactly the executions want have started, in that order.
func (g *gatedRuns) startedAre(t *testing.T, msg string, want ...string) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() bool { return len(g.started()) >= len(want) }, "%s: started %v, want %v", msg, g.started(), want)
	if got := g.started(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s: started %v, want %v", msg, got, want)
	}
}

// A skill's concurrency limit raised while runs wait, by a new version, applies
// to the runs waiting, pinned to the old version: the oldest starts at once,
// though no run ended to free a slot, and the runs of the key keep their order:
// a run of the new version that comes after them waits behind them.
func TestRaisedConcurrencyLimitReleasesWaitingRuns(t *testing.T) {
	t.Parallel()
	v1 := gatedSkill("raised", 1, 1)
	f := setup(t)
	f.publishVersion(v1)
	g := newGatedRuns()
	f.tools = mustSet(t, f.tools, g.tool())
	f.start()
	a := f.pinnedJob(v1, "a", "k")
	g.startedAre(t, "the first run", a)
	b1 := f.pinnedJob(v1, "b1", "k")
	f.waitsForSlot(b1)
	b2 := f.pinnedJob(v1, "b2", "k")
	f.waitsForSlot(b2)

	v2 := gatedSkill("raised", 2, 2)
	f.publishVersion(v2)
	// Without the change applied to the runs waiting, none would start while a
	// holds the only slot of the old limit.
	g.startedAre(t, "after the limit was raised to 2", a, b1)
	c := f.pinnedJob(v2, "c", "k")
	f.waitsForSlot(c)
	g.open(a)
	g.startedAre(t, "after the first run ended", a, b1, b2)
	g.open(b1)
	g.startedAre(t, "after the second run ended", a, b1, b2, c)
	g.open(b2)
	g.open(c)
	for _, id := range []string{a, b1, b2, c} {
		f.waitEvent(id, events.TypeExecutionCompleted)
	}
	f.noneWaiting()
}

// A limit lowered while runs wait applies to them too: with 2 runs running
// under a limit of 2 lowered to 1, the runs waiting (pinned to the version
// whose limit is 2) do not start when one of the two ends, but one at a time
// once both have, oldest first.
func TestLoweredConcurrencyLimitHoldsWaitingRuns(t *testing.T) {
	t.Parallel()
	v1 := gatedSkill("lowered", 1, 2)
	f := setup(t)
	f.publishVersion(v1)
	g := newGatedRuns()
	f.tools = mustSet(t, f.tools, g.tool())
	f.start()
	a1 := f.pinnedJob(v1, "a1", "k")
	g.startedAre(t, "the first run", a1)
	a2 := f.pinnedJob(v1, "a2", "k")
	g.startedAre(t, "the second run", a1, a2)
	b1 := f.pinnedJob(v1, "b1", "k")
	f.waitsForSlot(b1)
	b2 := f.pinnedJob(v1, "b2", "k")
	f.waitsForSlot(b2)

	f.publishVersion(gatedSkill("lowered", 2, 1))
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := f.cat.LookupVersion(f.ctx, "lowered", "")
		s, _ := f.cat.Get("lowered")
		return err == nil && s != nil && s.Concurrency[0].Limit == 1
	}, "the catalog did not take the new version")
	// A new run of the new version waits too, behind the others.
	c := f.pinnedJob(gatedSkill("lowered", 2, 1), "c", "k")
	f.waitsForSlot(c)
	g.open(a1)
	// Once the worker's view has seen a1's slot freed, which would release b1
	// under the old limit, the runs are still waiting, in their order.
	gate := slotGate("lowered", "k")
	natstest.Eventually(t, 20*time.Second, func() bool {
		holders, waiting := f.w.GateView(gate)
		return len(holders) == 1 && holders[0] == a2 && len(waiting) == 3
	}, "the view does not show a1's slot freed and three runs waiting")
	if _, waiting := f.w.GateView(gate); strings.Join(waiting, " ") != strings.Join([]string{b1, b2, c}, " ") {
		t.Fatalf("waiting %v, want %v", waiting, []string{b1, b2, c})
	}
	g.open(a2)
	g.startedAre(t, "after both runs ended", a1, a2, b1)
	g.open(b1)
	g.startedAre(t, "after b1 ended", a1, a2, b1, b2)
	g.open(b2)
	g.startedAre(t, "after b2 ended", a1, a2, b1, b2, c)
	g.open(c)
	f.waitEvent(c, events.TypeExecutionCompleted)
	f.noneWaiting()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range []string{b1, b2, c} {
		if g.atStart[id] != 1 {
			t.Fatalf("%s started with %d runs of its key running, want 1 (the limit is 1 now)", id, g.atStart[id])
		}
	}
}

// A throttle changed while runs wait applies to them as to new runs: after a
// rate of 1 a minute is raised to 100 a second, the run that waits for its
// minute starts at once, and so does a run that comes after it, though the old
// rate would start them a minute and two minutes on.
func TestRaisedThrottleAppliesToWaitingRuns(t *testing.T) {
	t.Parallel()
	v1 := oneStep("paced", "greet", 0)
	v1.Digest = strings.Repeat("e1", 32)
	v1.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(time.Minute)}
	f := setup(t)
	f.publishVersion(v1)
	f.start()
	first := f.job("t0", "paced")
	f.waitEvent(first, events.TypeExecutionCompleted)
	second := f.job("t1", "paced")
	natstest.Eventually(t, 20*time.Second, func() bool {
		var h run.Held
		e, err := f.runs.Get(f.ctx, events.RunHeldKey(second))
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && !h.Until.IsZero()
	}, "the second run was not set aside for its start a minute on")

	v2 := oneStep("paced", "greet", 0)
	v2.Digest = strings.Repeat("e2", 32)
	v2.Throttle = &skill.Throttle{Limit: 100, Period: skill.Duration(time.Second)}
	changed := time.Now()
	f.publishVersion(v2)
	f.waitEvent(second, events.TypeExecutionCompleted)
	third := f.job("t2", "paced")
	f.waitEvent(third, events.TypeExecutionCompleted)
	// Well within the old rate's minute, on a loaded machine.
	if d := time.Since(changed); d > 30*time.Second {
		t.Fatalf("the runs completed %v after the rate was raised, want within 30s (the old rate: 1 and 2 minutes)", d)
	}
}

// liveWaits collects the "for" of each execution.waiting an activation's
// follower hears.
func (f *fixture) liveWaits(actID string) func() []string {
	f.t.Helper()
	ch := make(chan *nats.Msg, 64)
	sub, err := f.b.Subscribe(f.ctx, f.b.Subjects.LiveEvents(actID), ch)
	if err != nil {
		f.t.Fatal(err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	f.t.Cleanup(func() { _ = sub.Unsubscribe(); close(done); <-stopped })
	var mu sync.Mutex
	var got []string
	go func() {
		defer close(stopped)
		for {
			var m *nats.Msg
			select {
			case m = <-ch:
			case <-done:
				return
			}
			if !strings.HasSuffix(m.Subject, "."+events.Kind(events.TypeExecutionWaiting)) {
				continue
			}
			var e struct {
				Data events.ExecutionWaiting `json:"data"`
			}
			if json.Unmarshal(m.Data, &e) == nil {
				mu.Lock()
				got = append(got, e.Data.For+": "+e.Data.Detail)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// liveJob publishes a job of skill name, followed live, and returns its
// execution and activation.
func (f *fixture) liveJob(id, name string) (string, string) {
	f.t.Helper()
	ref := events.SkillRef{Name: name, Pool: "default", ExecutionID: events.ExecutionID("/t", id, name), Version: "1.0.0"}
	j := events.Job{ExecutionID: ref.ExecutionID, ActivationID: events.ActivationID("/t", id), Skill: ref, Live: true,
		Inputs: json.RawMessage(`{"who":"ada"}`), Trigger: events.TriggerRef{ID: id, Source: "/t", Subject: "x"}}
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
	return j.ExecutionID, j.ActivationID
}

// Whoever follows a run hears why it has not started when it waits for its
// skill's throttle or its paused skill, as when it waits for a concurrency slot.
func TestThrottledAndPausedRunsSayTheyWait(t *testing.T) {
	t.Parallel()
	th := oneStep("paced", "greet", 0)
	th.Digest = strings.Repeat("f1", 32)
	th.Throttle = &skill.Throttle{Limit: 1, Period: skill.Duration(time.Minute)}
	f := setup(t, th, oneStep("hello", "greet", 0))
	f.start()
	first := f.job("t0", "paced")
	f.waitEvent(first, events.TypeExecutionCompleted)
	throttledAct := events.ActivationID("/t", "t1")
	heardThrottle := f.liveWaits(throttledAct)
	f.liveJob("t1", "paced")
	natstest.Eventually(t, 20*time.Second, func() bool { return len(heardThrottle()) > 0 }, "the throttled run's follower heard no wait")
	if got := heardThrottle()[0]; !strings.HasPrefix(got, "throttle: 1 per 1m0s, starts at ") {
		t.Fatalf("heard %q, want the throttle's wait", got)
	}

	ctl := f.control()
	if ok, err := ctl.Pause(f.ctx, "hello", control.Request{By: "ada", Reason: "maintenance"}); err != nil || !ok {
		t.Fatalf("pause: %v %v", ok, err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		p, err := ctl.Paused(f.ctx)
		return err == nil && p["hello"].By == "ada"
	}, "the pause is not listed")
	pausedAct := events.ActivationID("/t", "p1")
	heardPause := f.liveWaits(pausedAct)
	f.liveJob("p1", "hello")
	natstest.Eventually(t, 20*time.Second, func() bool { return len(heardPause()) > 0 }, "the paused skill's follower heard no wait")
	if got, want := heardPause()[0], "pause: paused by ada: maintenance; runs when the skill is resumed"; got != want {
		t.Fatalf("heard %q, want %q", got, want)
	}
}

// A new version whose concurrency keys on an input the old version's runs do not
// have does not fail those runs: a run pinned to the old version whose trigger
// the new key cannot read waits under its own version's limit, and completes.
func TestNewVersionKeyedOnANewInputSparesOldRuns(t *testing.T) {
	t.Parallel()
	v1 := gatedSkill("rekeyed", 1, 1)
	f := setup(t)
	f.publishVersion(v1)
	g := newGatedRuns()
	f.tools = mustSet(t, f.tools, g.tool())
	f.start()
	a := f.pinnedJob(v1, "a", "k")
	g.startedAre(t, "the first run", a)
	b := f.pinnedJob(v1, "b", "k")
	f.waitsForSlot(b)

	v2 := gatedSkill("rekeyed", 2, 1)
	v2.Concurrency = []skill.Concurrency{{Key: "data.region", Limit: 1}}
	f.publishVersion(v2)
	c := f.pinnedJob(v1, "c", "k") // planned on v1 before the change reached the router
	f.waitsForSlot(c)
	g.open(a)
	g.startedAre(t, "after the first run ended", a, b)
	g.open(b)
	g.startedAre(t, "after the second run ended", a, b, c)
	g.open(c)
	for _, id := range []string{a, b, c} {
		f.waitEvent(id, events.TypeExecutionCompleted)
	}
}
