package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/skillbus/skillbus/events"
)

// The headline ratio, the one-step skill's throughput over the minimal pipeline's,
// is measured in paired rounds: the two back to back on fresh servers, a ratio per
// round, and the median of those ratios. On a shared virtual machine the CPU an
// execution costs moves by tens of percent within minutes, the same configuration
// alike, so two throughputs measured tens of seconds apart mostly measure that
// drift; measured next to each other, a round's two runs see nearly the same
// machine, and the rounds' ratios are far closer to each other than the rounds'
// throughputs.

// pairWarmup is how many executions open each run of a paired round untimed, by
// default (Config.PairWarmup). The first few thousand of a run on a fresh server
// cost more than those after them: the window fills from empty, the streams' first
// blocks are created, and the heap, small after the collection before the run, is
// collected several times as often (4 to 11 cycles over the first 5,000
// executions, 1 to 6 over each 5,000 after).
const pairWarmup = 2000

// pairSamples is the most latency samples a run of a paired round takes; the
// latency ratio is read from every round's samples together.
const pairSamples = 50

// pairPlan is one run of a paired round: warm-up, cfg.PairExecutions timed, then
// a window's worth more so that the window stays full to the last timed result.
func pairPlan(cfg Config) runPlan {
	return runPlan{warmup: cfg.PairWarmup, timed: cfg.PairExecutions, tail: cfg.Window, samples: min(cfg.Samples, pairSamples)}
}

// pairRound is one paired round's two runs.
type pairRound struct {
	skillbus, minimal Result
	skillbusFirst     bool
}

// throughput is the round's throughput ratio, skillbus's over the minimal pipeline's.
func (p pairRound) throughput() float64 { return p.skillbus.PerSecond / p.minimal.PerSecond }

// cpu is the round's ratio by CPU per execution, the minimal pipeline's over
// skillbus's (so that, like throughput, 1.00 is no overhead).
func (p pairRound) cpu() float64 { return ratio(p.minimal.CPU, p.skillbus.CPU) }

// skillbusFirst says whether paired round i (from 0) measures skillbus first. It
// alternates, so the runs go A B B A A B B A: each side goes first as often as
// second, and a drift of the machine that is steady over two rounds adds to one
// round's ratio what it takes from the next one's.
func skillbusFirst(i int) bool { return i%2 == 0 }

// runPairs measures an untimed paired round, then cfg.Pairs timed ones, printing
// each. msgBytes is the size the minimal pipeline's messages are padded to; 0 takes
// skillbus's average from the untimed round. It returns the rounds and msgBytes.
func runPairs(ctx context.Context, cfg Config, msgBytes int) ([]pairRound, int, error) {
	p := pairPlan(cfg)
	run := func(sb bool, name string) (Result, error) {
		// A collection first, so every run starts from the same small heap: else a
		// run starts with the heap goal the run before it left (twice that run's
		// heap, stream state included) and collects 3 to 7 times in its first
		// 10,000 executions instead of 8 to 15, which favours whichever side goes
		// second.
		runtime.GC()
		if sb {
			return untraced(ctx, cfg, func() (Result, error) {
				return runSkillbus(ctx, cfg, name, noopSkill, events.DefaultLevel, p)
			})
		}
		return runBaseline(ctx, cfg, Minimal, msgBytes, p)
	}
	// The process's first runs cost more than the later ones (code and caches to
	// warm, a heap to grow): an untimed round takes that, skillbus first to learn
	// the message size.
	warm, err := run(true, "warm-up")
	if err != nil {
		return nil, 0, fmt.Errorf("warm-up: %w", err)
	}
	if msgBytes == 0 {
		msgBytes = warm.AvgMsgBytes
	}
	if _, err := run(false, "warm-up"); err != nil {
		return nil, 0, fmt.Errorf("warm-up: %w", err)
	}
	rounds := make([]pairRound, 0, cfg.Pairs)
	for i := range cfg.Pairs {
		pr := pairRound{skillbusFirst: skillbusFirst(i)}
		for _, sb := range []bool{pr.skillbusFirst, !pr.skillbusFirst} {
			r, err := run(sb, "skillbus")
			if err != nil {
				return nil, 0, fmt.Errorf("paired round %d: %w", i+1, err)
			}
			if sb {
				pr.skillbus = r
			} else {
				pr.minimal = r
			}
		}
		pairLine(cfg.Out, i+1, pr)
		rounds = append(rounds, pr)
	}
	return rounds, msgBytes, nil
}

func pairLine(w io.Writer, i int, p pairRound) {
	first := "bare JetStream first"
	if p.skillbusFirst {
		first = "skillbus first"
	}
	fmt.Fprintf(w, "  pair %2d (%-20s)  skillbus %6.0f exec/s %4.0f cpu-µs/exec%s   bare JetStream %6.0f exec/s %4.0f cpu-µs/exec%s   ratio %.2f, by CPU %.2f\n",
		i, first, p.skillbus.PerSecond, micros(p.skillbus.CPU), serverPart(p.skillbus), p.minimal.PerSecond, micros(p.minimal.CPU), serverPart(p.minimal),
		p.throughput(), p.cpu())
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// serverPart is the server's share of r's CPU per execution, when it was measured apart.
func serverPart(r Result) string {
	if r.ServerCPU <= 0 {
		return ""
	}
	return fmt.Sprintf(" (server %.0f)", micros(r.ServerCPU))
}

// pairSummary is what the paired rounds say: the spread of their ratios, and the
// latency ratios read from all their samples together.
type pairSummary struct {
	throughput, cpu spread
	p50, p99        float64    // of every round's latency samples, pooled
	samples         int        // latency samples a side
	persisted       [2]float64 // the minimal pipeline's and skillbus's, per execution
	// cores is the least and the most cores a run used while timed: its
	// throughput times its CPU per execution. Below GOMAXPROCS, other work had the
	// rest, and where a round's two runs got different shares its throughput
	// ratio moves with them, while its ratio by CPU hardly does.
	cores [2]float64
}

// cores is how many cores r used while timed.
func cores(r Result) float64 { return r.PerSecond * r.CPU.Seconds() }

func summarize(rounds []pairRound) pairSummary {
	var thr, cpu []float64
	var sbLat, minLat []time.Duration
	var s pairSummary
	for _, r := range rounds {
		thr = append(thr, r.throughput())
		cpu = append(cpu, r.cpu())
		sbLat = append(sbLat, r.skillbus.latency...)
		minLat = append(minLat, r.minimal.latency...)
		s.persisted[0] += r.minimal.Persisted / float64(len(rounds))
		s.persisted[1] += r.skillbus.Persisted / float64(len(rounds))
	}
	s.throughput, s.cpu = spreadOf(thr), spreadOf(cpu)
	s.cores = [2]float64{math.Inf(1), 0}
	for _, r := range rounds {
		for _, c := range []float64{cores(r.skillbus), cores(r.minimal)} {
			s.cores[0], s.cores[1] = min(s.cores[0], c), max(s.cores[1], c)
		}
	}
	s.samples = min(len(sbLat), len(minLat))
	s.p50 = ratio(percentile(minLat, 0.5), percentile(sbLat, 0.5))
	s.p99 = ratio(percentile(minLat, 0.99), percentile(sbLat, 0.99))
	return s
}

// headline prints the headline ratio from paired rounds, then the same by CPU per
// execution followed by more, if any.
func headline(w io.Writer, cfg Config, s pairSummary, more string) {
	fmt.Fprintf(w, "ratio skillbus/minimal JetStream pipeline (median of %d paired rounds, %d executions timed per run): throughput %s   latency (%d samples a side, all rounds pooled) p50 %.2f  p99 %.2f   (1.00 = no overhead)\n",
		cfg.Pairs, cfg.PairExecutions, s.throughput, s.samples, s.p50, s.p99)
	fmt.Fprintf(w, "same, by CPU per execution (the minimal pipeline's over skillbus's, whole process; hardly moved by other load): one-step %s%s\n",
		s.cpu, more)
	fmt.Fprintf(w, "cores the timed runs used (throughput × CPU per execution): %.1f–%.1f of %d; where a round's two runs got different shares of a busy machine, its throughput ratio moves with them, its ratio by CPU hardly\n",
		s.cores[0], s.cores[1], runtime.GOMAXPROCS(0))
}

// spread is where a sample's values lie, and how far its median can be trusted.
type spread struct {
	median, q1, q3, min, max float64
	// lo and hi bound the median with 95% confidence; both 0 when there are too
	// few values (under 6) for that.
	lo, hi float64
}

func spreadOf(xs []float64) spread {
	s := slices.Sorted(slices.Values(xs))
	sp := spread{median: quantile(s, 0.5), q1: quantile(s, 0.25), q3: quantile(s, 0.75), min: s[0], max: s[len(s)-1]}
	if k := medianBound(len(s)); k > 0 {
		sp.lo, sp.hi = s[k-1], s[len(s)-k]
	}
	return sp
}

// medianBound is the largest k (from 1) for which the k-th smallest and the k-th
// largest of n values bound their median with at least 95% confidence, as
// benchstat's interval does: with no assumption about the values' distribution,
// each falls below the median with probability ½, so the median lies between them
// unless fewer than k, or more than n-k, fall below it. 0 when n is too small.
func medianBound(n int) int {
	// below[i] is the probability that exactly i of n values fall below the median.
	below := make([]float64, n+1)
	p := math.Pow(0.5, float64(n))
	for i := range below {
		below[i] = p
		p = p * float64(n-i) / float64(i+1)
	}
	k, tail := 0, 0.0
	for i := 0; i < n/2; i++ {
		tail += below[i] // fewer than i+1 below: outside [x(i+1), x(n-i)]
		if 2*tail > 0.05 {
			break
		}
		k = i + 1
	}
	return k
}

func (s spread) String() string {
	ci := ""
	if s.lo != 0 || s.hi != 0 {
		ci = fmt.Sprintf("95%% CI %.2f–%.2f, ", s.lo, s.hi)
	}
	return fmt.Sprintf("%.2f (%squartiles %.2f–%.2f, range %.2f–%.2f)", s.median, ci, s.q1, s.q3, s.min, s.max)
}

// quantile is the q-quantile of sorted s, interpolated between the closest ranks
// (as R's and NumPy's default).
func quantile(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// RunRatio measures only the headline ratio (what `skillbus bench --only ratio`
// prints): cfg.Pairs paired rounds of the one-step skill and the minimal pipeline.
func RunRatio(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if cfg.Pairs == 0 {
		cfg.Pairs = 20
	}
	p := pairPlan(cfg)
	fmt.Fprintf(cfg.Out, "skillbus bench: the headline ratio, %d paired rounds of %d executions (each run on a fresh server, timed after %d untimed and with %d more behind; window %d) and %d latency samples per run, concurrency %d, GOMAXPROCS %d\n",
		cfg.Pairs, p.timed, p.warmup, p.tail, cfg.Window, p.samples, cfg.Concurrency, runtime.GOMAXPROCS(0))
	rounds, msgBytes, err := runPairs(ctx, cfg, 0)
	if err != nil {
		return err
	}
	s := summarize(rounds)
	settings(cfg, msgBytes, false)
	fmt.Fprintf(cfg.Out, "persisted publishes per execution (counted by the server): minimal %.1f, skillbus one-step %.1f\n", s.persisted[0], s.persisted[1])
	headline(cfg.Out, cfg, s, "")
	return nil
}
