package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// BenchmarkExecution drives b.N executions through a fleet and through the minimal
// pipeline, each on its own embedded server, with as many unfinished at once as
// skillbus bench's throughput phase allows (Config.Window).
// allocs/op, B/op and cpu-µs/op (user and system CPU time, from getrusage) are per
// execution and count the whole process — server, router, worker and the driver —
// so, unlike exec/s on a shared machine, they hardly depend on the load: `go test ./internal/bench -run - -bench Execution
// -benchmem -benchtime 5000x`. skillbus-steps-three is the three-step workflow
// (a local HTTP call, a compute step, an echo).
//
// With -args -server-process the servers run in processes of their own:
// server-cpu-µs/op is then the part of cpu-µs/op they spent, and allocs/op and B/op
// count the clients only (router, worker, driver).
func BenchmarkExecution(b *testing.B) {
	cfg := Config{Concurrency: 64, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ServerProcess: *serverProcess}
	cfg.defaults()
	b.Run("minimal", func(b *testing.B) {
		sys, err := startBaseline(context.Background(), cfg, Minimal, 870)
		if err != nil {
			b.Fatal(err)
		}
		defer sys.stop()
		drive(b, sys, sys.results, cfg.Window)
	})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n":%q,"items":[1,2,3]}`, r.URL.Query().Get("n"))
	}))
	defer web.Close()
	skills := map[string]*skill.Skill{"": noopSkill, "-three": workflowSkill(web.URL)}
	for _, level := range []events.Level{events.LevelSteps, events.LevelFull} {
		for _, suffix := range []string{"", "-three"} {
			if level == events.LevelFull && suffix != "" {
				continue
			}
			execution(b, "skillbus-"+string(level)+suffix, cfg, skills[suffix], level)
		}
	}
}

var serverProcess = flag.Bool("server-process", false, "BenchmarkExecution: run each nats-server in a process of its own")

// execution is BenchmarkExecution's sub-benchmark of skillbus running sk.
func execution(b *testing.B, name string, cfg Config, sk *skill.Skill, level events.Level) {
	b.Run(name, func(b *testing.B) {
		// As a skillbus process with no exporter configured: tracing off.
		tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: func(string) string { return "" }, Log: cfg.Log})
		if err != nil {
			b.Fatal(err)
		}
		defer tel.Shutdown(context.Background())
		sys, err := startSkillbus(context.Background(), cfg, sk, level, b.N)
		if err != nil {
			b.Fatal(err)
		}
		defer sys.stop()
		drive(b, sys, sys.results, cfg.Window)
	})
}

// drive publishes b.N triggers, at most window unfinished, and waits for every result.
func drive(b *testing.B, sys system, results <-chan int, window int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	slots := make(chan struct{}, window)
	done := make(chan struct{})
	go func() {
		n := 0
		for range results {
			<-slots
			if n++; n == b.N {
				close(done)
			}
		}
	}()
	b.ReportAllocs()
	cpu0, scpu0 := sys.server().sample()
	b.ResetTimer()
	for i := range b.N {
		slots <- struct{}{}
		if err := sys.trigger(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatal("executions did not finish")
	}
	b.StopTimer()
	cpu1, scpu1 := sys.server().sample()
	if err := sys.server().Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	if *serverProcess {
		b.ReportMetric(float64((scpu1-scpu0).Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
}
