// Package bench measures skillbus against bare JetStream in the same run, because
// absolute figures on shared machines drift.
//
// The headline baseline is the minimal pipeline the system's shape needs, written
// with plain nats.go: a trigger stream, a "router" consumer that publishes a job, a
// "worker" consumer that publishes the result — three persisted publishes, two pull
// consumers, explicit acks after every pub-ack, the same concurrency, message sizes
// and storage as skillbus. Every persisted publish skillbus adds shows up as a lower
// ratio. A second baseline doing the same three writes the way skillbus does them
// (the job create-only on a subject of its own, kept as the activation's record; the
// outcome create-only) separates the cost of that discipline from the client's own
// overhead (CloudEvents, routing, the engine, JSON).
//
// Persisted publishes per execution are counted by the server: the sum of every
// stream's last sequence (KV buckets included) before and after the throughput phase.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Config configures a benchmark run.
type Config struct {
	// Executions in the throughput phase; default 20000.
	Executions int
	// Window is how many triggers may be unfinished at once in the throughput phase;
	// default 1000.
	Window int
	// Samples in the latency phase, one trigger at a time; default 500.
	Samples int
	// Concurrency of each router and worker; default 64.
	Concurrency int
	// Rounds of every configuration measured in turn, every other round in reverse
	// order; the report gives each round and the median ratios. Default 3.
	Rounds int
	// Pairs is how many paired rounds the headline ratio (the one-step skill over
	// the minimal pipeline) is the median of: the two measured back to back, which
	// goes first alternating; default 20 for RunRatio, and 10 for Run, whose other
	// figures take minutes already.
	Pairs int
	// PairExecutions is how many executions are timed in each run of a paired
	// round, after an untimed warm-up and before an untimed tail; default 5000.
	PairExecutions int
	// PairWarmup is how many untimed executions open each run of a paired round;
	// default 2000.
	PairWarmup int
	// SyncInterval of the embedded server; 0 keeps the default (2m).
	SyncInterval time.Duration
	// SyncAlways makes the server fsync every write (the durable mode).
	SyncAlways bool
	// Durable, when set, adds rounds with SyncAlways of this many executions (fsync
	// per write is slow, so fewer than Executions); 0 skips them.
	Durable int
	// Storage is file (default) or memory.
	Storage jetstream.StorageType
	// ServerProcess runs each system's nats-server in a process of its own, as in
	// a deployment, rather than inside this process, as `skillbus dev` does.
	// Embedded, every garbage collection this process's allocations start also
	// marks the server's heap (tens of MB of stream state), which charges each
	// allocation of the client side more than it costs a worker or router on its
	// own; in a process of its own, the server's CPU time is measured apart and
	// added to this process's.
	ServerProcess bool
	// Out receives the report.
	Out io.Writer
	// Log receives skillbus's own logs; default discards them.
	Log *slog.Logger
}

func (c *Config) defaults() {
	if c.Executions == 0 {
		c.Executions = 20000
	}
	if c.Window == 0 {
		c.Window = 1000
	}
	if c.Samples == 0 {
		c.Samples = 500
	}
	if c.Concurrency == 0 {
		c.Concurrency = 64
	}
	if c.Rounds == 0 {
		c.Rounds = 3
	}
	if c.PairExecutions == 0 {
		c.PairExecutions = 5000
	}
	if c.PairWarmup == 0 {
		c.PairWarmup = pairWarmup
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Result is one system's figures.
type Result struct {
	Name        string
	PerSecond   float64
	P50, P99    time.Duration // unloaded trigger-to-result latency
	LoadedP50   time.Duration // latency inside the throughput phase
	AvgMsgBytes int           // average persisted message (headers + data)
	Persisted   float64       // persisted publishes per execution, counted by the server
	// CPU is the process's CPU time (user and system, server included) per
	// execution over the throughput phase: throughput is the cores the run got
	// divided by it, and unlike throughput it hardly depends on how many cores
	// other work on the machine left the run.
	CPU time.Duration
	// ServerCPU is the part of CPU spent by the server, when it runs in a process of
	// its own (Config.ServerProcess); zero otherwise.
	ServerCPU time.Duration
	// latency is the unloaded samples P50 and P99 are read from.
	latency []time.Duration
}

// system is one side of the comparison.
type system interface {
	// trigger publishes trigger number i; the result must arrive on results.
	trigger(ctx context.Context, i int) error
	// stop shuts the system down.
	stop()
	// msgBytes is the average size of the messages persisted so far.
	msgBytes(ctx context.Context) int
	// jetstream is the system's connection, for counting what the server persisted.
	jetstream() jetstream.JetStream
	// server is the system's server.
	server() *benchServer
}

// persisted is the number of messages the server has ever stored in any stream
// (KV buckets and object stores are streams too): the sum of their last sequences.
func persisted(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		n += info.State.LastSeq
	}
	return n, l.Err()
}

// runPlan is what one run of a system is made of, in the order its triggers go out:
// warmup untimed executions, timed ones, a tail of untimed ones, then samples one
// at a time for the latency.
type runPlan struct {
	// warmup executions run before the timed ones, and tail after them, with the
	// window kept full throughout, so the timed ones measure the steady state:
	// neither the window filling from empty nor draining at the end, nor a new
	// server's first blocks and a small heap's frequent collections. With no
	// warm-up, timing starts at the first trigger; with no tail, it ends with the
	// last result.
	warmup, timed, tail int
	// samples are taken one trigger at a time after the throughput phase.
	samples int
}

// planOf is a run of cfg.Executions timed from the first trigger to the last result.
func planOf(cfg Config) runPlan { return runPlan{timed: cfg.Executions, samples: cfg.Samples} }

func (p runPlan) loaded() int { return p.warmup + p.timed + p.tail }

// at says what the n-th result of the throughput phase (from 1, in the order they
// arrive) does: start the clock (with no warm-up, the first trigger does), stop it,
// or end the phase.
func (p runPlan) at(n int) (start, stop, done bool) {
	return p.warmup > 0 && n == p.warmup, n == p.warmup+p.timed, n == p.loaded()
}

func (p runPlan) total() int { return p.loaded() + p.samples }

// mark is where a run's clock and CPU time stood at a point of its throughput phase.
type mark struct {
	at       time.Time
	cpu, srv time.Duration
}

func markNow(sys system) mark {
	cpu, srv := sys.server().sample()
	return mark{time.Now(), cpu, srv}
}

// measure drives a system through p: a throughput phase with a bounded window, then a
// latency phase one trigger at a time. The system sends each finished trigger's
// number on results.
func measure(ctx context.Context, cfg Config, name string, sys system, results <-chan int, p runPlan) (Result, error) {
	r := Result{Name: name}
	// sent is written before each trigger is published and read when its result
	// arrives; the publish and the result's delivery order the two.
	sent := make([]time.Time, p.total())
	var lat []time.Duration
	var mu sync.Mutex
	var finished atomic.Int64
	window := make(chan struct{}, cfg.Window)
	// The clock starts when the warm-up's last result arrives and stops with the
	// timed executions' last: counted in the order results arrive, not by number.
	started, stopped := make(chan mark, 1), make(chan mark, 1)
	loadDone := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		for i := range results {
			mu.Lock()
			lat = append(lat, time.Since(sent[i]))
			mu.Unlock()
			if i >= p.loaded() {
				sampleDone <- struct{}{}
				continue
			}
			<-window
			start, stop, done := p.at(int(finished.Add(1)))
			if start {
				started <- markNow(sys)
			}
			if stop {
				stopped <- markNow(sys)
			}
			if done {
				close(loadDone)
			}
		}
	}()
	before, err := persisted(ctx, sys.jetstream())
	if err != nil {
		return r, err
	}
	if p.warmup == 0 {
		started <- markNow(sys)
	}
	for i := range p.loaded() {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return r, ctx.Err()
		}
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := sys.trigger(ctx, i); err != nil {
			return r, err
		}
	}
	select {
	case <-loadDone:
	case <-ctx.Done():
		return r, fmt.Errorf("%s: %d of %d executions finished: %w", name, finished.Load(), p.loaded(), ctx.Err())
	}
	start, stop := <-started, <-stopped
	r.PerSecond = float64(p.timed) / stop.at.Sub(start.at).Seconds()
	if err := sys.server().Err(); err != nil {
		return r, err
	}
	r.CPU = (stop.cpu - start.cpu) / time.Duration(p.timed)
	r.ServerCPU = (stop.srv - start.srv) / time.Duration(p.timed)
	after, err := persisted(ctx, sys.jetstream())
	if err != nil {
		return r, err
	}
	r.Persisted = float64(after-before) / float64(p.loaded())
	mu.Lock()
	loaded := slices.Clone(lat)
	lat = lat[:0]
	mu.Unlock()
	r.LoadedP50 = percentile(loaded, 0.5)

	for i := p.loaded(); i < p.total(); i++ {
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := sys.trigger(ctx, i); err != nil {
			return r, err
		}
		select {
		case <-sampleDone:
		case <-ctx.Done():
			return r, fmt.Errorf("%s: latency sample %d: %w", name, i-p.loaded(), ctx.Err())
		}
	}
	mu.Lock()
	r.latency = slices.Clone(lat)
	mu.Unlock()
	r.P50, r.P99 = percentile(r.latency, 0.5), percentile(r.latency, 0.99)
	r.AvgMsgBytes = sys.msgBytes(ctx)
	return r, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// server starts a fresh server for one system: embedded in this process, or with
// cfg.ServerProcess in a process of its own.
func server(ctx context.Context, cfg Config) (*benchServer, *nats.Conn, func(), error) {
	dir, err := os.MkdirTemp("", "skillbus-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	var srv *benchServer
	if !cfg.ServerProcess {
		e, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: dir, SyncInterval: cfg.SyncInterval, SyncAlways: cfg.SyncAlways})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, nil, err
		}
		srv = &benchServer{url: e.URL(), stop: e.Shutdown}
	} else {
		srv, err = startServerProcess(ctx, serverSpec{StoreDir: dir, SyncInterval: cfg.SyncInterval, SyncAlways: cfg.SyncAlways})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, nil, err
		}
	}
	nc, err := bus.Connect(srv.URL(), "bench")
	if err != nil {
		srv.stop()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return srv, nc, func() { nc.Close(); srv.stop(); os.RemoveAll(dir) }, nil
}

// closing returns cleanup preceded by closing every connection in *conns.
func closing(cleanup func(), conns *[]*nats.Conn) func() {
	return func() {
		for _, c := range *conns {
			c.Close()
		}
		cleanup()
	}
}

// Run measures skillbus and the baselines in alternating rounds, each on a fresh
// server, and prints the report. Alternating keeps a slow stretch of a shared machine
// from landing on one side only; the median ratio is the figure to quote.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if cfg.Pairs == 0 {
		cfg.Pairs = 10
	}
	fmt.Fprintf(cfg.Out, "skillbus bench: %d rounds of %d executions (window %d) and %d latency samples, concurrency %d, GOMAXPROCS %d\n",
		cfg.Rounds, cfg.Executions, cfg.Window, cfg.Samples, cfg.Concurrency, runtime.GOMAXPROCS(0))
	// The three-step skill's HTTP step calls this server, in this process.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n":%q,"items":[1,2,3]}`, r.URL.Query().Get("n"))
	}))
	defer web.Close()
	three := workflowSkill(web.URL)

	type figure struct {
		name string
		run  func() (Result, error)
	}
	var msgBytes int
	sb := func(name string, sk *skill.Skill, level events.Level) figure {
		return figure{name, func() (Result, error) {
			return untraced(ctx, cfg, func() (Result, error) { return runSkillbus(ctx, cfg, name, sk, level, planOf(cfg)) })
		}}
	}
	base := func(shape Shape) figure {
		return figure{shape.String(), func() (Result, error) { return runBaseline(ctx, cfg, shape, msgBytes, planOf(cfg)) }}
	}
	figures := []figure{
		sb("skillbus", noopSkill, events.DefaultLevel),
		base(Minimal),
		base(SameWrites),
		sb("skillbus 3-step", three, events.DefaultLevel),
		sb("skillbus full", noopSkill, events.LevelFull),
		sb("skillbus terminal", noopSkill, events.LevelTerminal),
		sb("skillbus keyed", keyedSkill, events.DefaultLevel),
		sb("skillbus priority", prioSkill, events.DefaultLevel),
	}
	// A process's first run costs more CPU per execution than the ones after it
	// (caches, the heap growing): an untimed skillbus run takes it, and learns the
	// message size the baselines are padded to. Every other round then runs the
	// figures in reverse order, so that none always follows the same one.
	warm := cfg
	warm.Executions, warm.Samples = max(cfg.Executions/4, 1), 1
	wr, err := untraced(ctx, warm, func() (Result, error) {
		return runSkillbus(ctx, warm, "warm-up", noopSkill, events.DefaultLevel, planOf(warm))
	})
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	msgBytes = wr.AvgMsgBytes
	fmt.Fprintf(cfg.Out, "%d paired rounds of the headline ratio (%d executions timed per run, after %d untimed):\n", cfg.Pairs, cfg.PairExecutions, cfg.PairWarmup)
	pairs, _, err := runPairs(ctx, cfg, msgBytes)
	if err != nil {
		return err
	}
	rounds := make([]map[string]Result, 0, cfg.Rounds)
	for round := 1; round <= cfg.Rounds; round++ {
		got := map[string]Result{}
		order := slices.Clone(figures)
		how := "in order"
		if round%2 == 0 {
			slices.Reverse(order)
			how = "in reverse order"
		}
		fmt.Fprintf(cfg.Out, "round %d (%s):\n", round, how)
		for _, f := range order {
			r, err := f.run()
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			got[f.name] = r
			line(cfg.Out, r)
		}
		rounds = append(rounds, got)
	}
	med := func(num, den string, f func(a, b Result) float64) float64 {
		var xs []float64
		for _, r := range rounds {
			xs = append(xs, f(r[num], r[den]))
		}
		return median(xs)
	}
	thr := func(a, b Result) float64 { return a.PerSecond / b.PerSecond }
	p50 := func(a, b Result) float64 { return ratio(b.P50, a.P50) }
	last := rounds[len(rounds)-1]
	settings(cfg, msgBytes, false)
	w := cfg.Out
	fmt.Fprintf(w, "persisted publishes per execution (counted by the server): minimal %.1f, skillbus one-step %.1f, three-step %.1f; events level full %.1f, terminal %.1f\n",
		last["bare JetStream"].Persisted, last["skillbus"].Persisted, last["skillbus 3-step"].Persisted, last["skillbus full"].Persisted, last["skillbus terminal"].Persisted)
	cpu := func(a, b Result) float64 { return ratio(b.CPU, a.CPU) }
	headline(w, cfg, summarize(pairs), fmt.Sprintf("   3-step/one-step %.2f", med("skillbus 3-step", "skillbus", cpu)))
	fmt.Fprintf(w, "ratio skillbus/bare JetStream doing skillbus's writes (create-only job kept, create-only outcome; client overhead): throughput %.2f   latency p50 %.2f\n",
		med("skillbus", SameWrites.String(), thr), med("skillbus", SameWrites.String(), p50))
	fmt.Fprintf(w, "ratio by events level, one-step skill / minimal pipeline: full %.2f   steps (default) %.2f   terminal %.2f\n",
		med("skillbus full", "bare JetStream", thr), med("skillbus", "bare JetStream", thr), med("skillbus terminal", "bare JetStream", thr))
	fmt.Fprintf(w, "ratio 3-step workflow/one-step skill (tool → compute → tool, local HTTP tool; median of %d rounds): throughput %.2f   latency p50 %.2f\n",
		cfg.Rounds, med("skillbus 3-step", "skillbus", thr), med("skillbus 3-step", "skillbus", func(a, b Result) float64 { return ratio(b.P50, a.P50) }))
	fmt.Fprintf(w, "ratio keyed concurrency (at most 2 at once per key, 256 keys)/one-step skill (median of %d rounds): throughput %.2f   latency p50 %.2f\n",
		cfg.Rounds, med("skillbus keyed", "skillbus", thr), med("skillbus keyed", "skillbus", p50))
	fmt.Fprintf(w, "ratio queue priority (a quarter of runs 300 s ahead, on a lane)/one-step skill (median of %d rounds): throughput %.2f   latency p50 %.2f\n",
		cfg.Rounds, med("skillbus priority", "skillbus", thr), med("skillbus priority", "skillbus", p50))
	if err := runTracing(ctx, cfg); err != nil {
		return err
	}
	PrintRoute(cfg.Out, RunRoute(10000, 5000, 100))
	PrintFilter(cfg.Out, RunFilter(20000, 9))
	if cfg.Durable > 0 {
		return runDurable(ctx, cfg)
	}
	return nil
}

// runDurable measures skillbus against the minimal pipeline with every write fsynced.
func runDurable(ctx context.Context, cfg Config) error {
	d := cfg
	d.SyncAlways, d.Executions, d.Samples = true, cfg.Durable, min(cfg.Samples, 100)
	d.Window = min(cfg.Window, cfg.Durable)
	var thr []float64
	var sbMsg int
	for round := 1; round <= cfg.Rounds; round++ {
		sb, err := untraced(ctx, d, func() (Result, error) {
			return runSkillbus(ctx, d, "skillbus durable", noopSkill, events.DefaultLevel, planOf(d))
		})
		if err != nil {
			return fmt.Errorf("skillbus durable: %w", err)
		}
		sbMsg = sb.AvgMsgBytes
		base, err := runBaseline(ctx, d, Minimal, sb.AvgMsgBytes, planOf(d))
		if err != nil {
			return fmt.Errorf("baseline durable: %w", err)
		}
		fmt.Fprintf(cfg.Out, "durable round %d:\n", round)
		line(cfg.Out, base)
		line(cfg.Out, sb)
		thr = append(thr, sb.PerSecond/base.PerSecond)
	}
	settings(d, sbMsg, true)
	fmt.Fprintf(cfg.Out, "ratio skillbus/minimal JetStream pipeline, sync_interval=always (median of %d rounds of %d): throughput %.2f\n", cfg.Rounds, d.Executions, median(thr))
	return nil
}

func line(w io.Writer, r Result) {
	server := ""
	if r.ServerCPU > 0 {
		server = fmt.Sprintf(" (server %.0f)", float64(r.ServerCPU.Nanoseconds())/1e3)
	}
	fmt.Fprintf(w, "  %-18s %7.0f exec/s   latency p50 %8s  p99 %8s   (p50 under load %s)   %.2f persisted/exec   %5.0f cpu-µs/exec%s\n",
		r.Name, r.PerSecond, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.LoadedP50.Round(time.Millisecond), r.Persisted,
		float64(r.CPU.Nanoseconds())/1e3, server)
}

func settings(cfg Config, msgBytes int, durable bool) {
	storage := "file"
	if cfg.Storage == jetstream.MemoryStorage {
		storage = "memory"
	}
	sync := "default (2m)"
	switch {
	case durable || cfg.SyncAlways:
		sync = "always"
	case cfg.SyncInterval > 0:
		sync = cfg.SyncInterval.String()
	}
	where := "embedded in the bench's process"
	if cfg.ServerProcess {
		where = "its own process"
	}
	fmt.Fprintf(cfg.Out, "settings: server=%s storage=%s replicas=1 sync_interval=%s msg_size≈%dB (baselines padded to match) ack=explicit, after every pub-ack of the hop's publishes (async publish); events level %s unless named\n",
		where, storage, sync, msgBytes, events.DefaultLevel)
}

func median(xs []float64) float64 { return quantile(slices.Sorted(slices.Values(xs)), 0.5) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
