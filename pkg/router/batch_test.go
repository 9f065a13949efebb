package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/skill"
)

func batched(size int, timeout time.Duration) *skill.Skill {
	return &skill.Skill{Name: "ingest", Description: "ingests orders", Kind: skill.KindWorkflow, Digest: "1ngest0123456789",
		Triggers: []string{"com.example.order"},
		Batch:    &skill.Batch{Key: "data.shop", MaxSize: size, Timeout: skill.Duration(timeout)}}
}

// setupBatch is setup with room for batches of a few dozen small events.
func setupBatch(t *testing.T, skills ...*skill.Skill) *fixture {
	t.Helper()
	return setupWith(t, func(c *router.Config) { c.MaxEventBytes = 64 << 10 }, skills...)
}

func (f *fixture) order(id, shop string) {
	f.t.Helper()
	f.publish("skillbus.trigger.com.example.order", ce(id, "com.example.order"), fmt.Sprintf(`{"shop": %q, "id": %q}`, shop, id))
}

// batchRuns are the runs of skill ingest: the ids of each one's events, in
// their order, the runs ordered by their first event's id.
func (f *fixture) batchRuns() [][]string {
	f.t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := s.Info(f.ctx, jetstream.WithSubjectFilter("skillbus.exec.default.ingest.>"))
	if err != nil {
		f.t.Fatal(err)
	}
	var out [][]string
	for subj := range info.State.Subjects {
		raw, err := s.GetLastMsgForSubject(f.ctx, subj)
		if err != nil {
			f.t.Fatal(err)
		}
		var j struct {
			Data struct {
				Inputs struct {
					Events []struct {
						ID   string `json:"id"`
						Type string `json:"type"`
						Data struct {
							ID string `json:"id"`
						} `json:"data"`
					} `json:"events"`
				} `json:"inputs"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw.Data, &j); err != nil {
			f.t.Fatal(err)
		}
		var ids []string
		for _, e := range j.Data.Inputs.Events {
			if e.ID != e.Data.ID || e.Type != "com.example.order" {
				f.t.Fatalf("an event of a batch: %+v", e)
			}
			ids = append(ids, e.ID)
		}
		out = append(out, ids)
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// batchQuiet waits until no batch is pending (see timersQuiet).
func (f *fixture) batchQuiet() { f.timersQuiet("batch") }

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// A full batch runs at once, long before its timeout, with every event in the
// order they were published; each is recorded as batched.
func TestBatchFullRunsAtOnce(t *testing.T) {
	t.Parallel()
	f := setupBatch(t, batched(5, time.Hour))
	for _, id := range ids("o", 1, 5) {
		f.order(id, "north")
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) == 1 }, "no run of the full batch")
	f.settled()
	if got, want := f.batchRuns(), [][]string{ids("o", 1, 5)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v; want %v", got, want)
	}
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "o03"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedBatched || !strings.Contains(u.Reason, `ingest: batch 5 in 1h0m0s by data.shop (key "north"): added to a batch`) {
		t.Fatalf("o03: %+v", u)
	}
	var rd events.RouteDecided
	f.event(events.ActivationID(router.DebounceSource("ingest"), runIDOf(t, f)), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "ingest" || rd.Trigger.Subject != f.b.Subjects.TriggerDebounced("ingest") {
		t.Fatalf("the run's decision: %+v", rd)
	}
}

// A full batch runs at once; its timer, still armed, comes due after the run
// and starts no second run.
func TestBatchTimerAfterTheFullBatchRan(t *testing.T) {
	t.Parallel()
	f := setupBatch(t, batched(3, time.Second))
	for _, id := range ids("f", 1, 3) {
		f.order(id, "west")
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) == 1 }, "no run of the full batch")
	f.batchQuiet() // the timer came due and its message was handled
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evs.GetLastMsgForSubject(f.ctx, f.b.Subjects.BatchFired("*")); err != nil {
		t.Fatalf("the full batch's timer did not come due: %v", err)
	}
	if got, want := f.batchRuns(), [][]string{ids("f", 1, 3)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v; want %v", got, want)
	}
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(f.ctx, jetstream.WithSubjectFilter(f.b.Subjects.TriggerDebounced("ingest")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[f.b.Subjects.TriggerDebounced("ingest")]; n != 1 {
		t.Fatalf("%d runs published; want 1", n)
	}
}

// runIDOf is the id of the one batch run in TRIGGERS.
func runIDOf(t *testing.T, f *fixture) string {
	t.Helper()
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(f.ctx, f.b.Subjects.TriggerDebounced("ingest"))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get("ce-id")
}

// A batch that does not fill runs at its timeout with what it holds; each key
// is a batch of its own.
func TestBatchTimeoutRunsThePartialBatchPerKey(t *testing.T) {
	t.Parallel()
	f := setupBatch(t, batched(3, 2*time.Second))
	start := time.Now()
	for i, id := range ids("k", 1, 5) {
		shop := "north"
		if i%2 == 1 {
			shop = "south"
		}
		f.order(id, shop)
	}
	// north: k01 k03 k05 fill a batch; south: k02 k04 wait for the timeout.
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) == 2 }, "no runs")
	if time.Since(start) < 2*time.Second {
		t.Fatal("the partial batch ran before its timeout")
	}
	f.batchQuiet()
	if got, want := f.batchRuns(), [][]string{{"k01", "k03", "k05"}, {"k02", "k04"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v; want %v", got, want)
	}
}

// Two routers add to the same batches at once: every event is in exactly one
// run, every full batch runs once.
func TestBatchAcrossRouters(t *testing.T) {
	t.Parallel()
	f := setupBatch(t, batched(10, 3*time.Second))
	second, err := router.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop(context.Background()) })
	all := ids("r", 1, 45)
	for _, id := range all {
		f.order(id, "shared")
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) == 5 }, "not 5 runs")
	f.batchQuiet()
	runs := f.batchRuns()
	var seen []string
	partial := 0
	for _, r := range runs {
		if len(r) != 10 {
			partial++
		}
		seen = append(seen, r...)
	}
	slices.Sort(seen)
	if len(runs) != 5 || partial != 1 || fmt.Sprint(seen) != fmt.Sprint(all) {
		t.Fatalf("runs %v; want four of 10 and one of 5, with every event once", runs)
	}
}

// Events past the size a run may have start the next batch: no run is too
// large to route.
func TestBatchBoundedBySize(t *testing.T) {
	t.Parallel()
	f := setupWith(t, func(c *router.Config) { c.MaxEventBytes = 4096 }, batched(50, 2*time.Second))
	pad := strings.Repeat("x", 1000)
	for _, id := range ids("s", 1, 6) {
		f.publish("skillbus.trigger.com.example.order", ce(id, "com.example.order"), fmt.Sprintf(`{"shop": "big", "id": %q, "pad": %q}`, id, pad))
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) >= 2 }, "no runs")
	f.batchQuiet()
	runs := f.batchRuns()
	var seen []string
	for _, r := range runs {
		if len(r) > 3 {
			t.Fatalf("a run of %d events of 1 KB with a limit of 4 KB: %v", len(r), runs)
		}
		seen = append(seen, r...)
	}
	slices.Sort(seen)
	if fmt.Sprint(seen) != fmt.Sprint(ids("s", 1, 6)) {
		t.Fatalf("runs %v; want every event once", runs)
	}
}
