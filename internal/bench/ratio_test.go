package bench

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Paired rounds run A B B A A B B A: each side goes first in every other round.
func TestPairOrder(t *testing.T) {
	var runs strings.Builder
	for i := range 4 {
		if skillbusFirst(i) {
			runs.WriteString("AB")
		} else {
			runs.WriteString("BA")
		}
	}
	if got := runs.String(); got != "ABBAABBA" {
		t.Errorf("runs in the order %s, want ABBAABBA", got)
	}
}

// The headline is the median of the rounds' own ratios, not a ratio of medians:
// here the median throughputs (300 and 600 exec/s) would give 0.50.
func TestSummarizePairs(t *testing.T) {
	round := func(sb, min float64, sbCPU, minCPU time.Duration) pairRound {
		return pairRound{
			skillbus: Result{PerSecond: sb, CPU: sbCPU, Persisted: 3, latency: []time.Duration{2 * time.Millisecond}},
			minimal:  Result{PerSecond: min, CPU: minCPU, Persisted: 3, latency: []time.Duration{time.Millisecond}},
		}
	}
	s := summarize([]pairRound{
		round(100, 100, 200*time.Microsecond, 100*time.Microsecond),  // 1.00, by CPU 0.50
		round(300, 1000, 100*time.Microsecond, 100*time.Microsecond), // 0.30, by CPU 1.00
		round(500, 600, 400*time.Microsecond, 300*time.Microsecond),  // 0.83, by CPU 0.75
		round(900, 1000, 250*time.Microsecond, 200*time.Microsecond), // 0.90, by CPU 0.80
	})
	if got, want := s.throughput.String(), "0.87 (quartiles 0.70–0.93, range 0.30–1.00)"; got != want {
		t.Errorf("throughput %s, want %s", got, want)
	}
	if got, want := s.cpu.String(), "0.78 (quartiles 0.69–0.85, range 0.50–1.00)"; got != want {
		t.Errorf("by CPU %s, want %s", got, want)
	}
	if s.p50 != 0.5 || s.persisted != [2]float64{3, 3} {
		t.Errorf("latency p50 ratio %.2f, persisted %v: want 0.50 and [3 3]", s.p50, s.persisted)
	}
	// Cores used: exec/s × CPU per execution, from 100 × 100 µs to 900 × 250 µs.
	if got := fmt.Sprintf("%.2f–%.3f", s.cores[0], s.cores[1]); got != "0.01–0.225" {
		t.Errorf("cores used %s, want 0.01–0.225", got)
	}
}

func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{[]float64{7}, 0.5, 7},
		{[]float64{1, 2, 3}, 0.5, 2},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5},
		{[]float64{1, 2, 3, 4}, 0.25, 1.75},
		{[]float64{1, 2, 3, 4}, 1, 4},
		{[]float64{1, 2, 3, 4, 5}, 0.75, 4},
	} {
		if got := quantile(tc.xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
		}
	}
}

// The clock runs from the warm-up's last result to the timed executions' last; the
// tail's results end the phase after it.
func TestRunPlanClock(t *testing.T) {
	for _, tc := range []struct {
		plan              runPlan
		start, stop, done int
	}{
		{runPlan{warmup: 3, timed: 5, tail: 2}, 3, 8, 10},
		{runPlan{timed: 5}, 0, 5, 5}, // no warm-up: the first trigger starts it
		{runPlan{timed: 5, tail: 4}, 0, 5, 9},
	} {
		var start, stop, done int
		for n := 1; n <= tc.plan.loaded(); n++ {
			a, o, d := tc.plan.at(n)
			if a {
				start = n
			}
			if o {
				stop = n
			}
			if d {
				done = n
			}
		}
		if start != tc.start || stop != tc.stop || done != tc.done {
			t.Errorf("%+v: clock started at result %d, stopped at %d, done at %d; want %d, %d, %d", tc.plan, start, stop, done, tc.start, tc.stop, tc.done)
		}
	}
}

// A small run of the headline ratio alone: every round's two runs, the settings and
// the paired figures with their spread.
func TestRunRatio(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // -race on a loaded 2-core machine
	defer cancel()
	cfg := Config{Window: 50, Samples: 5, Concurrency: 8, Pairs: 2, PairExecutions: 200, PairWarmup: 100, Out: &out}
	if err := RunRatio(ctx, cfg); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, re := range []string{
		`^skillbus bench: the headline ratio, 2 paired rounds of 200 executions \(each run on a fresh server, timed after 100 untimed and with 50 more behind; window 50\) and 5 latency samples per run`,
		`\n  pair  1 \(skillbus first\s*\)\s+skillbus\s+\d+ exec/s\s+[1-9]\d* cpu-µs/exec\s+bare JetStream\s+\d+ exec/s\s+[1-9]\d* cpu-µs/exec\s+ratio \d+\.\d\d, by CPU \d+\.\d\d\n`,
		`\n  pair  2 \(bare JetStream first\)`,
		`\nsettings: server=embedded in the bench's process storage=file .* msg_size≈[1-9]\d+B`,
		`\npersisted publishes per execution \(counted by the server\): minimal 3\.0, skillbus one-step 3\.0\n`,
		`\nratio skillbus/minimal JetStream pipeline \(median of 2 paired rounds, 200 executions timed per run\): throughput \d+\.\d\d \(quartiles \d+\.\d\d–\d+\.\d\d, range \d+\.\d\d–\d+\.\d\d\)   latency \(10 samples a side, all rounds pooled\) p50 \d+\.\d\d  p99 \d+\.\d\d`,
		`\nsame, by CPU per execution .*: one-step \d+\.\d\d \(quartiles \d+\.\d\d–\d+\.\d\d, range \d+\.\d\d–\d+\.\d\d\)\n`,
		`\ncores the timed runs used \(throughput × CPU per execution\): \d+\.\d–\d+\.\d of \d+; .*\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", re, out.String())
		}
	}
}

// The median's 95% bounds are the order statistics benchstat uses: none under 6
// values, the extremes at 6, the 6th from each end at 20.
func TestMedianBound(t *testing.T) {
	for n, want := range map[int]int{2: 0, 5: 0, 6: 1, 8: 1, 9: 2, 20: 6, 40: 14} {
		if got := medianBound(n); got != want {
			t.Errorf("medianBound(%d) = %d, want %d", n, got, want)
		}
	}
}
