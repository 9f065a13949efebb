package router

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

const (
	rampCurrent = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	rampNext    = "beef0000beef0000beef0000beef0000beef0000beef0000beef0000beef0000"
)

// A 10% ramp sends between 8% and 12% of 1,000 routed triggers to the ramped
// version, each plan entry saying why; every delivery of one trigger gets the
// same version; after a rollback none goes there.
func TestRampShareOverAThousandRuns(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Version: "1.0.0", Digest: rampCurrent, Triggers: []string{"com.example.greet"}}
	r, err := New(Config{Bus: b, Catalog: staticCatalog{s}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })

	rec, _ := json.Marshal(run.Ramp{Skill: "hello", Digest: rampNext, Version: "1.1.0", Basis: 1000, By: "ada"})
	if _, err := r.runs.Put(ctx, events.SkillRampKey("hello"), rec); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return rampsNow(&r.ramps) != nil }, "the router never saw the ramp")

	const n = 1000
	routeN := func(prefix string) {
		m := &stubMsg{subject: b.Subjects.Trigger("com.example.greet"), header: nats.Header{
			"ce-specversion": {"1.0"}, "ce-source": {"/ramp"}, "ce-type": {"com.example.greet"}, "Content-Type": {"application/json"},
		}, data: []byte(`{"name":"Ada"}`)}
		m.md.NumDelivered, m.md.Sequence.Stream = 1, 1<<40
		for i := range n {
			m.header["ce-id"] = []string{prefix + strconv.Itoa(i)}
			if _, err := r.route(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	routeN("a")
	jobs := readJobs(t, ctx, b)
	ramped := 0
	for _, j := range jobs {
		switch {
		case j.Skill.Digest == rampNext && j.Skill.Version == "1.1.0" && strings.HasPrefix(j.Skill.Ramp, "ramped version: ramp 10% to beef0000beef"):
			ramped++
		case j.Skill.Digest == rampCurrent && strings.HasPrefix(j.Skill.Ramp, "current version: ramp 10%"):
		default:
			t.Fatalf("job for %s@%s says %q", j.Skill.Version, j.Skill.Digest, j.Skill.Ramp)
		}
	}
	if len(jobs) != n {
		t.Fatalf("%d jobs, want %d", len(jobs), n)
	}
	if ramped < n*8/100 || ramped > n*12/100 {
		t.Fatalf("%d of %d runs ramped, want 8%%-12%%", ramped, n)
	}
	t.Logf("%d of %d runs on the ramped version", ramped, n)

	// Every delivery of a trigger picks what the first did.
	for _, j := range jobs[:50] {
		sr := ramp(rampsNow(&r.ramps), events.SkillRef{Name: "hello", Digest: rampCurrent, Version: "1.0.0"}, j.ActivationID)
		if sr.Digest != j.Skill.Digest {
			t.Fatalf("activation %s: %s now, %s when routed", j.ActivationID, sr.Digest, j.Skill.Digest)
		}
	}

	if err := r.runs.Delete(ctx, events.SkillRampKey("hello")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return rampsNow(&r.ramps) == nil }, "the router never saw the rollback")
	routeN("b")
	after := readJobs(t, ctx, b)[n:]
	for _, j := range after {
		if j.Skill.Digest != rampCurrent || j.Skill.Ramp != "" {
			t.Fatalf("after the rollback a job ran %s (%q)", j.Skill.Digest, j.Skill.Ramp)
		}
	}
	if len(after) != n {
		t.Fatalf("%d jobs after the rollback, want %d", len(after), n)
	}
}

// readJobs reads every job in JOBS, in order.
func readJobs(t *testing.T, ctx context.Context, b *bus.Bus) []events.Job {
	t.Helper()
	c, err := b.JS.OrderedConsumer(ctx, b.StreamJobs(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Job
	for {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: m.Headers(), Data: m.Data()}))
			if err != nil {
				t.Fatal(err)
			}
			var j events.Job
			if err := json.Unmarshal(e.Data(), &j); err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
		}
		if got == 0 {
			return out
		}
	}
}
