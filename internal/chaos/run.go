package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/run"
)

// MaxPayload is the chaos server's max_payload: chaos-big's result is larger.
const MaxPayload = 512 << 10

// fallbackType is the event type both chaos-primary and chaos-secondary handle.
const fallbackType = "com.skillbus.chaos.fallback"

// declared is the max_concurrent of the skills that have one.
var declared = map[string]int{"chaos-limited": 2}

// Faults counts what a run injected.
type Faults struct {
	WorkerKills, RouterKills, RegistryKills int
	ServerKills, ServerTerms                int
	DuplicateBursts, DuplicatePublishes     int
	PublishRetries                          int
	// Exits counts processes that exited without being signalled (and were started
	// again): a process started while the server was down gives up connecting.
	Exits int
}

type runner struct {
	cfg  Config
	rng  *rand.Rand
	dir  string
	url  string
	port int

	server   *proc
	registry *proc
	router   *proc
	workers  []*proc

	nc *nats.Conn
	b  *bus.Bus

	source   string
	triggers []Trigger // every trigger published, by N
	msgs     []*nats.Msg
	// main are the triggers of the skills counted one execution each; keyed and
	// debounced chaos-keyed's and chaos-debounced's (see flowmix.go). waited are
	// those with an outcome each: main and keyed. The last finals triggers,
	// chaos-debounced's last of each key, are published once all others are
	// confirmed, so that they are stored last.
	main, keyed, debounced, waited []Trigger
	finals                         int
	// cancelAt are the chaos-keyed triggers whose runs are cancelled, each this
	// long after its trigger is confirmed; cancels what each cancel answered.
	cancelAt map[int]time.Duration
	cancels  map[string]string
	fleetUp  time.Time

	// The disk-full phase: the store's tmpfs (mounted), nats-server's /healthz and
	// the router's /readyz.
	mounted         bool
	healthz, readyz string
	disk            DiskFull
	diskDone        bool

	mu       sync.Mutex
	faults   Faults
	names    map[int]string // pid → incarnation
	kills    Kills
	outages  [][2]time.Time
	acked    []bool
	sent     []time.Time // each trigger's first publish
	nacked   int
	pubDone  bool
	stopping bool
}

// Run builds the binaries, runs the fleet through the fault mix, and returns what it
// found. The error is for a run that could not be carried out; a run that found
// lost, duplicated or repeated work returns a Report whose OK is false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := &runner{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		names: map[int]string{}, kills: Kills{}}
	r.dir = cfg.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "skillbus-chaos-")
		if err != nil {
			return nil, err
		}
		r.dir = d
	}
	// The sink is written by the skills' exec steps, which run as nobody when the
	// worker runs as root.
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{"bin", "nats", "logs", "sink", "home"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(filepath.Join(r.dir, "sink"), 0o777); err != nil {
		return nil, err
	}
	r.disk.Size = cfg.StoreSize
	if cfg.NoDiskFull {
		r.disk.Skipped = "left out (-disk-full=false)"
	} else if r.disk.Skipped = mountStore(filepath.Join(r.dir, "nats"), cfg.StoreSize); r.disk.Skipped == "" {
		r.mounted = true
		defer r.unmount() // after the fleet has stopped
	} else {
		cfg.Log.Warn("chaos: THE DISK-FULL PHASE IS SKIPPED", "why", r.disk.Skipped)
	}
	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return nil, err
	}
	r.cfg.Repo = repo
	log := cfg.Log
	log.Info("chaos: building the binaries", "dir", r.dir)
	if err := r.build(ctx); err != nil {
		return nil, err
	}
	if err := r.startFleet(ctx); err != nil {
		r.stopFleet()
		return nil, err
	}
	defer r.stopFleet()

	r.fleetUp = time.Now()
	r.plan()
	log.Info("chaos: fleet up; publishing", "triggers", len(r.triggers), "rate", cfg.Rate, "workers", cfg.Workers, "seed", cfg.Seed)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.publish(runCtx) })
	wg.Go(func() { r.cancel(runCtx) })
	stopFaults := make(chan struct{})
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); r.inject(runCtx, stopFaults) }()

	rd := &reader{b: r.b, out: Outcomes{}}
	final, lastFinal, lastProgress := 0, 0, time.Now()
	faultsOn := true
	nextLog := time.Now()
	for {
		select {
		case <-ctx.Done():
			close(stopFaults)
			cancel()
			wg.Wait()
			return nil, ctx.Err()
		case <-time.After(2 * time.Second): // polling interval of the events stream
		}
		if err := rd.poll(ctx); err != nil {
			// Not a stall of the fleet: the server is down or slow to answer.
			log.Debug("chaos: reading outcomes", "err", err)
			lastProgress = time.Now()
		}
		final = len(r.waited) - rd.out.Count(r.waited).Lost
		if final != lastFinal {
			lastFinal, lastProgress = final, time.Now()
		}
		r.mu.Lock()
		pubDone, acked := r.pubDone, r.nacked
		r.mu.Unlock()
		if time.Now().After(nextLog) {
			log.Info("chaos: progress", "published", acked, "final_outcomes", final, "of", len(r.waited))
			nextLog = time.Now().Add(10 * time.Second)
		}
		if faultsOn && pubDone && (final >= len(r.waited)*95/100 || time.Since(lastProgress) > 30*time.Second) {
			faultsOn = false
			close(stopFaults)
			<-faultsDone
			log.Info("chaos: faults stopped; waiting for the rest", "final_outcomes", final, "of", len(r.waited))
		}
		if !faultsOn && (final == len(r.waited) || time.Since(lastProgress) > cfg.Stall || time.Since(began) > cfg.Timeout) {
			break
		}
	}
	wg.Wait()
	log.Info("chaos: settling", "for", cfg.Settle)
	time.Sleep(cfg.Settle) // late duplicates have this long to show up
	rep, err := r.verify(ctx)
	if err != nil {
		return nil, err
	}
	rep.Wall = time.Since(began)
	rep.Dir = r.dir
	r.stopFleet()
	if !rep.OK() {
		if rep.Store, err = r.keepStore(); err != nil {
			log.Error("chaos: the store could not be kept", "err", err)
		}
	}
	r.unmount()
	if rep.OK() && !cfg.Keep && cfg.Dir == "" {
		os.RemoveAll(r.dir)
		rep.Dir = ""
	}
	return rep, nil
}

func (r *runner) build(ctx context.Context) error {
	bin := filepath.Join(r.dir, "bin")
	for _, args := range [][]string{
		{"build", "-o", bin + "/", "./cmd/registry", "./cmd/router", "./cmd/worker"},
		{"build", "-o", filepath.Join(bin, "nats-server"), "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = r.cfg.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// unmount unmounts the store's tmpfs, once the server has stopped.
func (r *runner) unmount() {
	if r.mounted {
		unmountStore(filepath.Join(r.dir, "nats"))
		r.mounted = false
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *runner) startFleet(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	r.port, r.url = port, fmt.Sprintf("nats://127.0.0.1:%d", port)
	monitor, err := freePort()
	if err != nil {
		return err
	}
	probes, err := freePort()
	if err != nil {
		return err
	}
	r.healthz = fmt.Sprintf("http://127.0.0.1:%d/healthz", monitor)
	r.readyz = fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)
	// On the tmpfs, the server's own limit is the filesystem's size: the disk-full
	// phase fills the filesystem, not the server's allowance.
	limit := ""
	if r.mounted {
		limit = fmt.Sprintf("  max_file_store: %d\n", r.cfg.StoreSize)
	}
	conf := filepath.Join(r.dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "server_name: chaos\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\nmax_payload: %d\njetstream {\n  store_dir: %q\n%s}\n",
		port, monitor, MaxPayload, filepath.Join(r.dir, "nats"), limit), 0o644); err != nil {
		return err
	}
	// CHAOS_SINK tells chaos-every, whose ticks carry no data, where to write.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(r.dir, "home"), "CHAOS_SINK=" + filepath.Join(r.dir, "sink") + "/"}
	newProc := func(kind, name, bin string, args func(string) []string) *proc {
		return &proc{kind: kind, name: name, bin: filepath.Join(r.dir, "bin", bin), args: args,
			dir: filepath.Join(r.dir, "logs"), workdir: r.cfg.Repo, env: env, log: r.cfg.Log, onStart: r.started}
	}
	r.server = newProc("nats-server", "nats-server", "nats-server", func(string) []string { return []string{"-c", conf} })
	if err := r.server.start(); err != nil {
		return err
	}
	if err := r.waitServer(30 * time.Second); err != nil {
		return err
	}
	nc, err := bus.Connect(r.url, "skillbus-chaos")
	if err != nil {
		return err
	}
	r.nc = nc
	if r.b, err = bus.New(nc, bus.Config{}); err != nil {
		return err
	}
	url := "--nats-url=" + r.url
	ack := r.cfg.AckWait.String()
	r.registry = newProc("registry", "registry", "registry", func(string) []string {
		return []string{url, "--skills", filepath.Join(r.cfg.Repo, "testdata", "chaos")}
	})
	// The router's /readyz, with nats-server's /healthz among its checks, is watched
	// during the disk-full phase.
	r.router = newProc("router", "router", "router", func(string) []string {
		return []string{url, "--router-ack-wait=" + ack, "--metrics-addr=" + strings.TrimSuffix(strings.TrimPrefix(r.readyz, "http://"), "/readyz"), "--nats-healthz=" + r.healthz}
	})
	for i := range r.cfg.Workers {
		r.workers = append(r.workers, newProc("worker", fmt.Sprintf("w%d", i+1), "worker", func(inc string) []string {
			return []string{url, "--name=" + inc, "--ack-wait=" + ack, "--backoff-base=100ms", "--backoff-max=1s",
				"--concurrency=" + strconv.Itoa(r.cfg.Concurrency), "--bus-tools=false"}
		}))
	}
	if r.cfg.SlowEvery > 0 {
		// chaos-slow's pool: one job at a time each, so a second job waits in the
		// client's buffer behind a run longer than the ack wait.
		for i := range 2 {
			r.workers = append(r.workers, newProc("worker", fmt.Sprintf("ws%d", i+1), "worker", func(inc string) []string {
				return []string{url, "--name=" + inc, "--ack-wait=" + ack, "--backoff-base=100ms", "--backoff-max=1s",
					"--pools=slow", "--concurrency=1", "--bus-tools=false"}
			}))
		}
	}
	for _, p := range append([]*proc{r.registry, r.router}, r.workers...) {
		if err := p.start(); err != nil {
			return err
		}
	}
	// Ready: the catalog holds the skills and the consumers exist.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r.ready(ctx) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: the fleet did not come up within 60s; see the logs in %s", filepath.Join(r.dir, "logs"))
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a condition
	}
}

func (r *runner) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	kv, err := r.b.KV(ctx, r.b.BucketSkills())
	if err != nil {
		return false
	}
	for _, s := range []string{"chaos-once", "chaos-steps", "chaos-primary", "chaos-secondary", "chaos-big", "chaos-limited", "chaos-slow", keyedSkill, debouncedSkill, scheduledSkill} {
		if _, err := kv.Get(ctx, s); err != nil {
			return false
		}
	}
	if _, err := r.b.Consumer(ctx, r.b.StreamTriggers(), "router"); err != nil {
		return false
	}
	if r.cfg.SlowEvery > 0 {
		if _, err := r.b.Consumer(ctx, r.b.StreamJobs(), "worker-slow"); err != nil {
			return false
		}
	}
	_, err = r.b.Consumer(ctx, r.b.StreamJobs(), "worker-default")
	return err == nil
}

// waitServer waits until the server accepts connections on its port.
func (r *runner) waitServer(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: nats-server is not listening after %v: %w", d, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition
	}
}

func (r *runner) started(pid int, inc string) {
	r.mu.Lock()
	r.names[pid] = inc
	r.mu.Unlock()
}

func (r *runner) stopFleet() {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	r.stopping = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range r.workers {
		wg.Go(func() { p.stop(30 * time.Second) })
	}
	for _, p := range []*proc{r.router, r.registry} {
		if p != nil {
			wg.Go(func() { p.stop(30 * time.Second) })
		}
	}
	wg.Wait()
	if r.nc != nil {
		r.nc.Close()
	}
	if r.server != nil {
		r.server.stop(30 * time.Second)
	}
}

// plan decides every trigger: its skill, its id and its message.
func (r *runner) plan() {
	r.source = fmt.Sprintf("/chaos/%x", r.cfg.Seed) // not /skillbus/: routers take those only from skillbus itself
	sink := filepath.Join(r.dir, "sink")
	r.finals = debounceKeys
	n := r.cfg.Triggers + r.finals
	r.triggers, r.msgs, r.acked, r.sent = make([]Trigger, n), make([]*nats.Msg, n), make([]bool, n), make([]time.Time, n)
	r.cancelAt, r.cancels = map[int]time.Duration{}, map[string]string{}
	for i := range n {
		t := Trigger{N: i, ID: fmt.Sprintf("t-%d", i)}
		switch x := r.rng.Float64(); {
		case i >= r.cfg.Triggers: // the last trigger of each debounce key
			t.Skill, t.Key = debouncedSkill, fmt.Sprintf("d%d", i-r.cfg.Triggers)
		case r.cfg.BigEvery > 0 && i%r.cfg.BigEvery == r.cfg.BigEvery-1:
			t.Skill = "chaos-big"
		case r.cfg.Limited && i%20 == 7:
			t.Skill = "chaos-limited"
		case r.cfg.SlowEvery > 0 && i%r.cfg.SlowEvery == r.cfg.SlowEvery/2:
			t.Skill = "chaos-slow"
		case i%10 == 3: // a tenth, spread over the keys
			t.Skill, t.Key = keyedSkill, fmt.Sprintf("k%d", (i/10)%keyedKeys)
			// A quarter of them, from the second on, is cancelled 0–300 ms after
			// its trigger is confirmed: most are queued or waiting for their key.
			if k := i / 10; k%4 == 1 && len(r.cancelAt) < keyedCancels {
				r.cancelAt[i] = time.Duration(r.rng.Int64N(int64(300 * time.Millisecond)))
			}
		case i%300 < 45 && i%3 == 2:
			// Bursts: a dozen triggers over three keys in under half a second at
			// 100 a second, then quiet for longer than the debounce period.
			t.Skill, t.Key = debouncedSkill, fmt.Sprintf("d%d", (i/3)%debounceKeys)
		case x < 0.4:
			t.Skill = "chaos-once"
		case x < 0.8:
			t.Skill = "chaos-steps"
		}
		subject, typ := r.b.Subjects.TriggerSkill(t.Skill), "com.skillbus.chaos.run"
		if t.Skill == "" {
			subject, typ = r.b.Subjects.Trigger(fallbackType), fallbackType
			t.Execution = events.ExecutionID(r.source, t.ID, "chaos-primary")
		} else {
			t.Execution = events.ExecutionID(r.source, t.ID, t.Skill)
		}
		switch t.Skill {
		case keyedSkill:
			r.keyed, r.waited = append(r.keyed, t), append(r.waited, t)
		case debouncedSkill:
			r.debounced = append(r.debounced, t)
		default:
			r.main, r.waited = append(r.main, t), append(r.waited, t)
		}
		m := nats.NewMsg(subject)
		m.Header.Set(events.HeaderCESpecVersion, "1.0")
		m.Header.Set(events.HeaderCEID, t.ID)
		m.Header.Set(events.HeaderCESource, r.source)
		m.Header.Set(events.HeaderCEType, typ)
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set(bus.HeaderMsgID, r.source+"/"+t.ID)
		if t.Key != "" {
			m.Data = fmt.Appendf(nil, `{"sink":%q,"n":%d,"key":%q}`, sink, i, t.Key)
		} else if t.Skill == "chaos-slow" {
			m.Data = fmt.Appendf(nil, `{"sink":%q,"n":%d,"d":"%.3f"}`, sink, i, 1.5*r.cfg.AckWait.Seconds())
		} else {
			m.Data = fmt.Appendf(nil, `{"sink":%q,"n":%d}`, sink, i)
		}
		r.triggers[i], r.msgs[i] = t, m
	}
}

// publish publishes every trigger at the configured rate, like a client would:
// asynchronously, and again (same message id) whenever the server did not confirm
// one — it was down, or restarting.
func (r *runner) publish(ctx context.Context) {
	js, err := jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(1024), jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		r.cfg.Log.Error("chaos: publisher", "err", err)
		return
	}
	type pending struct {
		i int
		f jetstream.PubAckFuture
	}
	queue := make(chan pending, 1024)
	send := func(i int) jetstream.PubAckFuture {
		r.mu.Lock()
		if r.sent[i].IsZero() {
			r.sent[i] = time.Now()
		}
		r.mu.Unlock()
		for {
			f, err := js.PublishMsgAsync(r.msgs[i])
			if err == nil {
				return f
			}
			r.mu.Lock()
			r.faults.PublishRetries++
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(250 * time.Millisecond): // a publisher's retry delay
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for p := range queue {
			for p.f != nil {
				select {
				case <-p.f.Ok():
					r.mu.Lock()
					r.acked[p.i] = true
					r.nacked++
					r.mu.Unlock()
					p.f = nil
					continue
				case <-p.f.Err():
				case <-ctx.Done():
					return
				}
				// Unconfirmed within the publish timeout: send it again at once (the
				// timeout was the wait); send itself backs off while publishing fails.
				r.mu.Lock()
				r.faults.PublishRetries++
				r.mu.Unlock()
				p.f = send(p.i)
			}
		}
	})
	start := time.Now()
	for i := range r.msgs[:len(r.msgs)-r.finals] {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(r.cfg.Rate))); d > 0 {
			time.Sleep(d) // the publishing rate
		}
		f := send(i)
		if f == nil {
			break
		}
		select {
		case queue <- pending{i, f}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(queue)
	wg.Wait()
	// Each debounce key's last trigger, once every other is stored: the last
	// stored, whatever the retries above reordered.
	for i := len(r.msgs) - r.finals; i < len(r.msgs) && ctx.Err() == nil; i++ {
		r.mu.Lock()
		r.sent[i] = time.Now()
		r.mu.Unlock()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.b.Publish(pctx, r.msgs[i])
			cancel()
			if err == nil {
				r.mu.Lock()
				r.acked[i] = true
				r.nacked++
				r.mu.Unlock()
				break
			}
			r.mu.Lock()
			r.faults.PublishRetries++
			r.mu.Unlock()
			time.Sleep(250 * time.Millisecond) // a publisher's retry delay
		}
	}
	r.mu.Lock()
	r.pubDone = true
	r.mu.Unlock()
	r.cfg.Log.Info("chaos: every trigger published and confirmed", "in", time.Since(start).Round(time.Millisecond))
}

// fault kinds, in the order the first round injects them.
const (
	faultWorker   = "worker SIGKILL"
	faultRouter   = "router SIGKILL"
	faultRegistry = "registry SIGKILL"
	faultKill     = "nats-server SIGKILL"
	faultTerm     = "nats-server SIGTERM"
	faultDup      = "duplicate publish"
	faultDisk     = "disk full"
)

// inject injects faults at random moments until stop is closed: first one of each
// kind, in random order, then a weighted mix where worker kills are the most common.
func (r *runner) inject(ctx context.Context, stop <-chan struct{}) {
	first := []string{faultWorker, faultRouter, faultRegistry, faultKill, faultTerm, faultDup}
	r.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	mix := []string{faultWorker, faultWorker, faultWorker, faultWorker, faultRouter, faultRegistry, faultKill, faultTerm, faultDup, faultDup}
	for n := 0; ; n++ {
		d := r.cfg.FaultMin + time.Duration(r.rng.Int64N(int64(r.cfg.FaultMax-r.cfg.FaultMin)+1))
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(d): // the random moment of the next fault
		}
		kind := mix[r.rng.IntN(len(mix))]
		if n < len(first) {
			kind = first[n]
		} else if r.diskDue() {
			kind = faultDisk
		}
		if err := r.fault(ctx, kind); err != nil {
			r.cfg.Log.Warn("chaos: fault not injected", "fault", kind, "err", err)
		}
	}
}

func (r *runner) fault(ctx context.Context, kind string) error {
	restart := func(p *proc, sig syscall.Signal, down time.Duration, count *int) error {
		pid, at, exited, err := p.signal(sig, 30*time.Second)
		if err != nil {
			return err
		}
		r.mu.Lock()
		*count++
		name := r.names[pid]
		if sig == syscall.SIGKILL {
			r.kills[name] = Kill{Sent: at, Exited: exited}
		}
		r.mu.Unlock()
		r.cfg.Log.Info("chaos: fault", "fault", kind, "process", name, "down_for", down.Round(time.Millisecond))
		time.Sleep(down) // how long the process stays down
		return p.start()
	}
	switch kind {
	case faultWorker:
		w := r.workers[r.rng.IntN(len(r.workers))]
		return restart(w, syscall.SIGKILL, time.Duration(r.rng.Int64N(int64(2*time.Second))), &r.faults.WorkerKills)
	case faultRouter:
		return restart(r.router, syscall.SIGKILL, time.Duration(r.rng.Int64N(int64(2*time.Second))), &r.faults.RouterKills)
	case faultRegistry:
		return restart(r.registry, syscall.SIGKILL, time.Duration(r.rng.Int64N(int64(2*time.Second))), &r.faults.RegistryKills)
	case faultKill, faultTerm:
		sig, count := syscall.SIGKILL, &r.faults.ServerKills
		if kind == faultTerm {
			sig, count = syscall.SIGTERM, &r.faults.ServerTerms
		}
		from := time.Now()
		if err := restart(r.server, sig, 500*time.Millisecond+time.Duration(r.rng.Int64N(int64(2500*time.Millisecond))), count); err != nil {
			return err
		}
		err := r.waitServer(30 * time.Second)
		r.mu.Lock()
		r.outages = append(r.outages, [2]time.Time{from, time.Now()})
		r.mu.Unlock()
		return err
	case faultDup:
		return r.duplicate(ctx)
	case faultDisk:
		r.diskDone = true
		return r.diskFull(ctx)
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// diskDue reports whether the disk-full phase is the next fault: once, when it can
// run, as soon as a third of the triggers are published.
func (r *runner) diskDue() bool {
	if r.disk.Skipped != "" || r.diskDone {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pubDone || 3*r.nacked >= len(r.triggers)
}

// duplicate publishes a few triggers again that the server has confirmed: the same
// CloudEvent (source and id), with a new Nats-Msg-Id, as a publisher retrying after
// the duplicate window would. None may run again.
func (r *runner) duplicate(ctx context.Context) error {
	r.mu.Lock()
	var done []int
	for i, ok := range r.acked {
		// A debounced trigger published again is the latest of a new burst: it
		// runs, as it should, and takes the place of that burst's own last one.
		if ok && r.triggers[i].Skill != debouncedSkill {
			done = append(done, i)
		}
	}
	r.faults.DuplicateBursts++
	burst := r.faults.DuplicateBursts
	r.mu.Unlock()
	if len(done) == 0 {
		return errors.New("no trigger confirmed yet")
	}
	sent := 0
	for k := range 10 {
		i := done[r.rng.IntN(len(done))]
		m := nats.NewMsg(r.msgs[i].Subject)
		for h, v := range r.msgs[i].Header {
			m.Header[h] = v
		}
		m.Header.Set(bus.HeaderMsgID, fmt.Sprintf("%s/%s/again-%d-%d", r.source, r.triggers[i].ID, burst, k))
		m.Data = r.msgs[i].Data
		for try := 0; try < 20; try++ {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.b.Publish(pctx, m)
			cancel()
			if err == nil {
				sent++
				break
			}
			time.Sleep(250 * time.Millisecond) // a publisher's retry delay
		}
	}
	r.mu.Lock()
	r.faults.DuplicatePublishes += sent
	r.mu.Unlock()
	r.cfg.Log.Info("chaos: fault", "fault", faultDup, "triggers", sent)
	return nil
}

// reader reads the outcome events from the EVENTS stream, each poll from where the
// last one stopped. It reads message by message (a direct get per sequence) rather
// than through a consumer: the stream's consumers are limited (1,000 by default on
// nats-server 2.15), and the fleet's own must not be crowded out.
type reader struct {
	b    *bus.Bus
	last uint64
	out  Outcomes
}

func (rd *reader) poll(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := rd.b.Stream(ictx, rd.b.StreamEvents())
	if err != nil {
		return err
	}
	info, err := st.Info(ictx)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(rd.b.Subjects.AllEvents(), ">")
	for seq := max(rd.last+1, info.State.FirstSeq); seq <= info.State.LastSeq; seq++ {
		gctx, gcancel := context.WithTimeout(ctx, 5*time.Second) // a reply lost to a server restart
		m, err := st.GetMsg(gctx, seq)
		gcancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			rd.last = seq
			continue
		}
		if err != nil {
			return err
		}
		rd.last = seq
		if !strings.HasPrefix(m.Subject, prefix) {
			continue
		}
		// An outcome that does not decode is not counted, so the run reports it lost.
		e, err := bus.DecodeFast(bus.MsgOf(m.Subject, m.Header, m.Data))
		if err != nil || !events.Outcome(e.Type) {
			continue
		}
		rec, err := run.FromEvent(e.Type, e.Data, m.Time)
		if err != nil {
			return fmt.Errorf("outcome at sequence %d: %w", seq, err)
		}
		rd.out.Add(rec)
	}
	return nil
}

// cancel cancels the chaos-keyed runs of cancelAt, as `skillbus runs cancel` does,
// each its delay after its trigger is confirmed: most are then queued, or waiting
// for their key's slot. A run the cancel does not find yet (its trigger not routed:
// the router is down or behind) is looked for again for up to a minute; a cancel
// that fails (the server is down) is asked again. cancels records each answer's
// state, "" for a cancel never recorded.
func (r *runner) cancel(ctx context.Context) {
	var c *control.Controller
	for c == nil {
		var err error
		if c, err = control.New(ctx, r.b); err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond): // the server may be down
			}
		}
	}
	var wg sync.WaitGroup
	for _, i := range slices.Sorted(maps.Keys(r.cancelAt)) {
		for {
			r.mu.Lock()
			acked := r.acked[i]
			r.mu.Unlock()
			if acked {
				break
			}
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-time.After(20 * time.Millisecond): // polling interval of a condition
			}
		}
		wg.Go(func() {
			time.Sleep(r.cancelAt[i]) // the delay after the confirmation
			id := r.triggers[i].Execution
			state := ""
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := c.Cancel(cctx, id, control.Request{By: "chaos", Reason: "the chaos run cancels a sample of chaos-keyed's runs"})
				cancel()
				if err == nil {
					state = res.State
					break
				}
				if !errors.Is(err, control.ErrNoExecution) {
					r.cfg.Log.Debug("chaos: cancel", "execution", id, "err", err)
				}
				time.Sleep(100 * time.Millisecond) // the run is not routed yet, or the server is down
			}
			r.mu.Lock()
			r.cancels[id] = state
			r.mu.Unlock()
			r.cfg.Log.Info("chaos: cancel", "trigger", r.triggers[i].ID, "state", state)
		})
	}
	wg.Wait()
}
