package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

func debounced(period, timeout time.Duration) *skill.Skill {
	return &skill.Skill{Name: "digest", Description: "digests changes", Kind: skill.KindWorkflow, Digest: "d1gest0123456789",
		Triggers: []string{"com.example.change"},
		Debounce: &skill.Debounce{Key: "data.doc", Period: skill.Duration(period), Timeout: skill.Duration(timeout)}}
}

// runs are the jobs of skill digest, by the doc and n of their inputs.
func (f *fixture) runs() map[string][]float64 {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := s.Info(f.ctx, jetstream.WithSubjectFilter("skillbus.exec.default.digest.>"))
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]float64{}
	for subj := range info.State.Subjects {
		raw, err := s.GetLastMsgForSubject(f.ctx, subj)
		if err != nil {
			f.t.Fatal(err)
		}
		var j struct {
			Data struct {
				Inputs struct {
					Doc string  `json:"doc"`
					N   float64 `json:"n"`
				} `json:"inputs"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw.Data, &j); err != nil {
			f.t.Fatal(err)
		}
		in := j.Data.Inputs
		out[in.Doc] = append(out[in.Doc], in.N)
	}
	return out
}

// quiet waits until no debounced run is pending: no timer left, the routers'
// consumers of triggers and of due runs with nothing pending or unacked.
func (f *fixture) quiet() { f.timersQuiet("debounce") }

// timersQuiet waits until no run of the kind (debounce, batch) is pending: no
// timer of that kind left, the routers' consumers of triggers and of due runs with
// nothing pending or unacked.
func (f *fixture) timersQuiet(kind string) {
	f.t.Helper()
	evs, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	natstest.Eventually(f.t, 30*time.Second, func() bool {
		info, err := evs.Info(f.ctx, jetstream.WithSubjectFilter("skillbus.events.*."+kind+".timer"))
		if err != nil || len(info.State.Subjects) > 0 {
			return false
		}
		for _, name := range []string{"router", "router-debounce"} {
			stream := f.b.StreamTriggers()
			if name != "router" {
				stream = f.b.StreamEvents()
			}
			c, err := f.b.JS.Consumer(f.ctx, stream, name)
			if err != nil {
				return false
			}
			ci, err := c.Info(f.ctx)
			if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
				return false
			}
		}
		return true
	}, "%s runs still pending", kind)
}

func (f *fixture) change(id, doc string, n int) {
	f.t.Helper()
	f.publish("skillbus.trigger.com.example.change", ce(id, "com.example.change"), fmt.Sprintf(`{"doc": %q, "n": %d}`, doc, n))
}

// A burst of ten triggers with the same key is one run, with the last one's
// data; another key is a run of its own. Each folded trigger is recorded.
func TestDebounceFoldsABurstIntoOneRun(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(time.Second, 30*time.Second))
	for i := 1; i <= 10; i++ {
		f.change(fmt.Sprintf("a%d", i), "readme", i)
	}
	f.change("b1", "license", 1)
	f.change("b2", "license", 2)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()) == 2 }, "no runs")
	f.quiet()
	got := f.runs()
	if fmt.Sprint(got["readme"]) != "[10]" || fmt.Sprint(got["license"]) != "[2]" {
		t.Fatalf("runs by doc: %v; want readme once with n 10, license once with n 2", got)
	}
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "a3"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedDebounced || !strings.Contains(u.Reason, `digest: debounce 1s (at most 30s) by data.doc (key "readme"): folded into one run`) {
		t.Fatalf("a3: %+v", u)
	}
	// The run is an explicit invocation named by the trigger whose data it has.
	var rd events.RouteDecided
	f.event(events.ActivationID(router.DebounceSource("digest"), events.ActivationID("/test", "a10")), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "digest" || rd.Trigger.Source != router.DebounceSource("digest") || rd.Trigger.Subject != f.b.Subjects.TriggerDebounced("digest") {
		t.Fatalf("the run's decision: %+v", rd)
	}
}

// A trigger from the source of debounced runs, with the id of a burst's
// activation (any reader of EVENTS finds it on the burst's latest), published
// on the subject every publisher may use, is rejected as skillbus's own source
// used by a sender: it neither goes past the debounce nor joins the burst. Only
// a run on the subject only routers may publish is the burst's.
func TestDebounceForgedSourceIsRejected(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(time.Second, 30*time.Second))
	f.change("f1", "forged", 1)
	act := events.ActivationID("/test", "f1")
	h := ce(act, "com.example.change")
	h["ce-source"] = router.DebounceSource("digest")
	f.publish("skillbus.trigger.com.example.change", h, `{"doc": "forged", "n": 2}`)
	var u events.RouteUnmatched
	f.event(events.ActivationID("skillbus:trigger-seq", "2"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedReservedSource {
		t.Fatalf("the forged trigger: %+v; want it rejected", u)
	}
	f.quiet()
	if got := f.runs(); fmt.Sprint(got["forged"]) != "[1]" {
		t.Fatalf("runs: %v; want one, with the first trigger's data (n 1): the forged one took no part", got)
	}
}

// A debounced skill the trigger would not start at once — here only in another
// skill's fallback chain — is not folded: the plan keeps it as the fallback, and
// no burst of it runs later beside the primary.
func TestDebounceFoldsOnlySkillsThatRun(t *testing.T) {
	t.Parallel()
	archive := &skill.Skill{Name: "archive", Description: "archives changes", Kind: skill.KindWorkflow, Digest: "arch1ve0123456789",
		Triggers: []string{"com.example.change"}, Priority: "high"}
	f := setup(t, debounced(time.Second, 30*time.Second), archive)
	f.change("p1", "fallback", 1)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "p1"), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "archive" || len(rd.Plan.FallbackChain) != 1 || rd.Plan.FallbackChain[0].Name != "digest" {
		t.Fatalf("plan: %+v; want archive with digest as its fallback", rd.Plan)
	}
	f.quiet()
	if got := f.runs(); len(got) != 0 {
		t.Fatalf("digest ran: %v; want it only in the fallback chain, not folded", got)
	}

}

// A steady stream, one trigger every 300 ms with a period of 1 s, would
// postpone its run for ever: the timeout (2 s) starts it while the stream goes on.
func TestDebounceTimeoutBoundsASteadyStream(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(time.Second, 2*time.Second))
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	during := 0
	for i := 1; i <= 20; i++ {
		f.change(fmt.Sprintf("s%d", i), "stream", i)
		if during == 0 {
			during = len(f.runs()["stream"])
		}
		<-tick.C
	}
	if during == 0 {
		t.Fatal("no run while the stream went on, 6 s with a timeout of 2 s")
	}
	f.quiet()
	got := f.runs()["stream"]
	if len(got) < 2 || got[len(got)-1] != 20 && !contains(got, 20) {
		t.Fatalf("runs of the stream: %v; want several, the last with n 20", got)
	}
}

func contains(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Two routers fold the same burst: one run.
func TestDebounceAcrossRouters(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(2*time.Second, 30*time.Second))
	second, err := router.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop(context.Background()) })
	for i := 1; i <= 20; i++ {
		f.change(fmt.Sprintf("r%d", i), "shared", i)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()) == 1 }, "no run")
	f.quiet()
	if got := f.runs(); len(got["shared"]) != 1 {
		t.Fatalf("runs: %v; want one", got)
	}
}

// A router stopped without draining inside the period: the run still happens,
// once, with the last data, through the router that takes over.
func TestDebounceSurvivesItsRouter(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(2*time.Second, 30*time.Second))
	for i := 1; i <= 5; i++ {
		f.change(fmt.Sprintf("k%d", i), "crash", i)
	}
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "k5"), events.TypeRouteUnmatched, &u) // folded
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	f.r.Stop(dead)
	if len(f.runs()) != 0 {
		t.Fatal("ran before its period")
	}
	next, err := router.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Stop(context.Background()) })
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()) == 1 }, "no run after the router died")
	f.quiet()
	if got := f.runs(); fmt.Sprint(got["crash"]) != "[5]" {
		t.Fatalf("runs: %v; want one with n 5", got)
	}
}

// runs cancel --skill while a burst is pending cancels its run when it comes due,
// before a worker could start it; a burst of triggers sent after the cancel runs.
func TestCancelSkillCancelsAPendingBurst(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(time.Second, 30*time.Second))
	f.change("c1", "readme", 1)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "c1"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedDebounced {
		t.Fatalf("c1: %+v; want folded", u)
	}
	ctl, err := control.New(f.ctx, f.b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.CancelSkill(f.ctx, "digest", time.Time{}, control.Request{By: "ada", Reason: "bad template", Source: "/test"}); err != nil {
		t.Fatal(err)
	}
	f.quiet()
	kv, err := f.b.KV(f.ctx, f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	burst := events.ExecutionID(router.DebounceSource("digest"), events.ActivationID("/test", "c1"), "digest")
	c, err := run.LoadCancel(f.ctx, kv, burst)
	if err != nil || c == nil || c.By != "ada" || !strings.Contains(c.Reason, "bad template") {
		t.Fatalf("the pending burst's run: cancel %+v (%v); want cancelled by ada", c, err)
	}
	if got := f.runs(); fmt.Sprint(got["readme"]) != "[1]" {
		t.Fatalf("runs: %v; want the cancelled run planned, to end as cancelled", got)
	}
	// Its job says it was cancelled first: a worker reads the cancel from KV
	// runs, not from its copy, which may not have it yet.
	jobs, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := jobs.GetLastMsgForSubject(f.ctx, "skillbus.exec.default.digest.>"); err != nil || m.Header.Get(events.HeaderCheckCancel) == "" {
		t.Fatalf("the cancelled run's job (%v): headers %v, want %s", err, m.Header, events.HeaderCheckCancel)
	}

	f.change("c2", "license", 1)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()["license"]) == 1 }, "no run of the burst sent after the cancel")
	f.quiet()
	later := events.ExecutionID(router.DebounceSource("digest"), events.ActivationID("/test", "c2"), "digest")
	if c, err := run.LoadCancel(f.ctx, kv, later); err != nil || c != nil {
		t.Fatalf("a burst sent after the cancel: cancel %+v (%v); want none", c, err)
	}

	// A cancel counted in a TRIGGERS stream since deleted (its sequences far
	// ahead of this one's) cancels nothing here.
	e, err := kv.Get(f.ctx, events.SkillCancelledKey("digest"))
	if err != nil {
		t.Fatal(err)
	}
	var cut run.SkillCancel
	if err := json.Unmarshal(e.Value(), &cut); err != nil || cut.Stream.IsZero() {
		t.Fatalf("the cancel's record: %s (%v)", e.Value(), err)
	}
	cut.Seq, cut.Stream = 1<<40, cut.Stream.Add(-time.Hour)
	v, _ := json.Marshal(cut)
	if _, err := kv.Put(f.ctx, events.SkillCancelledKey("digest"), v); err != nil {
		t.Fatal(err)
	}
	f.change("c3", "notes", 1)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()["notes"]) == 1 }, "no run of the burst sent after the stream was made again")
	f.quiet()
	if m, err := jobs.GetLastMsgForSubject(f.ctx, "skillbus.exec.default.digest.>"); err != nil || m.Header.Get(events.HeaderCheckCancel) != "" {
		t.Fatalf("a run not cancelled (%v): its job says %s", err, events.HeaderCheckCancel)
	}
	fresh := events.ExecutionID(router.DebounceSource("digest"), events.ActivationID("/test", "c3"), "digest")
	if c, err := run.LoadCancel(f.ctx, kv, fresh); err != nil || c != nil {
		t.Fatalf("a cancel of another TRIGGERS stream: cancel %+v (%v); want none", c, err)
	}
}
