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

// tracingRounds is the fewest rounds the tracing figure is the median of. Its two
// runs differ by less than a shared machine's load moves one of them: in the
// throughput phase a run gets anywhere from under one core to two, as other work
// comes and goes, so one round's ratio can be off by more than tracing costs. Five
// rounds keep two such rounds out of the median, and every other round measures
// tracing on first, so that what runs second (a heap left by the first run, a
// machine getting busier) lands on both sides alike.
const tracingRounds = 5

// runTracing measures the one-step skill with tracing off and on (every trace
// sampled, spans batched to an exporter that discards them), in rounds of the
// two, at least tracingRounds of them, with telemetry set up through
// pkg/telemetry as in a skillbus process. It prints each run and the median
// throughput ratio on/off, with the spans an execution exported.
func runTracing(ctx context.Context, cfg Config) error {
	// The first run of a process costs more CPU per execution than those after it
	// (10–20% in the throughput phase: a heap and caches to grow): an untimed one
	// keeps that off the first round's tracing-off run.
	warm := cfg
	warm.Executions, warm.Samples = max(cfg.Executions/4, 1), 1
	if _, _, err := tracedRun(ctx, warm, "warm-up", nil); err != nil {
		return err
	}
	var ratios, cpus []float64
	var spans, execs int64
	for round := 1; round <= max(cfg.Rounds, tracingRounds); round++ {
		onFirst := round%2 == 0
		order := "off first"
		if onFirst {
			order = "on first"
		}
		fmt.Fprintf(cfg.Out, "tracing round %d (one-step skill, %s):\n", round, order)
		var off, on Result
		for _, traced := range []bool{onFirst, !onFirst} {
			if !traced {
				r, _, err := tracedRun(ctx, cfg, "tracing off", nil)
				if err != nil {
					return err
				}
				off = r
				continue
			}
			exp := &discard{}
			r, n, err := tracedRun(ctx, cfg, "tracing on", exp)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("tracing on: no span reached the exporter, so the figure would measure nothing")
			}
			on = r
			spans += n
			execs += int64(cfg.Executions + cfg.Samples)
		}
		line(cfg.Out, off)
		line(cfg.Out, on)
		ratios = append(ratios, on.PerSecond/off.PerSecond)
		cpus = append(cpus, ratio(off.CPU, on.CPU))
	}
	fmt.Fprintf(cfg.Out, "ratio tracing on/off (100%% sampling, discarding exporter; median of %d rounds, %.2f spans exported per execution): throughput %.2f   by CPU per execution %.2f\n",
		len(ratios), float64(spans)/float64(execs), median(ratios), median(cpus))
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
	r, err := runSkillbus(ctx, cfg, name, noopSkill, events.DefaultLevel, planOf(cfg))
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
// prints): the one-step skill with tracing off and on, in rounds of the two (at
// least tracingRounds).
func RunTracing(ctx context.Context, cfg Config) error {
	cfg.defaults()
	fmt.Fprintf(cfg.Out, "skillbus bench: tracing, %d rounds of %d executions (window %d), concurrency %d\n",
		max(cfg.Rounds, tracingRounds), cfg.Executions, cfg.Window, cfg.Concurrency)
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
