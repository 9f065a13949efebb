package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// A lost chaos-keyed run is shown with what KV runs holds of it and of its key's
// slot; a run with an outcome is not shown; the report prints them and where the
// store was kept.
func TestLostKeyedRunsShowTheirRecords(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := b.KV(ctx, b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	lost := Trigger{ID: "t-4", Skill: keyedSkill, Execution: "exec-lost", Key: "k4"}
	done := Trigger{ID: "t-5", Skill: keyedSkill, Execution: "exec-done", Key: "k4"}
	gate := events.ConcGate(keyedSkill, 0, events.KeyHash("k4"))
	rec, _ := json.Marshal(run.Held{ExecutionID: lost.Execution, Skill: keyedSkill, Job: json.RawMessage(`{"inputs":"secret"}`),
		At: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), Gate: gate, Limit: 1})
	if _, err := kv.Put(ctx, events.RunHeldKey(lost.Execution), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, events.ConcSlotKey(gate, 0), []byte("exec-other")); err != nil {
		t.Fatal(err)
	}
	r := &runner{b: b, keyed: []Trigger{lost, done}}
	out := Outcomes{}
	out.Add(&run.Record{ExecutionID: done.Execution, Skill: keyedSkill, Status: run.StatusCompleted})
	lines := r.lostKeyedRecords(ctx, out)
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"lost chaos-keyed run: trigger t-4, key k4, execution exec-lost",
		events.RunHeldKey(lost.Execution) + ": revision 1, written ",
		"set aside 2026-11-27T10:00:00Z, gate \"" + gate + "\" (limit 1)",
		events.RunClaimKey(lost.Execution) + ": none",
		events.ConcSlotKey(gate, 0) + ": revision 2, written ",
		": exec-other",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the records do not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "exec-done") || strings.Contains(text, "secret") {
		t.Errorf("the records show a run with an outcome, or a job:\n%s", text)
	}
	var w bytes.Buffer
	(&Report{Store: "/tmp/run/store", KeyedRecords: lines}).Print(&w)
	if !strings.Contains(w.String(), "store:") || !strings.Contains(w.String(), "nats-server -js -sd /tmp/run/store") ||
		!strings.Contains(w.String(), "lost chaos-keyed run: trigger t-4") {
		t.Errorf("the report does not show the store and the records:\n%s", w.String())
	}
}

// A store on disk stays where it is; one on the run's tmpfs is copied out of it.
func TestKeepStore(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "nats", "jetstream")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "meta.inf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner{dir: dir}
	if got, err := r.keepStore(); err != nil || got != filepath.Join(dir, "nats") {
		t.Fatalf("keepStore = %q, %v; want the store in place", got, err)
	}
	r.mounted = true
	got, err := r.keepStore()
	if err != nil || got != filepath.Join(dir, "store") {
		t.Fatalf("keepStore = %q, %v; want a copy in store", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(got, "jetstream", "meta.inf")); err != nil || string(b) != "x" {
		t.Fatalf("the copy has %q, %v", b, err)
	}
}
