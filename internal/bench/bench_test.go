//go:build bench

package bench_test

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/bench"
)

// The benchmark itself runs in `make bench`; this keeps it from rotting: a tiny run
// must finish and print the figures an issue quotes, with the server embedded and in
// a process of its own (whose CPU time is then printed apart). It is a throughput run
// (a minute of CPU on 2 cores for the two), so it is behind the build tag bench, which
// make test-all (and so CI) sets to run it after make test:
// go test -race -tags bench -run '^TestBenchRuns$' ./internal/bench/. With -short only
// the server in a process of its own runs, which goes through every figure and the
// server's CPU besides.
func TestBenchRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		process bool
		where   string
	}{{"embedded", false, "embedded in the bench's process"}, {"process", true, "its own process"}} {
		if testing.Short() && !tc.process {
			continue
		}
		// One after the other: the tracing figure sets the process's tracer provider.
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // -race on a loaded 2-core machine
			defer cancel()
			err := bench.Run(ctx, bench.Config{Executions: 300, Window: 50, Samples: 10, Concurrency: 8, Rounds: 1, Pairs: 2, PairExecutions: 200, PairWarmup: 100, Durable: 100, Out: &out, ServerProcess: tc.process})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			res := []string{
				`bare JetStream\s+\d+ exec/s\s+latency p50`,
				`skillbus\s+\d+ exec/s .* [1-9]\d* cpu-µs/exec`,
				`pair  1 \(skillbus first\s*\)\s+skillbus\s+\d+ exec/s\s+[1-9]\d* cpu-µs/exec.*bare JetStream\s+\d+ exec/s.*ratio \d+\.\d\d, by CPU \d+\.\d\d`,
				`2 paired rounds of the headline ratio \(200 executions timed per run, after 100 untimed\):\n  pair  1 `,
				`pair  2 \(bare JetStream first\)`,
				`same, by CPU per execution .*: one-step \d+\.\d\d \(quartiles \d+\.\d\d–\d+\.\d\d, range \d+\.\d\d–\d+\.\d\d\)   3-step/one-step \d+\.\d\d`,
				`settings: server=` + regexp.QuoteMeta(tc.where) + ` storage=file replicas=1 sync_interval=default \(2m\) msg_size≈\d+B`,
				`ratio skillbus/minimal JetStream pipeline \(median of 2 paired rounds, 200 executions timed per run\): throughput \d+\.\d\d \(quartiles \d+\.\d\d–\d+\.\d\d, range \d+\.\d\d–\d+\.\d\d\)   latency \(\d+ samples a side, all rounds pooled\) p50 \d+\.\d\d  p99 \d+\.\d\d`,
				`persisted publishes per execution \(counted by the server\): minimal 3\.0, skillbus one-step 3\.0, three-step \d\.\d`,
				`ratio skillbus/bare JetStream doing skillbus's writes .*: throughput \d+\.\d\d`,
				`ratio by events level, one-step skill / minimal pipeline: full \d+\.\d\d   steps \(default\) \d+\.\d\d   terminal \d+\.\d\d`,
				`ratio skillbus/minimal JetStream pipeline, sync_interval=always .*: throughput \d+\.\d\d`,
				`skillbus 3-step\s+\d+ exec/s`,
				`ratio 3-step workflow/one-step skill .*: throughput \d+\.\d\d`,
				`skillbus keyed\s+\d+ exec/s`,
				`ratio keyed concurrency \(at most 2 at once per key, 256 keys\)/one-step skill .*: throughput \d+\.\d\d`,
				`skillbus priority\s+\d+ exec/s`,
				`ratio queue priority \(a quarter of runs 300 s ahead, on a lane\)/one-step skill .*: throughput \d+\.\d\d`,
				`tracing off\s+\d+ exec/s`,
				`tracing on\s+\d+ exec/s`,
				// 5 spans an execution: fewer would be spans lost; a redelivery on a slow
				// machine may add a few.
				`ratio tracing on/off \(100% sampling, discarding exporter; median of 5 rounds, 5\.0\d spans exported per execution\): throughput \d+\.\d\d   by CPU per execution \d+\.\d\d`,
			}
			server := regexp.MustCompile(`cpu-µs/exec \(server [1-9]\d*\)`)
			if got := server.MatchString(out.String()); got != tc.process {
				t.Errorf("the server's own CPU printed: %v, want %v:\n%s", got, tc.process, out.String())
			}
			for _, re := range res {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("output lacks %s:\n%s", re, out.String())
				}
			}
		})
	}
}
