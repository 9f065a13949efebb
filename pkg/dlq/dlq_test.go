package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/dlq"
	"github.com/skillbus/skillbus/pkg/skill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	t   *testing.T
	ctx context.Context
	b   *bus.Bus
	q   *dlq.Queue
	kv  jetstream.KeyValue
}

func setup(t *testing.T) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	q, err := dlq.New(dlq.Config{Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, b: b, q: q, kv: kv}
}

func digest(c string) string { return strings.Repeat(c, 64) }

// putSkill publishes a version of a skill to the catalog as the registry does: its
// version key, and its current key when current.
func (f *fixture) putSkill(name, version, dig string, current bool) {
	f.t.Helper()
	s := &skill.Skill{Name: name, Description: "d", Kind: skill.KindWorkflow, Version: version, Digest: dig}
	v, _ := json.Marshal(s)
	if _, err := f.kv.Put(f.ctx, catalog.VersionKey(name, dig), v); err != nil {
		f.t.Fatal(err)
	}
	if current {
		if _, err := f.kv.Put(f.ctx, name, v); err != nil {
			f.t.Fatal(err)
		}
	}
}

// deadJob writes a dead letter as a worker does.
func (f *fixture) deadJob(skillName, execID, inputs string) {
	f.t.Helper()
	dl := events.DeadLetter{
		Job: events.Job{
			ExecutionID: execID, ActivationID: "act-" + execID,
			Skill:   events.SkillRef{Name: skillName, Version: "1.0.0", Digest: digest("1"), Pool: "default", ExecutionID: execID},
			Inputs:  json.RawMessage(inputs),
			Trigger: events.TriggerRef{ID: "t-" + execID, Source: "/test", Type: "com.example.thing", Subject: "skillbus.trigger.com.example.thing", Seq: 7},
			History: []events.Attempt{{Skill: "first", ExecutionID: "x", Class: "fatal", Error: "first failed", Deliveries: 1}},
			Answers: map[string]events.Answer{"step": {Approved: true, By: "ada"}},
			Repair:  &events.JobRepair{ID: "r1", BudgetKey: "k", Declined: "repair r1 rejected", Step: "call"},
		},
		Class: "fatal", Reason: "permission denied", StepID: "call", Deliveries: 2, Worker: "w1",
	}
	bt := f.b.Batch()
	bt.PublishEvent(f.b.Subjects.Dead(skillName), bus.Event{ID: execID + ".dead", Source: "/skillbus/worker", Type: events.TypeJob,
		Meta: bus.Meta{ExecutionID: execID}, Data: dl})
	if err := bt.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// deadTrigger writes a rejected trigger as the router does.
func (f *fixture) deadTrigger(seq, ceID string, structured bool, traceparent ...string) {
	f.t.Helper()
	m := nats.NewMsg(f.b.Subjects.Dead("_trigger"))
	subject := f.b.Subjects.TriggerSkill("ghost")
	if structured {
		m.Header.Set("Content-Type", "application/cloudevents+json")
		m.Data = []byte(`{"specversion":"1.0","id":"` + ceID + `","source":"/test","type":"io.skillbus.invoke","data":{"n":1}}`)
	} else {
		for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": ceID, "ce-source": "/test", "ce-type": "com.example.ghost", "Content-Type": "application/json"} {
			m.Header.Set(k, v)
		}
		subject = f.b.Subjects.Trigger("com.example.ghost")
		m.Data = []byte(`{"n":1}`)
	}
	for _, tp := range traceparent {
		m.Header.Set("ce-traceparent", tp)
	}
	m.Header.Set(bus.HeaderMsgID, "trigger."+seq+".dead")
	m.Header.Set("Skillbus-Code", events.UnmatchedUnknownSkill)
	m.Header.Set("Skillbus-Reason", "no skill ghost")
	m.Header.Set("Skillbus-Subject", subject)
	m.Header.Set("Skillbus-Trigger-Seq", seq)
	if _, err := f.b.JS.PublishMsg(f.ctx, m); err != nil {
		f.t.Fatal(err)
	}
}

// deadUnreadable writes an unreadable job as a worker does.
func (f *fixture) deadUnreadable(seq string) {
	f.t.Helper()
	m := nats.NewMsg(f.b.Subjects.Dead("_job"))
	m.Header.Set(bus.HeaderMsgID, "job."+seq+".dead")
	m.Header.Set("Skillbus-Reason", "job data: unexpected end of JSON input")
	m.Header.Set("Skillbus-Subject", "skillbus.exec.default.a")
	m.Data = []byte(`{"execution_`)
	if _, err := f.b.JS.PublishMsg(f.ctx, m); err != nil {
		f.t.Fatal(err)
	}
}

// published returns the messages of a stream on subject, oldest first.
func (f *fixture) published(stream, subject string) []*jetstream.RawStreamMsg {
	f.t.Helper()
	st, err := f.b.JS.Stream(f.ctx, stream)
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := st.Info(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(f.ctx, seq)
		if err != nil {
			continue
		}
		if ok := subjectMatches(subject, m.Subject); ok {
			out = append(out, m)
		}
	}
	return out
}

func subjectMatches(pattern, subject string) bool {
	if strings.HasSuffix(pattern, ">") {
		return strings.HasPrefix(subject, strings.TrimSuffix(pattern, ">"))
	}
	return pattern == subject
}

func (f *fixture) jobs() []events.Job {
	f.t.Helper()
	var out []events.Job
	for _, m := range f.published(f.b.StreamJobs(), "skillbus.exec.>") {
		e, err := bus.Decode(bus.MsgOf(m.Subject, m.Header, m.Data))
		if err != nil {
			f.t.Fatal(err)
		}
		var j events.Job
		if err := json.Unmarshal(e.Data(), &j); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

const (
	execA1 = "aaaaaa01000000000000000000000001"
	execA2 = "aaaaaa02000000000000000000000002"
	execB  = "bbbbbb00000000000000000000000003"
)

func TestListAndShow(t *testing.T) {
	f := setup(t)
	f.deadJob("a", execA1, `{"order":"A-1"}`)
	f.deadJob("a", execA2, `{"order":"A-2"}`)
	f.deadJob("b", execB, `{"order":"B-1"}`)
	f.deadTrigger("12", "t-12", false)
	f.deadUnreadable("40")

	page, err := f.q.List(f.ctx, dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, e.Kind+":"+e.ID)
	}
	want := []string{"job:" + execA1, "job:" + execA2, "job:" + execB, "trigger:trigger.12", "unreadable:job.40"}
	if strings.Join(got, " ") != strings.Join(want, " ") || page.Next != 0 {
		t.Fatalf("list: %v next %d, want %v", got, page.Next, want)
	}
	a1 := page.Entries[0]
	if a1.Skill != "a" || a1.Class != "fatal" || a1.Reason != "permission denied" || a1.StepID != "call" || a1.Deliveries != 2 ||
		string(a1.Inputs) != `{"order":"A-1"}` || a1.Status != dlq.StatusDead || a1.Seq != 1 || a1.DiedAt.IsZero() ||
		a1.Trigger.ID != "t-"+execA1 || len(a1.History) != 1 || a1.Version != "1.0.0" {
		t.Errorf("job entry %+v", a1)
	}
	tr := page.Entries[3]
	if tr.Class != events.UnmatchedUnknownSkill || tr.Reason != "no skill ghost" || tr.Trigger.ID != "t-12" || tr.Trigger.Seq != 12 || string(tr.Data) != `{"n":1}` {
		t.Errorf("trigger entry %+v", tr)
	}
	if un := page.Entries[4]; !strings.Contains(un.Reason, "unexpected end") || string(un.Data) != `"{\"execution_"` {
		t.Errorf("unreadable entry %+v data %s", un, un.Data)
	}

	filters := []struct {
		name string
		f    dlq.Filter
		want []string
	}{
		{"skill", dlq.Filter{Skill: "a"}, []string{execA1, execA2}},
		{"triggers", dlq.Filter{Skill: "_trigger"}, []string{"trigger.12"}},
		{"id prefix", dlq.Filter{ID: "bbbbbb"}, []string{execB}},
		{"sequence", dlq.Filter{ID: "2"}, []string{execA2}},
		{"since the future", dlq.Filter{Since: time.Now().Add(time.Hour)}, nil},
		{"since an hour ago", dlq.Filter{Since: time.Now().Add(-time.Hour), Skill: "b"}, []string{execB}},
		{"after", dlq.Filter{After: 3}, []string{"trigger.12", "job.40"}},
		{"nothing", dlq.Filter{Skill: "zzz"}, nil},
	}
	for _, tt := range filters {
		page, err := f.q.List(f.ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var ids []string
		for _, e := range page.Entries {
			ids = append(ids, e.ID)
		}
		if strings.Join(ids, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: %v, want %v", tt.name, ids, tt.want)
		}
	}

	// Paging.
	var all []string
	filter := dlq.Filter{Limit: 2}
	pages := 0
	for {
		page, err := f.q.List(f.ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Entries {
			all = append(all, e.ID)
		}
		if page.Next == 0 {
			break
		}
		filter.After = page.Next
	}
	if pages != 3 || len(all) != 5 || all[4] != "job.40" {
		t.Errorf("paging: %d pages, %v", pages, all)
	}
	if _, err := f.q.List(f.ctx, dlq.Filter{Skill: "a.b"}); err == nil {
		t.Error("a skill with a dot was accepted as a filter")
	}

	e, err := f.q.Show(f.ctx, "bbbbbb00")
	if err != nil || e.ID != execB {
		t.Fatalf("show by prefix: %v %+v", err, e)
	}
	if e, err = f.q.Show(f.ctx, "4"); err != nil || e.ID != "trigger.12" {
		t.Fatalf("show by sequence: %v %+v", err, e)
	}
	if _, err = f.q.Show(f.ctx, "aaaaaa"); !errors.Is(err, dlq.ErrAmbiguous) || !strings.Contains(err.Error(), execA2) {
		t.Errorf("ambiguous prefix: %v", err)
	}
	for _, id := range []string{"cccccccc", "99", "abc", ""} {
		if _, err = f.q.Show(f.ctx, id); !errors.Is(err, dlq.ErrNotFound) {
			t.Errorf("show %q: %v, want ErrNotFound", id, err)
		}
	}
}

func TestReplayJob(t *testing.T) {
	f := setup(t)
	f.putSkill("a", "1.0.0", digest("1"), false)
	f.putSkill("a", "1.1.0", digest("2"), true) // fixed since it died
	f.deadJob("a", execA1, `{"order":"A-1"}`)

	r, err := f.q.Replay(f.ctx, execA1[:8], dlq.ReplayOptions{By: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	want := dlq.ReplayExecutionID(execA1, 1, "a")
	if r.Existing || r.ExecutionID != want || r.Replay != 1 || r.EntryID != execA1 || r.By != "ada" || r.Version != "1.1.0" || r.Digest != digest("2") || r.Pinned {
		t.Fatalf("replay %+v", r)
	}
	jobs := f.jobs()
	if len(jobs) != 1 {
		t.Fatalf("%d jobs published, want 1", len(jobs))
	}
	j := jobs[0]
	if j.ExecutionID != want || j.Skill.ExecutionID != want || j.Skill.Digest != digest("2") || j.Skill.Pool != "default" ||
		string(j.Inputs) != `{"order":"A-1"}` || j.ActivationID != "act-"+execA1 || j.Answers != nil || j.Repair != nil || j.Trigger.ID != "t-"+execA1 {
		t.Errorf("replayed job %+v", j)
	}
	if len(j.History) != 2 || j.History[1].ExecutionID != execA1 || j.History[1].Error != "permission denied" || j.History[1].Deliveries != 2 {
		t.Errorf("history %+v: want the earlier attempt and the dead one", j.History)
	}
	// The record is on the new execution's events too.
	if ms := f.published(f.b.StreamEvents(), f.b.Subjects.Event(want, events.TypeDLQReplayed)); len(ms) != 1 {
		t.Errorf("%d dlq.replayed events on the execution, want 1", len(ms))
	}

	// The same replay again publishes nothing.
	r2, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{By: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Existing || r2.ExecutionID != want || r2.By != "ada" {
		t.Errorf("second replay %+v, want the first, existing", r2)
	}
	if n := len(f.jobs()); n != 1 {
		t.Errorf("%d jobs after replaying twice, want 1", n)
	}
	e, err := f.q.Show(f.ctx, execA1)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != dlq.StatusReplayed || len(e.Replays) != 1 || e.Replays[0].Outcome != dlq.OutcomePending || e.Replays[0].ExecutionID != want {
		t.Errorf("shown after replay: status %s, replays %+v", e.Status, e.Replays)
	}

	// Again, pinned to the version that died.
	r3, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{By: "ada", Again: true, Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	if r3.Replay != 2 || r3.ExecutionID != dlq.ReplayExecutionID(execA1, 2, "a") || r3.Digest != digest("1") || !r3.Pinned {
		t.Errorf("again, pinned: %+v", r3)
	}
	if jobs := f.jobs(); len(jobs) != 2 || jobs[1].Skill.Digest != digest("1") || jobs[1].Skill.Version != "1.0.0" {
		t.Errorf("pinned job: %+v", jobs)
	}
	page, err := f.q.List(f.ctx, dlq.Filter{})
	if err != nil || len(page.Entries) != 1 || len(page.Entries[0].Replays) != 2 {
		t.Fatalf("list after two replays: %v %+v", err, page)
	}
	// The replay records are not entries.
	if page.Entries[0].ID != execA1 {
		t.Errorf("list shows %s", page.Entries[0].ID)
	}
}

// Operators replaying the same entry at the same moment publish one job, and exactly
// one of them is told it published it.
func TestReplayConcurrently(t *testing.T) {
	f := setup(t)
	f.putSkill("a", "1.0.0", digest("1"), true)
	f.deadJob("a", execA1, `{}`)
	const n = 8
	results := make(chan *dlq.Replayed, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			r, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{By: fmt.Sprint("op", i)})
			if err != nil {
				errs <- err
				return
			}
			results <- r
		})
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	published := 0
	for r := range results {
		if !r.Existing {
			published++
		}
		if r.ExecutionID != dlq.ReplayExecutionID(execA1, 1, "a") {
			t.Errorf("replay %+v", r)
		}
	}
	if published != 1 {
		t.Errorf("%d replays say they published, want 1", published)
	}
	if jobs := f.jobs(); len(jobs) != 1 {
		t.Errorf("%d jobs published, want 1", len(jobs))
	}
	if ms := f.published(f.b.StreamDead(), "skillbus.dead._replayed.>"); len(ms) != 1 {
		t.Errorf("%d replay records, want 1", len(ms))
	}
}

// Two replays racing may each win one copy of the record (DLQ and EVENTS share its
// message id): the one whose copy the DLQ keeps published, and says so, though its
// EVENTS copy came second. Here another replay's EVENTS copy is there first.
func TestReplayWhoseEventsCopyLostStillPublished(t *testing.T) {
	f := setup(t)
	f.putSkill("a", "1.0.0", digest("1"), true)
	f.deadJob("a", execA1, `{}`)
	id := dlq.ReplayExecutionID(execA1, 1, "a")
	m := nats.NewMsg(f.b.Subjects.Event(id, events.TypeDLQReplayed))
	m.Header.Set(bus.HeaderMsgID, id+"."+events.Kind(events.TypeDLQReplayed))
	m.Data = []byte(`{}`)
	if _, err := f.b.JS.PublishMsg(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	r, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{By: "op"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Existing || r.ExecutionID != id || r.By != "op" {
		t.Fatalf("replay %+v, want this one, published", r)
	}
	if jobs := f.jobs(); len(jobs) != 1 {
		t.Fatalf("%d jobs published, want 1", len(jobs))
	}
	again, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{By: "other"})
	if err != nil || !again.Existing || again.By != "op" {
		t.Fatalf("the same replay again: %+v, %v; want the first, existing", again, err)
	}
}

func TestReplayNeedsTheSkill(t *testing.T) {
	f := setup(t)
	f.deadJob("a", execA1, `{}`)
	if _, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{}); !errors.Is(err, dlq.ErrSkillNotFound) {
		t.Errorf("skill gone: %v, want ErrSkillNotFound", err)
	}
	f.putSkill("a", "2.0.0", digest("2"), true)
	if _, err := f.q.Replay(f.ctx, execA1, dlq.ReplayOptions{Pin: true}); !errors.Is(err, dlq.ErrSkillNotFound) || !strings.Contains(err.Error(), "--pin") {
		t.Errorf("pinned version not kept: %v, want ErrSkillNotFound naming --pin", err)
	}
	if n := len(f.jobs()); n != 0 {
		t.Errorf("%d jobs published by failed replays", n)
	}
	f.deadUnreadable("9")
	if _, err := f.q.Replay(f.ctx, "job.9", dlq.ReplayOptions{}); !errors.Is(err, dlq.ErrNotReplayable) {
		t.Errorf("unreadable: %v, want ErrNotReplayable", err)
	}
}

func TestReplayTrigger(t *testing.T) {
	for _, structured := range []bool{false, true} {
		name := "binary"
		if structured {
			name = "structured"
		}
		t.Run(name, func(t *testing.T) {
			f := setup(t)
			f.deadTrigger("12", "t 12", structured)
			r, err := f.q.Replay(f.ctx, "trigger.12", dlq.ReplayOptions{By: "ada"})
			if err != nil {
				t.Fatal(err)
			}
			if r.TriggerID != "t 12.replay-1" || r.ActivationID != events.ActivationID("/test", "t 12.replay-1") || r.ExecutionID != "" {
				t.Fatalf("replay %+v", r)
			}
			ms := f.published(f.b.StreamTriggers(), "skillbus.trigger.>")
			if len(ms) != 1 {
				t.Fatalf("%d triggers published, want 1", len(ms))
			}
			m := ms[0]
			if m.Header.Get("Skillbus-Code") != "" || m.Header.Get(bus.HeaderMsgID) != "t 12.replay-1" {
				t.Errorf("headers %v", m.Header)
			}
			e, err := bus.Decode(bus.MsgOf(m.Subject, m.Header, m.Data))
			if err != nil {
				t.Fatal(err)
			}
			if e.ID() != "t 12.replay-1" || e.Source() != "/test" || string(e.Data()) != `{"n":1}` {
				t.Errorf("replayed trigger %s %s %s", e.ID(), e.Source(), e.Data())
			}
			if again, err := f.q.Replay(f.ctx, "trigger.12", dlq.ReplayOptions{}); err != nil || !again.Existing {
				t.Errorf("second replay: %v %+v", err, again)
			}
			if n := len(f.published(f.b.StreamTriggers(), "skillbus.trigger.>")); n != 1 {
				t.Errorf("%d triggers after replaying twice, want 1", n)
			}
			e2, err := f.q.Show(f.ctx, "trigger.12")
			if err != nil || e2.Status != dlq.StatusReplayed || e2.Replays[0].Outcome != dlq.OutcomeRouted {
				t.Errorf("shown after replay: %v %+v", err, e2)
			}
		})
	}
}

// A sender's trigger rejected for using one of skillbus's own sources is not
// replayed: published again, it would be rejected again.
func TestReplayRefusesAReservedSourceTrigger(t *testing.T) {
	f := setup(t)
	m := nats.NewMsg(f.b.Subjects.Dead("_trigger"))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "parent/step", "ce-source": "/skillbus/skill-tool", "ce-type": "io.skillbus.invoke", "Content-Type": "application/json"} {
		m.Header.Set(k, v)
	}
	m.Data = []byte(`{}`)
	m.Header.Set(bus.HeaderMsgID, "trigger.5.dead")
	m.Header.Set("Skillbus-Code", events.UnmatchedReservedSource)
	m.Header.Set("Skillbus-Reason", "source /skillbus/skill-tool")
	m.Header.Set("Skillbus-Subject", f.b.Subjects.TriggerSkill("hello"))
	m.Header.Set("Skillbus-Trigger-Seq", "5")
	if _, err := f.b.JS.PublishMsg(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Replay(f.ctx, "trigger.5", dlq.ReplayOptions{}); !errors.Is(err, dlq.ErrNotReplayable) || !strings.Contains(err.Error(), "skillbus's own sources") {
		t.Fatalf("replay: %v, want ErrNotReplayable", err)
	}
	if n := len(f.published(f.b.StreamTriggers(), "skillbus.trigger.>")); n != 0 {
		t.Errorf("%d triggers published", n)
	}
}

func TestReplayAll(t *testing.T) {
	f := setup(t)
	f.putSkill("a", "1.0.0", digest("1"), true)
	f.deadJob("a", execA1, `{}`)
	f.deadJob("a", execA2, `{}`)
	f.deadJob("b", execB, `{}`)
	res, err := f.q.ReplayAll(f.ctx, dlq.Filter{Skill: "a", Limit: 1}, dlq.ReplayOptions{By: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Replayed == nil || res[1].Replayed == nil || res[0].EntryID != execA1 || res[1].EntryID != execA2 {
		t.Fatalf("results %+v", res)
	}
	res, err = f.q.ReplayAll(f.ctx, dlq.Filter{}, dlq.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || !res[0].Replayed.Existing || !res[1].Replayed.Existing || res[2].Error == "" || !strings.Contains(res[2].Error, "not in the catalog") {
		t.Fatalf("everything: %+v", res)
	}
	if n := len(f.jobs()); n != 2 {
		t.Errorf("%d jobs, want 2", n)
	}
}

// A replay that dies again while ReplayAll runs is not replayed by the same call: a
// skill still broken would otherwise keep it going for ever.
func TestReplayAllStopsAtTheQueuesEnd(t *testing.T) {
	f := setup(t)
	f.putSkill("a", "1.0.0", digest("1"), true)
	f.deadJob("a", execA1, `{}`)
	f.deadJob("a", execA2, `{}`)
	// A worker that dead-letters every replayed job at once.
	cons, err := f.b.JS.CreateOrUpdateConsumer(f.ctx, f.b.StreamJobs(), jetstream.ConsumerConfig{Durable: "killer", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		e, err := bus.Decode(m)
		if err == nil {
			var j events.Job
			_ = json.Unmarshal(e.Data(), &j)
			f.deadJob("a", j.ExecutionID, `{}`)
		}
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a callback in flight, which publishes on the test's connection.
	defer func() { cc.Drain(); <-cc.Closed() }()
	res, err := f.q.ReplayAll(f.ctx, dlq.Filter{Skill: "a", Limit: 1}, dlq.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].EntryID != execA1 || res[1].EntryID != execA2 {
		t.Errorf("replayed %+v, want the two entries there were", res)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	good := map[string]time.Time{
		"90m":                       now.Add(-90 * time.Minute),
		"2h":                        now.Add(-2 * time.Hour),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"1d12h":                     now.Add(-36 * time.Hour),
		" 30s ":                     now.Add(-30 * time.Second),
		"2026-11-20":                time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
		"2026-11-20 10:30":          time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC),
		"2026-11-20T10:30:00Z":      time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC),
		"2026-11-20T10:30:00+01:00": time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC),
	}
	for in, want := range good {
		got, err := dlq.ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":           "empty",
		"yesterday":  "neither a duration",
		"-5m":        "negative",
		"5":          "needs a unit",
		"5x":         "not a duration",
		"1d-2h":      "negative",
		"2026-13-45": "neither a duration",
		"10:00":      "neither a duration",
		"999999999d": "too long",
	}
	for in, want := range bad {
		_, err := dlq.ParseSince(in, now)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--since") {
			t.Errorf("ParseSince(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"90m", "7d", "1d12h", "2026-11-20", "2026-11-20T10:30:00Z", "-5m", "", "5", "1d-2h", "9223372036854775807d"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := dlq.ParseSince(s, now)
		if err != nil {
			if !strings.Contains(err.Error(), "--since") {
				t.Errorf("error %q does not name --since", err)
			}
			return
		}
		// Only dates and times have '-' (durations may not be negative): anything
		// else that parses is a duration back from now.
		if !strings.Contains(s, "-") && got.After(now) {
			t.Errorf("ParseSince(%q) = %v, after now", s, got)
		}
	})
}

// An id prefix of decimal digits alone (once in about 40 execution ids for 8 hex
// digits) names its entry, as a sequence number does.
func TestDigitsPrefix(t *testing.T) {
	f := setup(t)
	const execD = "12345678000000000000000000000004"
	f.deadJob("a", execA1, `{"order":"A-1"}`)
	f.deadJob("d", execD, `{"order":"D-1"}`)
	page, err := f.q.List(f.ctx, dlq.Filter{ID: "12345678"})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].ID != execD {
		t.Fatalf("list --id 12345678: %v %+v", err, page)
	}
	if e, err := f.q.Show(f.ctx, "12345678"); err != nil || e.ID != execD {
		t.Fatalf("show 12345678: %v %+v", err, e)
	}
	if e, err := f.q.Show(f.ctx, "1"); err != nil || e.ID != execA1 { // still a sequence number
		t.Fatalf("show 1: %v %+v", err, e)
	}
}
