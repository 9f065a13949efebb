package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skillbus/skillbus/events"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
)

// drainTimeout bounds how long a stopping process waits for in-flight work before
// handing it back to the broker.
const drainTimeout = 25 * time.Second

func (r *routerFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&r.concurrency, "router-concurrency", 64, "triggers routed at once")
	f.IntVar(&r.maxEventBytes, "max-event-bytes", 256<<10, "largest trigger accepted (headers and data); larger ones are rejected and recorded")
	f.DurationVar(&r.ackWait, "router-ack-wait", 30*time.Second, "how long JetStream waits for a router's ack before redelivering a trigger")
	r.routing.register(cmd)
}

func (w *workerFlags) register(cmd *cobra.Command, getenv Env) {
	f := cmd.Flags()
	w.getenv = getenv
	w.llmKey = getenv("SKILLBUS_LLM_API_KEY")
	f.StringVar(&w.llmURL, "llm-url", getenv("SKILLBUS_LLM_URL"), "OpenAI-compatible chat-completions URL for instruction skills and the llm tool ($SKILLBUS_LLM_URL; the key comes from $SKILLBUS_LLM_API_KEY)")
	f.StringVar(&w.llmModel, "llm-model", getenv("SKILLBUS_LLM_MODEL"), "chat model name ($SKILLBUS_LLM_MODEL)")
	f.DurationVar(&w.llmTimeout, "llm-timeout", 2*time.Minute, "timeout of one chat request")
	f.IntVar(&w.llmMaxTurns, "llm-max-turns", 8, "model turns an instruction skill may take")
	f.StringVar(&w.mcpConfig, "mcp-config", getenv("SKILLBUS_MCP_CONFIG"), "JSON file of MCP servers (the mcpServers format) whose tools skills may call ($SKILLBUS_MCP_CONFIG)")
	f.BoolVar(&w.busTools, "bus-tools", true, "discover tools served on the bus (skillbus.tool.<name> micro services)")
	f.DurationVar(&w.busToolsInterval, "bus-tools-interval", 30*time.Second, "how often to look for tools on the bus")
	f.StringSliceVar(&w.pools, "pools", []string{"default"}, "worker pools to serve (comma-separated)")
	f.IntVar(&w.concurrency, "concurrency", 32, "jobs run at once per pool")
	f.DurationVar(&w.ackWait, "ack-wait", 30*time.Second, "how long JetStream waits for a worker's ack before redelivering a job to another worker; running jobs heartbeat within it")
	f.DurationVar(&w.backoffBase, "backoff-base", time.Second, "delay before the first retry of a retryable failure; doubles each retry")
	f.DurationVar(&w.backoffMax, "backoff-max", time.Minute, "longest delay between retries")
	f.StringVar(&w.name, "name", "", "worker name in events and heartbeats (default host-pid)")
	f.StringVar(&w.execDir, "exec-dir", "", "working directory of the exec tool's processes (default: a fresh temporary directory per call)")
	f.DurationVar(&w.confirmTimeout, "confirm-timeout", time.Hour, "how long a confirmation waits for an answer when the skill does not say; unanswered, it is denied")
	f.IntVar(&w.maxDepth, "max-depth", 2, "how deep skills may invoke skills through the skill tool")
	f.IntVar(&w.crashAllowance, "crash-allowance", 2, "how many times workers may die running one execution before it is dead-lettered unrun (a job that kills its worker); a death in its first run, which takes no claim, is not counted")
	f.StringVar(&w.execPath, "exec-path", "", "PATH given to the exec tool's processes (default /usr/local/bin:/usr/bin:/bin)")
	w.execLimits.register(cmd)
	f.BoolVar(&w.repair, "repair", w.repair, "repair skills: park executions that fail with a repairable fault (a misspelt key, an unknown filter, a wrong path, a refused parameter) on one repair per skill version and fault, which the repair service (skillbus repair serve, its own NATS user) proposes a patch for (see docs/operations.md); every worker of a fleet should agree")
	f.StringVar(&w.events, "events", string(events.DefaultLevel), "which events are persisted: full (every progress event), steps (decisions, outcomes and the checkpoints a redelivery needs) or terminal (no checkpoints); the rest go live to followers only")
}

// registerRepair registers the repair service's knobs, each named prefix+name:
// `skillbus dev` names them repair-*, `skillbus repair serve` plainly.
func (w *workerFlags) registerRepair(cmd *cobra.Command, prefix string) {
	f := cmd.Flags()
	f.BoolVar(&w.repairAuto, prefix+"auto", false, "apply proposed repairs without waiting for approval, as if every skill said repair: auto")
	f.DurationVar(&w.repairExpiry, prefix+"expiry", time.Hour, "how long a proposed repair waits for approval; unanswered, it expires and its executions fail as without repair")
	f.DurationVar(&w.repairAckWait, prefix+"ack-wait", 2*time.Minute, "how long a repair job may go unacknowledged before another repair service gets it (one that died mid-repair); running repairs heartbeat within it")
	f.IntVar(&w.repairBudget.MaxAttempts, prefix+"max-attempts", 2, "patches tried per skill and fault")
	f.IntVar(&w.repairBudget.MaxFiles, prefix+"max-files", 3, "files one repair may change")
	f.IntVar(&w.repairBudget.MaxHunks, prefix+"max-hunks", 8, "hunks one repair may have")
}

// Router is the main of cmd/router.
func Router(ctx context.Context, args []string, getenv Env, stdout, stderr io.Writer) error {
	var c common
	var o observe
	var rf routerFlags
	var ensureStreams bool
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Route skillbus triggers to skills",
		Long: `router consumes trigger events from the TRIGGERS stream (durable consumer "router",
shared by every router), decides which skills handle each one, and publishes the
jobs that run at once, each carrying the activation plan (and, at --events full, an
io.skillbus.route.decided event). Triggers with
text (data query, text, message or prompt) are routed by relevance: rules, a keyword
index, and optionally embeddings (--embed-url) and a chat model (--recall-llm-url);
see docs/routing.md. Run as many as you like: JetStream spreads the triggers between them.`,
		Example: `  router --nats-url nats://nats:4222
  SKILLBUS_NATS_URL=nats://a:4222,nats://b:4222 router --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := events.ParseLevel(rf.events); err != nil {
				return usage("--events: %v", err)
			}
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			tel, log, stopTel, err := o.start(cmd.Context(), "skillbus-router", log)
			if err != nil {
				return err
			}
			defer stopTel()
			b, err := c.connectWait(cmd.Context(), "skillbus-router", log)
			if err != nil {
				return err
			}
			defer b.Drain()
			watchBus(tel, b)
			o.watchStore(tel, b)
			var stop func(context.Context)
			err = startRetry(cmd.Context(), log, "router", func() (err error) {
				if err := ensure(cmd.Context(), b, ensureStreams, log, routerNeeds(b)); err != nil {
					return err
				}
				stop, err = startRouter(cmd.Context(), b, log, rf, tel)
				return err
			})
			if err != nil {
				return err
			}
			watchConsumer(tel, b, "", b.StreamTriggers(), "router")
			log.Info("router: running", "nats", c.natsURL)
			<-cmd.Context().Done()
			shutdown(log, stop)
			return nil
		},
	}
	c.register(cmd, getenv, "json")
	cmd.Flags().BoolVar(&ensureStreams, "ensure", true, "create or update the streams and buckets at start (turn off where this process's NATS user may not)")
	c.registerRetention(cmd, getenv)
	cmd.Flags().StringVar(&rf.events, "events", string(events.DefaultLevel), "the fleet's events level, as the workers': at full the routing decision is also an event of its own in the EVENTS stream; at steps and terminal it travels only in the jobs")
	rf.register(cmd)
	o.register(cmd, getenv)
	return execute(ctx, cmd, args, stdout, stderr)
}

// Worker is the main of cmd/worker.
func Worker(ctx context.Context, args []string, getenv Env, stdout, stderr io.Writer) error {
	var c common
	var o observe
	var wf workerFlags
	var ensureStreams bool
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run skillbus jobs",
		Long: `worker consumes jobs from the JOBS stream for the pools it serves (durable consumer
"worker-<pool>", shared by every worker of the pool), runs each job's skill, and
publishes its progress and result. Retryable failures are redelivered by JetStream
with backoff; fatal ones fall back along the plan's chain or go to the DLQ.
Scale by running more workers.`,
		Example: `  worker --nats-url nats://nats:4222
  worker --pools default,gpu --concurrency 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := events.ParseLevel(wf.events); err != nil {
				return usage("--events: %v", err)
			}
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			tel, log, stopTel, err := o.start(cmd.Context(), "skillbus-worker", log)
			if err != nil {
				return err
			}
			defer stopTel()
			b, err := c.connectWait(cmd.Context(), "skillbus-worker", log)
			if err != nil {
				return err
			}
			defer b.Drain()
			watchBus(tel, b)
			o.watchStore(tel, b)
			if err := startRetry(cmd.Context(), log, "worker", func() error { return ensure(cmd.Context(), b, ensureStreams, log, workerNeeds(b)) }); err != nil {
				return err
			}
			if wf.name == "" {
				host, _ := os.Hostname()
				wf.name = host + "-" + strconv.Itoa(os.Getpid())
			}
			tb, err := newToolbox(cmd.Context(), b, log, wf)
			if err != nil {
				return err
			}
			defer tb.close()
			var stop func(context.Context)
			err = startRetry(cmd.Context(), log, "worker", func() (err error) {
				stop, err = startWorker(cmd.Context(), b, log, wf, tb, tel)
				return err
			})
			if err != nil {
				return err
			}
			for _, p := range wf.pools {
				watchConsumer(tel, b, p, b.StreamJobs(), "worker-"+p)
			}
			svc, err := serveWorker(cmd.Context(), b, wf, tb)
			if err != nil {
				shutdown(log, stop)
				return err
			}
			defer func() { _ = svc.Stop() }()
			log.Info("worker: running", "nats", c.natsURL, "pools", wf.pools, "concurrency", wf.concurrency, "tools", tb.watcher.Set().Names())
			<-cmd.Context().Done()
			shutdown(log, stop)
			return nil
		},
	}
	c.register(cmd, getenv, "json")
	cmd.Flags().BoolVar(&ensureStreams, "ensure", true, "create or update the streams and buckets at start (turn off where this process's NATS user may not)")
	c.registerRetention(cmd, getenv)
	wf.register(cmd, getenv)
	o.register(cmd, getenv)
	return execute(ctx, cmd, args, stdout, stderr)
}

// Registry is the main of cmd/registry.
func Registry(ctx context.Context, args []string, getenv Env, stdout, stderr io.Writer) error {
	var c common
	var o observe
	var ensureStreams bool
	var roots []string
	var once bool
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Publish skills to the skillbus catalog",
		Long: `registry loads the skills in the given directories (SKILL.md and skill.yaml), reports
every invalid file with its line, and publishes each valid skill to the catalog (KV
bucket "skills", with its files in the object store "skill-files"); routers and workers
follow the catalog live. It keeps watching the directories: an edit, a new skill or a
deletion is published within moments; a skill made invalid keeps its last good version
serving. It also serves the skillbus-registry micro service (list, get, search,
validate), which 'skillbus skills' uses. Send SIGHUP to load everything again.`,
		Example: `  registry --skills ./skills
  registry --skills ./skills --skills /etc/agent/skills --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(roots) == 0 {
				return usage("no skills directory: pass --skills DIR (repeatable)")
			}
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			tel, log, stopTel, err := o.start(cmd.Context(), "skillbus-registry", log)
			if err != nil {
				return err
			}
			defer stopTel()
			b, err := c.connectWait(cmd.Context(), "skillbus-registry", log)
			if err != nil {
				return err
			}
			defer b.Drain()
			watchBus(tel, b)
			o.watchStore(tel, b)
			// The registry creates the skill files' object store itself.
			if err := startRetry(cmd.Context(), log, "registry", func() error { return ensure(cmd.Context(), b, ensureStreams, log, needs{}) }); err != nil {
				return err
			}
			if once {
				reg, err := registry.New(registry.Config{Bus: b, Roots: roots, Log: log})
				if err != nil {
					return usage("%v", err)
				}
				rep, err := reg.Sync(cmd.Context())
				if err == nil && rep.Diagnostics.HasErrors() {
					return &ExitError{Code: 1, Err: fmt.Errorf("%d skills published; some files have errors (see the log)", len(rep.Loaded))}
				}
				return err
			}
			var reg *registry.Registry
			err = startRetry(cmd.Context(), log, "registry", func() (err error) {
				reg, err = startRegistry(cmd.Context(), b, log, roots, nil)
				return err
			})
			if err != nil {
				return err
			}
			defer reg.Stop()
			log.Info("registry: running: watching the skills and serving skillbus-registry", "roots", roots)
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-hup:
					reg.Resync()
				}
			}
		},
	}
	c.register(cmd, getenv, "json")
	cmd.Flags().BoolVar(&ensureStreams, "ensure", true, "create or update the streams and buckets at start (turn off where this process's NATS user may not)")
	c.registerRetention(cmd, getenv)
	cmd.Flags().StringArrayVar(&roots, "skills", nil, "directory of skills (repeatable; the first definition of a name wins)")
	cmd.Flags().BoolVar(&once, "once", false, "publish once and exit")
	o.register(cmd, getenv)
	return execute(ctx, cmd, args, stdout, stderr)
}

// shutdown drains roles within drainTimeout, one after another in the order
// given (a router first, so that no new jobs appear while workers drain).
func shutdown(log interface{ Info(string, ...any) }, stops ...func(context.Context)) {
	log.Info("shutting down: finishing in-flight work", "timeout", drainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, s := range stops {
		s(ctx)
	}
}

// needs is what a role started with --ensure=false waits for besides the streams:
// the KV buckets it opens (nil: every one) and the object stores it reads, which
// the registry creates. A role waits only for what its NATS user may look up.
type needs struct {
	buckets      []string
	objectStores []string
}

// routerNeeds: the catalog, paused runs, the workers' heartbeats, the outcome
// counts, the schedules and delayed triggers, and the rate limits.
func routerNeeds(b *bus.Bus) needs {
	return needs{buckets: []string{b.BucketSkills(), b.BucketRuns(), b.BucketWorkers(), b.BucketStats(), b.BucketSchedules(), b.BucketDelayed(), b.BucketRateLimits()}}
}

// workerNeeds: the catalog, runs, outcome counts, heartbeats, the step cache,
// repairs (read: the repair service writes them), and the skill files.
func workerNeeds(b *bus.Bus) needs {
	return needs{
		buckets:      []string{b.BucketSkills(), b.BucketRuns(), b.BucketStats(), b.BucketWorkers(), b.BucketCache(), b.BucketRepairs()},
		objectStores: []string{catalog.FilesBucket(b)},
	}
}

// ensure creates the streams and buckets, or, when that is another process's job,
// waits until every stream, and every bucket and object store the role needs,
// exists, saying what it waits for: started together, the router and workers wait
// for the registry.
func ensure(ctx context.Context, b *bus.Bus, create bool, log *slog.Logger, n needs) error {
	if create {
		return b.Ensure(ctx)
	}
	wait := connectRetryMin
	for {
		missing, err := missingParts(ctx, b, n)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			break
		}
		log.Warn("waiting for the registry (or a process run with --ensure) to create what this process needs",
			"waiting_for", strings.Join(missing, ", "), "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, connectRetryMax)
	}
	return b.LearnRetention(ctx) // the streams' own, as whoever ensured them set it
}

// missingParts names the streams, buckets and object stores that do not exist yet.
func missingParts(ctx context.Context, b *bus.Bus, n needs) ([]string, error) {
	var missing []string
	for _, sc := range b.Streams() {
		_, err := b.Stream(ctx, sc.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			missing = append(missing, "stream "+sc.Name)
		case err != nil:
			return nil, fmt.Errorf("stream %s: %w", sc.Name, err)
		}
	}
	buckets := n.buckets
	if buckets == nil {
		for _, kc := range b.Buckets() {
			buckets = append(buckets, kc.Bucket)
		}
	}
	for _, name := range buckets {
		_, err := b.KV(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			missing = append(missing, "bucket "+name)
		case err != nil:
			return nil, fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	for _, name := range n.objectStores {
		_, err := b.ObjectStore(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			missing = append(missing, "object store "+name)
		case err != nil:
			return nil, fmt.Errorf("object store %s: %w", name, err)
		}
	}
	return missing, nil
}

// WorkerServiceName is the NATS micro service every worker process registers, so
// that `nats micro ls` and `nats micro stats skillbus-worker` list the workers
// beside the registry and the routers.
const WorkerServiceName = "skillbus-worker"

// workerStatus is what a worker's status endpoint answers and its micro stats carry.
type workerStatus struct {
	Name        string         `json:"name"`
	Pools       []string       `json:"pools"`
	Concurrency int            `json:"concurrency"`
	Tools       []string       `json:"tools"`
	Started     time.Time      `json:"started"`
	Uptime      string         `json:"uptime"`
	Version     string         `json:"version"`
	Consumers   map[string]any `json:"consumers,omitempty"`
}

// serveWorker registers the worker process as the skillbus-worker micro service with
// one endpoint, <prefix>.worker.<name>.status: the worker's pools, concurrency and
// tools and, for each pool, its consumer's pending and unacknowledged jobs. The
// service's stats carry the same without the consumers.
func serveWorker(ctx context.Context, b *bus.Bus, wf workerFlags, tb *toolbox) (micro.Service, error) {
	prefix := b.Subjects.Prefix
	started := time.Now().UTC()
	status := func() workerStatus {
		return workerStatus{
			Name: wf.name, Pools: wf.pools, Concurrency: wf.concurrency, Tools: tb.watcher.Set().Names(),
			Started: started, Uptime: time.Since(started).Round(time.Second).String(), Version: version(),
		}
	}
	svc, err := b.AddService(micro.Config{
		Name:        WorkerServiceName,
		Version:     "1.0.0",
		Description: "skillbus worker: runs the jobs of its pools",
		Metadata:    map[string]string{"prefix": prefix, "name": wf.name, "pools": strings.Join(wf.pools, ",")},
		StatsHandler: func(*micro.Endpoint) any {
			return status()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("worker service: %w", err)
	}
	// The endpoint's subject names the worker (tokens of a subject cannot hold dots or
	// spaces), and has no queue group: each worker answers for itself.
	token := strings.NewReplacer(".", "_", " ", "_", "*", "_", ">", "_").Replace(wf.name)
	g := svc.AddGroup(b.Subjects.Worker(token), micro.WithGroupQueueGroupDisabled())
	err = g.AddEndpoint("status", micro.HandlerFunc(func(req micro.Request) {
		st := status()
		st.Consumers = map[string]any{}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for _, p := range wf.pools {
			c, err := b.Consumer(rctx, b.StreamJobs(), "worker-"+p)
			if err != nil {
				st.Consumers["worker-"+p] = map[string]string{"error": err.Error()}
				continue
			}
			i := c.CachedInfo()
			st.Consumers["worker-"+p] = map[string]uint64{"pending": i.NumPending, "ack_pending": uint64(i.NumAckPending), "redelivered": uint64(i.NumRedelivered)}
		}
		_ = req.RespondJSON(st)
	}), micro.WithEndpointMetadata(map[string]string{"description": "this worker's pools, concurrency, tools and its pools' consumer state"}))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("worker service endpoint: %w", err)
	}
	return svc, nil
}
