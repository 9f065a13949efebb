package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// gateBench is a worker that only watches the gates, on an embedded server.
func gateBench(b *testing.B) (*Worker, context.Context) {
	b.Helper()
	srv := natstest.Start(b)
	bs := srv.Bus(b, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	w := &Worker{cfg: Config{Bus: bs, AckWait: 30 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}}
	var err error
	if w.runs, err = bs.KV(ctx, bs.BucketRuns()); err != nil {
		b.Fatal(err)
	}
	if err := w.watchGates(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.stopGates)
	return w, ctx
}

// viewHas waits until the worker's view shows n slots of gate taken.
func viewHas(b *testing.B, w *Worker, gate string, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		w.gates.mu.Lock()
		got := len(w.gates.slots[gate])
		w.gates.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the view shows %d slots of the gate taken, want %d", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A run arriving at a gate of limit 1000 with 999 slots held takes the free one.
// Each iteration takes it and frees it again.
func BenchmarkTakeSlotCrowdedGate(b *testing.B) {
	w, ctx := gateBench(b)
	gate := events.ConcGate("bench", 0, events.KeyHash("k"))
	const limit = 1000
	for n := range limit - 1 {
		if _, err := w.runs.Create(ctx, events.ConcSlotKey(gate, n), []byte("holder-"+strconv.Itoa(n))); err != nil {
			b.Fatal(err)
		}
	}
	viewHas(b, w, gate, limit-1)
	b.ResetTimer()
	for i := range b.N {
		j := &job{fast: true}
		j.data.ExecutionID = "bench-" + strconv.Itoa(i)
		ok, err := benchTake(ctx, w, j, gate, limit)
		if err != nil || !ok {
			b.Fatalf("took no slot: %v", err)
		}
		s := j.slots[0]
		if err := w.runs.Delete(ctx, s.key, jetstream.LastRevision(s.rev)); err != nil {
			b.Fatal(err)
		}
		viewHas(b, w, gate, limit-1)
	}
}

// What the view of every worker keeps of each run waiting at a gate: 2,000 runs
// whose inputs are 4 KiB each.
func BenchmarkWaitingRunsView(b *testing.B) {
	w, ctx := gateBench(b)
	gate := events.ConcGate("bench", 0, events.KeyHash("k"))
	if _, err := w.runs.Create(ctx, events.ConcSlotKey(gate, 0), []byte("holder")); err != nil {
		b.Fatal(err)
	}
	viewHas(b, w, gate, 1)
	const waiting = 2000
	inputs, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 4096)})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range waiting {
		id := "waiting-" + strconv.Itoa(i)
		job, _ := json.Marshal(events.Job{ExecutionID: id, Inputs: inputs, Skill: events.SkillRef{Name: "bench", Pool: "default"}})
		rec, _ := json.Marshal(run.Held{ExecutionID: id, Skill: "bench", Job: job, At: time.Now(), Gate: gate, Limit: 1})
		if _, err := w.runs.Put(ctx, events.RunHeldKey(id), rec); err != nil {
			b.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		w.gates.mu.Lock()
		n := len(w.gates.waiting[gate])
		w.gates.mu.Unlock()
		if n == waiting {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d runs waiting in the view, want %d", n, waiting)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/waiting, "B/waiter")
	for range b.N {
		w.gates.mu.Lock()
		_ = len(w.gates.waiting[gate])
		w.gates.mu.Unlock()
	}
}

func benchTake(ctx context.Context, w *Worker, j *job, gate string, limit int) (bool, error) {
	return w.takeSlot(ctx, j, gate, limit, quickTries)
}
