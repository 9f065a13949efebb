package console

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
)

func decided(act, exec, skill string) []byte {
	b, _ := json.Marshal(events.RouteDecided{ActivationID: act, Trigger: events.TriggerRef{Type: "com.example.x"},
		Plan: events.Plan{Primary: events.SkillRef{Name: skill, Version: "1.0.0", ExecutionID: exec}}})
	return b
}

func data(v any) []byte { b, _ := json.Marshal(v); return b }

func TestIndexFollowsARunThroughItsStates(t *testing.T) {
	t.Parallel()
	x := NewIndex(IndexConfig{})
	t0 := time.Unix(1000, 0)
	steps := []struct {
		typ   string
		data  []byte
		state string
	}{
		{events.TypeRouteDecided, decided("a1", "e1", "deploy"), StateQueued},
		{events.TypeExecutionStarted, data(events.ExecutionStarted{ExecutionID: "e1", Skill: "deploy", Attempt: 1}), StateRunning},
		{events.TypeConfirmationRequested, data(events.ConfirmationRequested{ExecutionID: "e1", StepID: "go"}), StatePaused},
		{events.TypeConfirmationRecorded, data(events.ConfirmationRecorded{ExecutionID: "e1", StepID: "go"}), StateQueued},
		{events.TypeExecutionRetrying, data(events.ExecutionRetrying{ExecutionID: "e1", Attempt: 2, Error: "timeout"}), StateRetrying},
		{events.TypeExecutionFallback, data(events.ExecutionFallback{ExecutionID: "e1", Skill: "deploy", Next: "deploy-slow", NextExecutionID: "e2", Error: "boom"}), StateFallback},
		{events.TypeStepStarted, data(events.StepStarted{ExecutionID: "e1", StepID: "late"}), StateFallback},
	}
	for i, s := range steps {
		x.Apply(s.typ, s.data, t0.Add(time.Duration(i)*time.Second))
		r, _ := x.Get("e1")
		if r.State != s.state {
			t.Fatalf("after %s: state %q, want %q", s.typ, r.State, s.state)
		}
	}
	next, ok := x.Get("e2")
	if !ok || next.Prev != "e1" || next.Skill != "deploy-slow" || next.ActivationID != "a1" || next.State != StateQueued {
		t.Fatalf("fallback run = %+v", next)
	}
	x.Apply(events.TypeExecutionCompleted, data(events.ExecutionCompleted{ExecutionID: "e2", Skill: "deploy-slow", DurationMS: 12}), t0.Add(time.Minute))
	if c := x.Counts(Filter{}); c[StateCompleted] != 1 || c[StateFallback] != 1 {
		t.Fatalf("counts = %v", c)
	}
	st := x.Stats()
	if len(st) != 2 || st[0].Skill != "deploy" || st[0].Fallback != 1 || st[1].SuccessRate() != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if got := x.Apply(events.TypeExecutionCompleted, []byte("{not json"), t0); got != nil {
		t.Fatalf("bad data changed %v", got)
	}
}

// fill adds n runs straight into the index (Apply's parsing is tested above): run
// i of skill-(i%10), started i ms after t0, failed when i%3 == 0.
func fill(x *Index, n int, t0 time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range n {
		r := x.upsert(fmt.Sprintf("e%06d", i), t0.Add(time.Duration(i)*time.Millisecond))
		r.Skill = fmt.Sprintf("skill-%d", i%10)
		if i%3 == 0 {
			r.State = StateFailed
		}
	}
}

func TestIndexPagesNewestFirstThroughAHundredThousandRuns(t *testing.T) {
	t.Parallel()
	x := NewIndex(IndexConfig{})
	t0 := time.Unix(0, 0)
	fill(x, 100_000, t0)
	seen, pages := 0, 0
	var before uint64
	last := "e999999"
	f := Filter{Skill: "skill-3", State: StateFailed}
	for {
		p := x.Query(f, before, 200)
		for _, r := range p.Runs {
			if r.ExecutionID >= last || r.Skill != "skill-3" || r.State != StateFailed {
				t.Fatalf("page %d: %+v after %s", pages, r, last)
			}
			last = r.ExecutionID
		}
		seen += len(p.Runs)
		pages++
		if p.Before == 0 {
			break
		}
		before = p.Before
	}
	// i%10 == 3 and i%3 == 0: i ≡ 3 (mod 30).
	if want := 100_000 / 30; seen < want || seen > want+1 {
		t.Fatalf("saw %d failed runs of skill-3 in %d pages, want %d", seen, pages, want)
	}
	since := t0.Add(99_990 * time.Millisecond)
	if p := x.Query(Filter{Since: since}, 0, 50); len(p.Runs) != 10 || p.Before != 0 {
		t.Fatalf("since: %d runs, before %d", len(p.Runs), p.Before)
	}
}

func TestIndexForgetsTheOldestPastItsBound(t *testing.T) {
	t.Parallel()
	x := NewIndex(IndexConfig{MaxRuns: 1000})
	fill(x, 5000, time.Unix(0, 0))
	if x.Len() != 1000 {
		t.Fatalf("len %d", x.Len())
	}
	if _, ok := x.Get("e003999"); ok {
		t.Fatal("an old run was kept")
	}
	p := x.Query(Filter{}, 0, 2000)
	if len(p.Runs) != 1000 || p.Runs[0].ExecutionID != "e004999" || p.Runs[999].ExecutionID != "e004000" {
		t.Fatalf("%d runs, first %s", len(p.Runs), p.Runs[0].ExecutionID)
	}
	// A cursor into the forgotten part ends the paging instead of failing.
	if p := x.Query(Filter{}, 5, 10); len(p.Runs) != 0 {
		t.Fatalf("forgotten cursor gave %d runs", len(p.Runs))
	}
}

// BenchmarkQuery100k measures a page of the runs list with 100,000 runs indexed:
// the first page, a filter that matches one run in thirty, and a deep page.
func BenchmarkQuery100k(b *testing.B) {
	x := NewIndex(IndexConfig{})
	fill(x, 100_000, time.Unix(0, 0))
	b.Run("first-page", func(b *testing.B) {
		for b.Loop() {
			x.Query(Filter{}, 0, 50)
		}
	})
	b.Run("sparse-filter", func(b *testing.B) {
		for b.Loop() {
			x.Query(Filter{Skill: "skill-3", State: StateFailed}, 0, 50)
		}
	})
	b.Run("deep-page", func(b *testing.B) {
		for b.Loop() {
			x.Query(Filter{}, 1000, 50)
		}
	})
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			x.Counts(Filter{})
		}
	})
}

// BenchmarkApply measures how fast the index takes events.
func BenchmarkApply(b *testing.B) {
	x := NewIndex(IndexConfig{})
	d := decided("a", "e", "s")
	i := 0
	for b.Loop() {
		i++
		x.Apply(events.TypeRouteDecided, d, time.Unix(int64(i), 0))
	}
}
