package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The skill reads a key its tool no longer returns under that name: the tool
// renamed "titel" to "title".
const brokenSkill = `name: %s
description: reads an issue's title%s
steps:
  - id: fetch
    tool: fetch
  - id: post
    tool: echo
    args:
      text: "{{ fetch.titel }}"
outputs:
  posted: "{{ post.text }}"
`

type fixture struct {
	t   *testing.T
	ctx context.Context
	b   *bus.Bus
	dir string
	reg *registry.Registry
	cat *catalog.Catalog
	kv  jetstream.KeyValue
	svc *service.Service
	act service.Actions
	pub *countingPublisher
	// fetches counts the calls of the tool "count", a step with a side effect.
	fetches atomic.Int32
	// metrics is the address of the /metrics of the worker's and service's metrics.
	metrics string
}

// repairs returns the skillbus_repairs_total counter of outcome, scraped from /metrics.
func (f *fixture) repairs(outcome string) string {
	f.t.Helper()
	resp, err := http.Get("http://" + f.metrics + "/metrics")
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "skillbus_repairs_total{") && strings.Contains(l, `outcome="`+outcome+`"`) {
			return l[strings.LastIndexByte(l, ' ')+1:]
		}
	}
	return "0"
}

// countingPublisher counts the repairs the registry is asked to publish.
type countingPublisher struct {
	reg   *registry.Registry
	calls atomic.Int32
}

func (p *countingPublisher) PublishRepair(ctx context.Context, name, base string, files repair.Files, id string) (string, string, error) {
	p.calls.Add(1)
	return p.reg.PublishRepair(ctx, name, base, files, id)
}

func setup(t *testing.T, skills map[string]string) *fixture {
	t.Helper()
	return setupWith(t, skills, nil)
}

// setupWith is setup with the repair service's repairers (nil: the default ones).
func setupWith(t *testing.T, skills map[string]string, repairers []repair.Repairer) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fixture{t: t, ctx: ctx, b: b, dir: t.TempDir(), act: service.Actions{Bus: b}}
	for name, text := range skills {
		if err := os.MkdirAll(filepath.Join(f.dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.dir, name, "skill.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.reg, err = registry.New(registry.Config{Bus: b, Roots: []string{f.dir}, Log: log}); err != nil {
		t.Fatal(err)
	}
	rep, err := f.reg.Sync(ctx)
	if err != nil || len(rep.Invalid) > 0 || len(rep.Loaded) != len(skills) {
		t.Fatalf("sync: %v %+v", err, rep)
	}
	skillsKV, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	if f.cat, err = catalog.Watch(ctx, skillsKV, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cat.Stop)
	if f.kv, err = b.KV(ctx, b.BucketRepairs()); err != nil {
		t.Fatal(err)
	}
	files, err := catalog.NewFiles(catalog.FilesConfig{Stores: b, Bucket: catalog.FilesBucket(b)})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := tool.NewSet(tool.Echo(),
		tool.Func("fetch", func(context.Context, tool.Call) (any, error) {
			return map[string]any{"title": "Fix the build", "body": "it is red"}, nil
		}),
		tool.Func("count", func(context.Context, tool.Call) (any, error) {
			return map[string]any{"title": "Fix the build", "body": "it is red", "call": f.fetches.Add(1)}, nil
		}),
		tool.Func("broken", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("permission denied") }),
		tool.Func("mirror", func(_ context.Context, c tool.Call) (any, error) { return c.Args["data"], nil }),
		tool.Func("vague", func(context.Context, tool.Call) (any, error) { return nil, failure.Repair("bad parameter somewhere") }),
	)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.Setup(ctx, telemetry.Config{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	if f.metrics, err = tel.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	eng, err := workflow.New(workflow.Config{Tools: tools, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Bus: b, Catalog: f.cat, Engine: eng, Log: log, AckWait: 2 * time.Second, Repair: true, Name: "w1", Metrics: tel.Metrics,
		Backoff: worker.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	f.pub = &countingPublisher{reg: f.reg}
	f.svc, err = service.New(service.Config{Bus: b, Catalog: f.cat, Files: files, Publisher: f.pub, Repairers: repairers,
		Validate: registry.RepairValidator(skill.LoadOptions{}), Log: log, SweepInterval: 100 * time.Millisecond, Metrics: tel.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.svc.Stop(context.Background()) })
	return f
}

// run publishes n jobs of skill name, pinned to its current version.
func (f *fixture) run(name string, n int) []string {
	f.t.Helper()
	if err := f.cat.Wait(f.ctx, func(c *catalog.Catalog) bool { _, ok := c.Get(name); return ok }); err != nil {
		f.t.Fatal(err)
	}
	s, _ := f.cat.Get(name)
	batch := f.b.Batch()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-ex%03d", name, i)
		ids = append(ids, id)
		job := events.Job{ExecutionID: id, ActivationID: "act" + id, Skill: events.SkillRef{Name: name, Digest: s.Digest, Version: s.Version, Pool: skill.DefaultPool, ExecutionID: id},
			Trigger: events.TriggerRef{Subject: "test"}}
		batch.PublishEvent(f.b.Subjects.Exec(skill.DefaultPool, name, job.ActivationID, events.StagePlan), bus.Event{ID: id + ".job", Source: "/test", Type: events.TypeJob, Meta: bus.Meta{CorrelationID: "c", ExecutionID: id}, Data: job})
	}
	if err := batch.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// eventually waits for cond, failing with what last describes at the deadline.
func (f *fixture) eventually(what string, cond func() (bool, string)) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: still %s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) repairStreamSeq() uint64 {
	f.t.Helper()
	st, err := f.b.JS.Stream(f.ctx, f.b.StreamRepair())
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := st.Info(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return info.State.LastSeq
}

// outcomes returns the executions' outcome records, and how many outcome events
// each has in the stream.
func (f *fixture) outcomes(ids []string) (map[string]*run.Record, map[string]uint64) {
	f.t.Helper()
	st, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	recs := map[string]*run.Record{}
	for _, id := range ids {
		r, err := run.Load(f.ctx, st, f.b.Subjects, id)
		if err != nil {
			f.t.Fatal(err)
		}
		if r != nil {
			recs[id] = r
		}
	}
	info, err := st.Info(f.ctx, jetstream.WithSubjectFilter(f.b.Subjects.Prefix+".events.*.execution.*"))
	if err != nil {
		f.t.Fatal(err)
	}
	counts := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		parts := strings.Split(subj, ".")
		if events.Outcome(events.Prefix + strings.Join(parts[3:], ".")) {
			counts[parts[2]] += n
		}
	}
	return recs, counts
}

// 25 executions fail on one misspelt key: one repair job, one proposal with the
// one-line diff; approved, the registry publishes the new version (written back to
// the file, naming the repair) and every execution completes exactly once on it.
func TestOneFaultOneRepair(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"issue-title": fmt.Sprintf(brokenSkill, "issue-title", "")})
	before, _ := f.cat.Get("issue-title")
	ids := f.run("issue-title", 25)

	var rec service.Summary
	f.eventually("one proposed repair with every execution parked", func() (bool, string) {
		list, err := f.act.List(f.ctx, "")
		if err != nil || len(list) != 1 {
			return false, fmt.Sprint(list, err)
		}
		rec = list[0]
		return rec.Status == service.StatusProposed && rec.Executions == len(ids), fmt.Sprintf("%+v", rec)
	})
	// One park request per execution (the repair service alone writes KV
	// repairs), and one repair job.
	if seq := f.repairStreamSeq(); seq != uint64(len(ids))+1 {
		t.Fatalf("%d messages on the repair stream, want %d park requests and 1 repair job", seq, len(ids))
	}
	if rec.Kind != "reference" || rec.Name != "titel" || rec.Step != "post" || rec.By != "reference" {
		t.Fatalf("repair %+v", rec)
	}
	if !strings.Contains(rec.Diff, "-      text: \"{{ fetch.titel }}\"\n+      text: \"{{ fetch.title }}\"\n") || strings.Count(rec.Diff, "\n+") != 2 {
		t.Fatalf("diff:\n%s", rec.Diff)
	}
	if recs, _ := f.outcomes(ids); len(recs) != 0 {
		t.Fatalf("%d parked executions have an outcome already", len(recs))
	}

	if _, err := f.act.Approve(f.ctx, rec.ID[:8], "alice"); err != nil {
		t.Fatal(err)
	}
	f.eventually("every execution completed", func() (bool, string) {
		recs, _ := f.outcomes(ids)
		return len(recs) == len(ids), fmt.Sprintf("%d of %d", len(recs), len(ids))
	})
	recs, counts := f.outcomes(ids)
	for _, id := range ids {
		r := recs[id]
		if r.Status != run.StatusCompleted || r.Outputs["posted"] != "Fix the build" || counts[id] != 1 {
			t.Fatalf("%s: %+v, %d outcome events", id, r, counts[id])
		}
	}
	after, _ := f.cat.Get("issue-title")
	if after.Digest == before.Digest || after.RepairedBy != rec.ID {
		t.Fatalf("catalog: digest %s (was %s), repaired_by %q", after.Digest, before.Digest, after.RepairedBy)
	}
	disk, _ := os.ReadFile(filepath.Join(f.dir, "issue-title", "skill.yaml"))
	if !strings.Contains(string(disk), "{{ fetch.title }}") {
		t.Fatalf("not written back:\n%s", disk)
	}
	got, err := f.act.Show(f.ctx, rec.ID)
	if err != nil || got.Status != service.StatusApplied || got.NewDigest != after.Digest || got.Executions != 0 {
		t.Fatalf("show: %+v %v", got, err)
	}
	if _, err := f.act.Approve(f.ctx, rec.ID, "bob"); err == nil {
		t.Fatal("an applied repair was approved again")
	}

	// Redelivered work (a repair worker died before acking): the repair job and the
	// approval again change nothing and publish nothing twice.
	batch := f.b.Batch()
	full, _, err := service.Load(f.ctx, f.kv, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	batch.PublishEvent(f.b.Subjects.Repair("issue-title"), bus.Event{ID: "again.repair", Source: "/test", Type: events.TypeRepairRequested, Data: full.Diagnosis})
	batch.PublishEvent(f.b.Subjects.Repair("issue-title"), bus.Event{ID: "again.decided", Source: "/test", Type: events.TypeRepairDecided,
		Data: events.RepairDecided{RepairID: rec.ID, Skill: "issue-title", Approved: true, By: "bob"}})
	if err := batch.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.eventually("the repair stream drained", func() (bool, string) {
		c, err := f.b.JS.Consumer(f.ctx, f.b.StreamRepair(), "repair")
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(f.ctx)
		if err != nil {
			return false, err.Error()
		}
		// The park requests, the repair job, the approval, and the two again.
		return info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream == uint64(len(ids))+4, fmt.Sprintf("%+v", info.Delivered)
	})
	if n := f.pub.calls.Load(); n != 1 {
		t.Fatalf("the registry was asked to publish %d times", n)
	}
	if again, _ := f.act.Show(f.ctx, rec.ID); again.Status != service.StatusApplied || again.NewDigest != after.Digest {
		t.Fatalf("after redelivery: %+v", again)
	}
	if got := [2]string{f.repairs("requested"), f.repairs("succeeded")}; got != [2]string{"25", "1"} {
		t.Fatalf("skillbus_repairs_total requested, succeeded = %v, want 25 and 1", got)
	}
	if _, counts := f.outcomes(ids); len(counts) != len(ids) {
		t.Fatalf("outcomes %v", counts)
	} else {
		for id, c := range counts {
			if c != 1 {
				t.Fatalf("%s: %d outcomes", id, c)
			}
		}
	}
}

// Rejected: the parked executions fail as they would have without repair, each
// with one outcome and a dead letter.
func TestRejectedRepairDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"issue-title": fmt.Sprintf(brokenSkill, "issue-title", "")})
	ids := f.run("issue-title", 5)
	var rec service.Summary
	f.eventually("a proposal", func() (bool, string) {
		list, _ := f.act.List(f.ctx, service.StatusProposed)
		if len(list) == 1 {
			rec = list[0]
		}
		return len(list) == 1 && rec.Executions == len(ids), fmt.Sprint(list)
	})
	if _, err := f.act.Reject(f.ctx, rec.ID, "alice", "not like this"); err != nil {
		t.Fatal(err)
	}
	f.eventually("every execution failed", func() (bool, string) {
		recs, _ := f.outcomes(ids)
		return len(recs) == len(ids), fmt.Sprintf("%d of %d", len(recs), len(ids))
	})
	recs, counts := f.outcomes(ids)
	for _, id := range ids {
		r := recs[id]
		if r.Status != run.StatusFailed || r.Class != string(failure.Repairable) || !strings.Contains(r.Error, "rejected") || counts[id] != 1 {
			t.Fatalf("%s: %+v, %d outcome events", id, r, counts[id])
		}
		// The failure names the repair it waited for.
		st, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
		m, err := st.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(id, events.TypeExecutionFailed))
		var d events.ExecutionFailed
		if err == nil {
			var e *bus.Binary
			if e, err = bus.DecodeFast(bus.FromNATS(&nats.Msg{Header: m.Header, Data: m.Data})); err == nil {
				err = json.Unmarshal(e.Data, &d)
			}
		}
		if err != nil || d.RepairID != rec.ID {
			t.Fatalf("%s: execution.failed names repair %q, want %s (%v)", id, d.RepairID, rec.ID, err)
		}
	}
	dlq, err := f.b.JS.Stream(f.ctx, f.b.StreamDead())
	if err != nil {
		t.Fatal(err)
	}
	info, _ := dlq.Info(f.ctx)
	if info.State.Msgs != uint64(len(ids)) {
		t.Fatalf("%d dead letters, want %d", info.State.Msgs, len(ids))
	}
	if got := [2]string{f.repairs("failed"), f.repairs("succeeded")}; got != [2]string{"1", "0"} {
		t.Fatalf("skillbus_repairs_total failed, succeeded = %v, want 1 and 0", got)
	}
}

// repair: auto applies the patch without a person.
func TestAutoRepair(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"auto-title": fmt.Sprintf(brokenSkill, "auto-title", "\nrepair: auto")})
	ids := f.run("auto-title", 3)
	f.eventually("every execution completed", func() (bool, string) {
		recs, _ := f.outcomes(ids)
		n := 0
		for _, r := range recs {
			if r.Status == run.StatusCompleted {
				n++
			}
		}
		return n == len(ids), fmt.Sprint(recs)
	})
}

// A fatal fault, and a repairable one with no structured fault, never reach the
// repair stream.
func TestNotRepairable(t *testing.T) {
	t.Parallel()
	fatal := "name: fatal\ndescription: d\nsteps:\n  - id: only\n    tool: broken\n"
	vague := "name: vague\ndescription: d\nsteps:\n  - id: only\n    tool: vague\n"
	f := setup(t, map[string]string{"fatal": fatal, "vague": vague})
	ids := append(f.run("fatal", 3), f.run("vague", 3)...)
	f.eventually("every execution failed", func() (bool, string) {
		recs, _ := f.outcomes(ids)
		return len(recs) == len(ids), fmt.Sprintf("%d of %d", len(recs), len(ids))
	})
	if seq := f.repairStreamSeq(); seq != 0 {
		t.Fatalf("%d messages on the repair stream", seq)
	}
	if list, _ := f.act.List(f.ctx, ""); len(list) != 0 {
		t.Fatalf("repairs: %+v", list)
	}
	// The repairable failure without a fault says why it was not repaired.
	st, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if _, err := st.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event("vague-ex000", events.TypeRepairSkipped)); err != nil {
		t.Fatalf("no repair.skipped for the vague failure: %v", err)
	}
	if _, err := st.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event("fatal-ex000", events.TypeRepairSkipped)); err == nil {
		t.Fatal("repair.skipped for a fatal failure")
	}
}

// With repair: auto, a patch that writes a name new to the skill that the
// trigger's data holds — a name the sender chose — waits for a person.
func TestAutoRepairOfANameFromTheTriggerWaitsForApproval(t *testing.T) {
	t.Parallel()
	const steered = `name: steered
description: posts what it was sent
repair: auto
inputs:
  - name: payload
    type: object
steps:
  - id: fetch
    tool: mirror
    args:
      data: "{{ inputs.payload }}"
  - id: post
    tool: echo
    args:
      text: "{{ fetch.titel }}"
outputs:
  posted: "{{ post.text }}"
`
	f := setup(t, map[string]string{"steered": steered})
	if err := f.cat.Wait(f.ctx, func(c *catalog.Catalog) bool { _, ok := c.Get("steered"); return ok }); err != nil {
		t.Fatal(err)
	}
	s, _ := f.cat.Get("steered")
	job := events.Job{ExecutionID: "st1", ActivationID: "actst1", Skill: events.SkillRef{Name: "steered", Digest: s.Digest, Version: s.Version, Pool: skill.DefaultPool, ExecutionID: "st1"},
		Inputs: json.RawMessage(`{"payload":{"titelx":"from the sender"}}`)}
	b := f.b.Batch()
	b.PublishEvent(f.b.Subjects.Exec(skill.DefaultPool, "steered", job.ActivationID, events.StagePlan), bus.Event{ID: "st1.job", Source: "/test", Type: events.TypeJob, Meta: bus.Meta{CorrelationID: "c", ExecutionID: "st1"}, Data: job})
	if err := b.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	var rec service.Summary
	f.eventually("the repair proposed and waiting", func() (bool, string) {
		list, err := f.act.List(f.ctx, "")
		if err != nil || len(list) != 1 {
			return false, fmt.Sprint(list, err)
		}
		rec = list[0]
		return rec.Status == service.StatusProposed && rec.Executions == 1, fmt.Sprintf("%+v", rec)
	})
	if got, _, err := service.Load(f.ctx, f.kv, rec.ID); err != nil || got.Auto || got.Patch == nil || !strings.Contains(got.Patch.Summary, "titelx") {
		t.Fatalf("the proposal: %+v %v", got, err)
	}
	if f.pub.calls.Load() != 0 {
		t.Fatal("the patch was published without approval")
	}
	if _, err := f.act.Approve(f.ctx, rec.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the execution completed", func() (bool, string) {
		recs, _ := f.outcomes([]string{"st1"})
		return len(recs) == 1, fmt.Sprint(recs)
	})
}

// Each release of a parked execution is a job of its own: an execution parked on
// the same repair a second time (repairs that undo each other, A→B→A) is released
// again, not dropped as a duplicate of the first release.
func TestReleaseIDIsUniquePerRelease(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"issue-title": fmt.Sprintf(brokenSkill, "issue-title", "")})
	rec := &service.Record{ID: "flipflop", Skill: "issue-title", Status: service.StatusApplied, NewDigest: "d-b", NewVersion: "b"}
	job := events.Job{ExecutionID: "ex1", ActivationID: "act1", Skill: events.SkillRef{Name: "issue-title", Digest: "d-a", Pool: "nosuchpool", ExecutionID: "ex1"}}
	p := service.Parked{ExecutionID: "ex1", RepairID: rec.ID, Job: job}
	if err := service.Release(f.ctx, f.b, f.kv, "/test", rec, p); err != nil {
		t.Fatal(err)
	}
	// Released on B, it failed and came back to A, and was parked on the same
	// repair again: its job says one repaired run.
	job.Repair = &events.JobRepair{ID: "other", Attempts: 1}
	p.Job = job
	if err := service.Release(f.ctx, f.b, f.kv, "/test", rec, p); err != nil {
		t.Fatal(err)
	}
	st, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(f.ctx, jetstream.WithSubjectFilter(f.b.Subjects.Exec("nosuchpool", "issue-title", "act1", events.StageRepair(rec.ID))))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("%d released jobs, want 2", info.State.Msgs)
	}
}

// A repair job whose writes fail is handed back and delivered again, with growing
// waits, until its writes succeed; then it is applied once and its executions run
// once. Here the approval of a proposed repair cannot write the repair's record (the
// bucket refuses every message for a while, as a full store would).
func TestRepairJobWhoseWritesFailIsRetriedUntilItSucceeds(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"issue-title": fmt.Sprintf(brokenSkill, "issue-title", "")})
	ids := f.run("issue-title", 3)
	var rec service.Summary
	f.eventually("a proposal with every execution parked", func() (bool, string) {
		list, _ := f.act.List(f.ctx, service.StatusProposed)
		if len(list) == 1 {
			rec = list[0]
		}
		return len(list) == 1 && rec.Executions == len(ids), fmt.Sprint(list)
	})
	bucket, err := f.b.JS.Stream(f.ctx, "KV_"+f.b.BucketRepairs())
	if err != nil {
		t.Fatal(err)
	}
	info, err := bucket.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	writable := info.Config
	refusing := writable
	refusing.MaxMsgSize = 8 // every record is larger
	if _, err := f.b.JS.UpdateStream(f.ctx, refusing); err != nil {
		t.Fatal(err)
	}
	consumer, err := f.b.JS.Consumer(f.ctx, f.b.StreamRepair(), f.svc.ConsumerConfig().Durable)
	if err != nil {
		t.Fatal(err)
	}
	deliveries := func() uint64 {
		ci, err := consumer.Info(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ci.Delivered.Consumer
	}
	before := deliveries() // the repair job's
	if _, err := f.act.Approve(f.ctx, rec.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the approval delivered three times", func() (bool, string) {
		n := deliveries() - before
		return n >= 3, fmt.Sprintf("%d deliveries", n)
	})
	if got, err := f.act.Show(f.ctx, rec.ID); err != nil || got.Status != service.StatusProposed || f.pub.calls.Load() != 0 {
		t.Fatalf("while its record cannot be written the repair is %+v (%v), published %d times", got, err, f.pub.calls.Load())
	}

	if _, err := f.b.JS.UpdateStream(f.ctx, writable); err != nil {
		t.Fatal(err)
	}
	f.eventually("every execution completed", func() (bool, string) {
		recs, _ := f.outcomes(ids)
		return len(recs) == len(ids), fmt.Sprintf("%d of %d", len(recs), len(ids))
	})
	recs, counts := f.outcomes(ids)
	for _, id := range ids {
		if r := recs[id]; r.Status != run.StatusCompleted || counts[id] != 1 {
			t.Errorf("%s: %+v, %d outcome events", id, r, counts[id])
		}
	}
	if got, err := f.act.Show(f.ctx, rec.ID); err != nil || got.Status != service.StatusApplied || f.pub.calls.Load() != 1 {
		t.Fatalf("after the writes succeed the repair is %+v (%v), published %d times", got, err, f.pub.calls.Load())
	}
}

// The repair service alone writes KV repairs, and it checks what a worker asks: a
// park request whose repair id is not the fingerprint of its version and fault, or
// whose job is another execution's or another skill's, is refused and writes
// nothing. A sound one is recorded with what the catalog says (repair: auto or not),
// never what the request says.
func TestParkRequestsAreCheckedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"issue-title": fmt.Sprintf(brokenSkill, "issue-title", "")})
	sk, _ := f.cat.Get("issue-title")
	fault := failure.Fault{Kind: failure.FaultReference, Name: "titel", Have: []string{"body", "title"}, Value: "steps.fetch.result", Step: "post"}
	good := repair.Fingerprint(sk.Digest, &fault)
	req := func(exec, id, jobExec, jobSkill string) service.ParkRequest {
		d := repair.Diagnosis{ID: id, Skill: "issue-title", Digest: sk.Digest, Fault: fault, Error: "no key titel"}
		job := events.Job{ExecutionID: jobExec, Skill: events.SkillRef{Name: jobSkill, Digest: sk.Digest}, Inputs: json.RawMessage(`{}`)}
		return service.ParkRequest{Diagnosis: d, Parked: service.Parked{ExecutionID: exec, RepairID: id, Job: job}}
	}
	batch := f.b.Batch()
	for _, r := range []service.ParkRequest{
		req("forged-1", "0123456789abcdef0123", "forged-1", "issue-title"), // not the fingerprint: an approved record's id, say
		req("forged-2", good, "someone-else", "issue-title"),               // another execution's job
		req("forged-3", good, "forged-3", "hello"),                         // another skill's job
	} {
		service.Park(batch, f.b, "/test", bus.Meta{}, r)
	}
	if err := batch.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.eventually("the park requests handled", func() (bool, string) {
		c, err := f.b.JS.Consumer(f.ctx, f.b.StreamRepair(), "repair")
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(f.ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream == 3, fmt.Sprintf("%+v", info.Delivered)
	})
	if keys, err := f.kv.ListKeys(f.ctx); err == nil {
		var got []string
		for k := range keys.Keys() {
			got = append(got, k)
		}
		if len(got) > 0 {
			t.Fatalf("refused park requests wrote %v", got)
		}
	}

	batch = f.b.Batch()
	service.Park(batch, f.b, "/test", bus.Meta{}, req("sound-1", good, "sound-1", "issue-title"))
	if err := batch.Wait(f.ctx); err != nil {
		t.Fatal(err)
	}
	var rec *service.Record
	f.eventually("the sound request recorded", func() (bool, string) {
		r, _, err := service.Load(f.ctx, f.kv, good)
		rec = r
		return err == nil && r.Status == service.StatusProposed, fmt.Sprintf("%+v %v", r, err)
	})
	if rec.Auto || rec.First != "sound-1" || rec.BudgetKey != repair.BudgetKey("issue-title", &fault) {
		t.Fatalf("record %+v", rec)
	}
	if p, _, err := service.FindParked(f.ctx, f.kv, "sound-1"); err != nil || p == nil || p.RepairID != good {
		t.Fatalf("parked: %+v %v", p, err)
	}
}
