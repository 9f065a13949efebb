package router_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/skill"
)

// keepVersion stores s under its version key too, as the registry keeps a
// version after the skill changes or is deleted.
func (f *fixture) keepVersion(s *skill.Skill) {
	f.t.Helper()
	b, _ := json.Marshal(s)
	if _, err := f.kv.Put(f.ctx, catalog.VersionKey(s.Name, s.Digest), b); err != nil {
		f.t.Fatal(err)
	}
}

// deleteSkill removes s from the catalog and waits until the catalog has.
func (f *fixture) deleteSkill(s *skill.Skill) {
	f.t.Helper()
	if err := f.kv.Delete(f.ctx, s.Name); err != nil {
		f.t.Fatal(err)
	}
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		_, ok := f.cat.Get(s.Name)
		return !ok
	}, "the catalog still has %s", s.Name)
}

// A debounced skill deleted while a burst is pending still runs the burst, with
// its last trigger's data, on the version the triggers were folded for: the
// senders were told it runs later. So does a batch.
func TestDeletedSkillStillRunsItsPendingBurstAndBatch(t *testing.T) {
	t.Parallel()
	db := debounced(4*time.Second, 30*time.Second)
	bt := batched(10, 4*time.Second)
	f := setupBatch(t, db, bt)
	f.keepVersion(db)
	f.keepVersion(bt)
	f.change("d1", "readme", 1)
	f.change("d2", "readme", 2)
	f.order("o1", "shop")
	f.order("o2", "shop")
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "d2"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedDebounced {
		t.Fatalf("d2: %+v", u)
	}
	f.event(events.ActivationID("/test", "o2"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedBatched {
		t.Fatalf("o2: %+v", u)
	}
	f.deleteSkill(db)
	f.deleteSkill(bt)

	act := events.ActivationID(router.DebounceSource("digest"), events.ActivationID("/test", "d2"))
	j := f.planJob(act)
	if j.Skill.Name != "digest" || j.Skill.Digest != db.Digest || string(j.Inputs) != `{"doc":"readme","n":2}` {
		t.Fatalf("the burst's run: skill %+v, inputs %s; want digest at %s with d2's data", j.Skill, j.Inputs, db.Digest)
	}
	bj := f.job("skillbus.exec.default.ingest")
	if bj.Skill.Digest != bt.Digest {
		t.Fatalf("the batch's run: skill %+v, want ingest at %s", bj.Skill, bt.Digest)
	}
	var in struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	if err := json.Unmarshal(bj.Inputs, &in); err != nil || len(in.Events) != 2 || in.Events[0].ID != "o1" || in.Events[1].ID != "o2" {
		t.Fatalf("the batch's run has %s, want o1 and o2", bj.Inputs)
	}
}

// Without the version the triggers were taken for (no longer kept), the run
// is not lost silently: it is dead-lettered, with its data and a reason that
// says the skill was deleted with it pending.
func TestDeletedSkillsBurstWithoutItsVersionIsDeadLettered(t *testing.T) {
	t.Parallel()
	db := debounced(4*time.Second, 30*time.Second)
	f := setup(t, db)
	f.change("d1", "readme", 1)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "d1"), events.TypeRouteUnmatched, &u)
	f.deleteSkill(db)
	act := events.ActivationID(router.DebounceSource("digest"), events.ActivationID("/test", "d1"))
	f.event(act, events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedUnknownSkill || u.Reason != `skill "digest" was deleted while a debounced burst of its triggers was pending, and its version d1gest012345 is no longer kept: the run's triggers are kept in the dead letters` {
		t.Fatalf("the burst's run: %+v", u)
	}
	dlq, _ := f.b.JS.Stream(f.ctx, f.b.StreamDead())
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := dlq.Info(f.ctx)
		return err == nil && info.State.Msgs == 1
	}, "the DLQ does not hold the burst's run")
	m, err := dlq.GetMsg(f.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "skillbus.dead._trigger" || m.Header.Get(events.HeaderDeadCode) != events.UnmatchedUnknownSkill || string(m.Data) != `{"doc": "readme", "n": 1}` {
		t.Fatalf("dead letter on %s, code %s, data %s", m.Subject, m.Header.Get(events.HeaderDeadCode), m.Data)
	}
}

// A deleted skill's burst keeps the delegation depth of its last trigger, as
// the burst of a skill still in the catalog does: a skill's skill-tool calls
// cannot reset the depth bound by way of a deleted debounced skill.
func TestDeletedSkillsBurstKeepsItsDepth(t *testing.T) {
	t.Parallel()
	db := debounced(4*time.Second, 30*time.Second)
	f := setupBatch(t, db, hello)
	f.keepVersion(db)
	f.publish("skillbus.trigger.skill.hello", ce("root", "io.skillbus.invoke"), `{}`)
	root := events.ActivationID("/test", "root")
	if d := f.planJob(root).Depth; d != 0 {
		t.Fatalf("root depth %d", d)
	}
	h := ce("d1", "com.example.change")
	h["ce-"+events.ExtParent] = root
	f.publish("skillbus.trigger.com.example.change", h, `{"doc": "readme", "n": 1}`)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "d1"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedDebounced {
		t.Fatalf("d1: %+v", u)
	}
	f.deleteSkill(db)
	act := events.ActivationID(router.DebounceSource("digest"), events.ActivationID("/test", "d1"))
	if j := f.planJob(act); j.Depth != 1 {
		t.Fatalf("the deleted skill's burst run has depth %d, want 1, one below its trigger's parent", j.Depth)
	}
}
