package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// discard is a span exporter that counts the spans it is given and drops them: what
// tracing costs skillbus itself, without a collector's cost on the same machine.
type discard struct{ spans atomic.Int64 }

func (d *discard) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.spans.Add(int64(len(spans)))
	return nil
}

func (d *discard) Shutdown(context.Context) error { return nil }

// runTracing measures the one-step skill with tracing off and on (every trace
// sampled, spans batched to an exporter that discards them), in alternating rounds,
// with telemetry set up through pkg/telemetry as in a skillbus process. It prints
// each run and the median throughput ratio on/off.
func runTracing(ctx context.Context, cfg Config) error {
	var ratios []float64
	for round := 1; round <= cfg.Rounds; round++ {
		fmt.Fprintf(cfg.Out, "tracing round %d (one-step skill):\n", round)
		off, _, err := tracedRun(ctx, cfg, "tracing off", nil)
		if err != nil {
			return err
		}
		exp := &discard{}
		on, spans, err := tracedRun(ctx, cfg, "tracing on", exp)
		if err != nil {
			return err
		}
		if spans == 0 {
			return fmt.Errorf("tracing on: no span reached the exporter, so the figure would measure nothing")
		}
		line(cfg.Out, off)
		line(cfg.Out, on)
		ratios = append(ratios, on.PerSecond/off.PerSecond)
	}
	fmt.Fprintf(cfg.Out, "ratio tracing on/off (100%% sampling, discarding exporter): throughput %.2f\n", median(ratios))
	return nil
}

// tracedRun runs the one-step skill with telemetry set up from exp: nil leaves
// tracing off (no endpoint in the environment), else every span goes to exp. It
// returns the spans exp received.
func tracedRun(ctx context.Context, cfg Config, name string, exp *discard) (Result, int64, error) {
	env := map[string]string{telemetry.EnvSampler: "always_on"}
	tc := telemetry.Config{ServiceName: "skillbus-bench", Getenv: func(k string) string { return env[k] }, Log: cfg.Log}
	if exp != nil {
		tc.SpanExporter = exp
	}
	tel, err := telemetry.Setup(ctx, tc)
	if err != nil {
		return Result{}, 0, err
	}
	if tel.Tracing != (exp != nil) {
		return Result{}, 0, fmt.Errorf("%s: telemetry set up with tracing %v", name, tel.Tracing)
	}
	r, err := runSkillbus(ctx, cfg, name, noopSkill, events.DefaultLevel)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := tel.Shutdown(sctx); err == nil {
		err = serr
	}
	if err != nil {
		return Result{}, 0, fmt.Errorf("%s: %w", name, err)
	}
	var spans int64
	if exp != nil {
		spans = exp.spans.Load()
	}
	return r, spans, nil
}

// RunTracing measures only the cost of tracing (what `skillbus bench --only tracing`
// prints): the one-step skill with tracing off and on, in alternating rounds.
func RunTracing(ctx context.Context, cfg Config) error {
	cfg.defaults()
	fmt.Fprintf(cfg.Out, "skillbus bench: tracing, %d rounds of %d executions (window %d), concurrency %d\n",
		cfg.Rounds, cfg.Executions, cfg.Window, cfg.Concurrency)
	return runTracing(ctx, cfg)
}

// untraced runs fn with telemetry set up as in a skillbus process that has no
// exporter configured: tracing off, the helpers returning before they build a span.
func untraced(ctx context.Context, cfg Config, fn func() (Result, error)) (Result, error) {
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "skillbus-bench", Getenv: func(string) string { return "" }, Log: cfg.Log})
	if err != nil {
		return Result{}, err
	}
	r, err := fn()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := tel.Shutdown(sctx); err == nil {
		err = serr
	}
	return r, err
}
