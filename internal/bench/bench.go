// Package bench measures skillbus against bare JetStream doing the same persisted hops
// in the same run, because absolute figures on shared machines drift (DESIGN §10).
//
// A trigger's path through skillbus persists eight messages: the trigger; the router's
// route.decided and job; the worker's execution.started, step.started, step.completed
// (which is also the step's checkpoint), the terminal record in KV runs, and
// execution.completed. The baseline does exactly those eight persisted publishes with
// plain nats.go — a "router" consumer that publishes two messages and acks, a "worker"
// consumer that publishes four, creates a KV key and acks — with the same concurrency,
// message sizes, pipelining (async publish, wait for every ack, then ack the input) and
// storage. The ratio skillbus/baseline is
// the cost of everything skillbus adds: CloudEvents, routing, the workflow engine,
// templates, JSON.
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

	"github.com/skillbus/skillbus/pkg/bus"
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
	// Rounds of (skillbus, baseline) measured alternately; the report gives each
	// round and the median ratio. Default 3.
	Rounds int
	// SyncInterval of the embedded server; 0 keeps the default (2m).
	SyncInterval time.Duration
	// Storage is file (default) or memory.
	Storage jetstream.StorageType
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
}

// system is one side of the comparison.
type system interface {
	// trigger publishes trigger number i; the result must arrive on results.
	trigger(ctx context.Context, i int) error
	// stop shuts the system down.
	stop()
	// msgBytes is the average size of the messages persisted so far.
	msgBytes(ctx context.Context) int
}

// measure drives a system: a throughput phase with a bounded window, then a latency
// phase one trigger at a time. done is called by the system with each finished trigger.
func measure(ctx context.Context, cfg Config, name string, sys system, results <-chan int) (Result, error) {
	r := Result{Name: name}
	// sent is written before each trigger is published and read when its result
	// arrives; the publish and the result's delivery order the two.
	sent := make([]time.Time, cfg.Executions+cfg.Samples)
	var lat []time.Duration
	var mu sync.Mutex
	var finished atomic.Int64
	window := make(chan struct{}, cfg.Window)
	throughputDone := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		for i := range results {
			mu.Lock()
			lat = append(lat, time.Since(sent[i]))
			mu.Unlock()
			if i < cfg.Executions {
				<-window
				if finished.Add(1) == int64(cfg.Executions) {
					close(throughputDone)
				}
			} else {
				sampleDone <- struct{}{}
			}
		}
	}()
	start := time.Now()
	for i := range cfg.Executions {
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
	case <-throughputDone:
	case <-ctx.Done():
		return r, fmt.Errorf("%s: %d of %d executions finished: %w", name, finished.Load(), cfg.Executions, ctx.Err())
	}
	elapsed := time.Since(start)
	r.PerSecond = float64(cfg.Executions) / elapsed.Seconds()
	mu.Lock()
	loaded := slices.Clone(lat)
	lat = lat[:0]
	mu.Unlock()
	r.LoadedP50 = percentile(loaded, 0.5)

	for i := cfg.Executions; i < cfg.Executions+cfg.Samples; i++ {
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := sys.trigger(ctx, i); err != nil {
			return r, err
		}
		select {
		case <-sampleDone:
		case <-ctx.Done():
			return r, fmt.Errorf("%s: latency sample %d: %w", name, i-cfg.Executions, ctx.Err())
		}
	}
	mu.Lock()
	r.P50, r.P99 = percentile(lat, 0.5), percentile(lat, 0.99)
	mu.Unlock()
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

// server starts a fresh embedded server for one system.
func server(cfg Config) (*bus.Embedded, *nats.Conn, func(), error) {
	dir, err := os.MkdirTemp("", "skillbus-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: dir, SyncInterval: cfg.SyncInterval})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	nc, err := bus.Connect(srv.URL(), "bench")
	if err != nil {
		srv.Shutdown()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return srv, nc, func() { nc.Close(); srv.Shutdown(); os.RemoveAll(dir) }, nil
}

// Run measures skillbus and the baseline in alternating rounds, each on a fresh server,
// and prints the report. Alternating keeps a slow stretch of a shared machine from
// landing on one side only; the median ratio is the figure to quote.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	fmt.Fprintf(cfg.Out, "skillbus bench: %d rounds of %d executions (window %d) and %d latency samples, concurrency %d, GOMAXPROCS %d\n",
		cfg.Rounds, cfg.Executions, cfg.Window, cfg.Samples, cfg.Concurrency, runtime.GOMAXPROCS(0))
	// The three-step skill's HTTP step calls this server, in this process.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n":%q,"items":[1,2,3]}`, r.URL.Query().Get("n"))
	}))
	defer web.Close()
	three := workflowSkill(web.URL)

	var thr, p50, p99, wf, wf50 []float64
	var last [3]Result
	for round := 1; round <= cfg.Rounds; round++ {
		sb, err := runSkillbus(ctx, cfg, "skillbus", noopSkill)
		if err != nil {
			return fmt.Errorf("skillbus: %w", err)
		}
		base, err := runBaseline(ctx, cfg, sb.AvgMsgBytes)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		sb3, err := runSkillbus(ctx, cfg, "skillbus 3-step", three)
		if err != nil {
			return fmt.Errorf("skillbus 3-step: %w", err)
		}
		fmt.Fprintf(cfg.Out, "round %d:\n", round)
		line(cfg.Out, base)
		line(cfg.Out, sb)
		line(cfg.Out, sb3)
		thr = append(thr, sb.PerSecond/base.PerSecond)
		p50 = append(p50, ratio(base.P50, sb.P50))
		p99 = append(p99, ratio(base.P99, sb.P99))
		wf = append(wf, sb3.PerSecond/sb.PerSecond)
		wf50 = append(wf50, ratio(sb.P50, sb3.P50))
		last = [3]Result{base, sb, sb3}
	}
	report(cfg, last[1].AvgMsgBytes, median(thr), median(p50), median(p99))
	fmt.Fprintf(cfg.Out, "ratio 3-step workflow/one-step skill (tool → compute → tool, local HTTP tool; median of %d rounds): throughput %.2f   latency p50 %.2f\n",
		cfg.Rounds, median(wf), median(wf50))
	PrintRoute(cfg.Out, RunRoute(10000, 5000, 100))
	return nil
}

func line(w io.Writer, r Result) {
	fmt.Fprintf(w, "  %-16s %7.0f exec/s   latency p50 %8s  p99 %8s   (p50 under load %s)\n",
		r.Name, r.PerSecond, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.LoadedP50.Round(time.Millisecond))
}

func report(cfg Config, msgBytes int, thr, p50, p99 float64) {
	storage := "file"
	if cfg.Storage == jetstream.MemoryStorage {
		storage = "memory"
	}
	sync := "default (2m)"
	if cfg.SyncInterval > 0 {
		sync = cfg.SyncInterval.String()
	}
	w := cfg.Out
	fmt.Fprintf(w, "settings: storage=%s replicas=1 sync_interval=%s persisted_hops=8 msg_size≈%dB (baseline padded to match) ack=explicit, after every pub-ack of the hop's publishes (async publish)\n",
		storage, sync, msgBytes)
	fmt.Fprintf(w, "ratio skillbus/bare JetStream (median of %d rounds): throughput %.2f   latency p50 %.2f  p99 %.2f   (1.00 = no overhead)\n",
		cfg.Rounds, thr, p50, p99)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
