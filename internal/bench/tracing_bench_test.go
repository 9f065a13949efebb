package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// BenchmarkTracing is BenchmarkExecution's one-step skill with tracing off and on
// (every trace sampled, spans batched to an exporter that drops them): cpu-µs/op
// says what recording costs per execution whatever the machine's load, which the
// throughput ratio of `skillbus bench --only tracing` cannot on a shared machine,
// and spans/op how many spans an execution records. `go test ./internal/bench -run -
// -bench Tracing -benchmem -benchtime 5000x`.
func BenchmarkTracing(b *testing.B) {
	cfg := Config{Concurrency: 64, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.defaults()
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			env := map[string]string{telemetry.EnvSampler: "always_on"}
			tc := telemetry.Config{Getenv: func(k string) string { return env[k] }, Log: cfg.Log}
			exp := &discard{}
			if on {
				tc.SpanExporter = exp
			}
			tel, err := telemetry.Setup(context.Background(), tc)
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			sys, err := startSkillbus(context.Background(), cfg, noopSkill, events.DefaultLevel, b.N)
			if err != nil {
				b.Fatal(err)
			}
			defer sys.stop()
			drive(b, sys, sys.results, cfg.Window)
			if on {
				if err := tel.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				if exp.spans.Load() == 0 {
					b.Fatal("no span reached the exporter")
				}
				b.ReportMetric(float64(exp.spans.Load())/float64(b.N), "spans/op")
			}
		})
	}
}
