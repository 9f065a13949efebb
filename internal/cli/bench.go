package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/internal/bench"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func benchCommand(stdout io.Writer) *cobra.Command {
	var cfg bench.Config
	var storage, server, cpuProfile, only string
	var regSkills, edits int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput against bare JetStream, engine overhead and registry latency",
		Long: `bench measures skillbus and prints every figure with the settings that produced it.
Each system measured gets a fresh nats-server: inside the bench's process by default,
as skillbus dev runs it, or with --server process in a process of its own, as in a
deployment (its CPU time is then measured apart, printed as "(server N)" and added
to the bench's). Embedded, every garbage collection the clients' allocations start
also marks the server's heap, which costs skillbus, the side that allocates more, a
few hundredths of every ratio. Parts:

  throughput  skillbus running a one-step no-op skill from trigger to result against
              the minimal pipeline in bare JetStream (trigger → job → result, three
              persisted publishes with plain nats.go; same concurrency, message
              sizes, acknowledgement discipline), as a ratio: the median of --pairs
              paired rounds, the two back to back (see ratio). Then, in --rounds
              rounds of every configuration in turn: the same against bare
              JetStream doing skillbus's own writes (the job kept and create-only,
              the outcome create-only); each events level; a three-step workflow
              (local HTTP tool, compute, echo) against the one-step skill;
              persisted publishes per execution counted by the server; and the
              ratio with every write fsynced (--durable). Router, worker and driver
              each have their own connection; an untimed warm-up run comes first;
              every run prints the process's CPU per execution, and the ratios are
              also given by it, which other load on the machine hardly moves
  ratio       the headline ratio alone, in about a minute: --pairs rounds, each the
              one-step skill and the minimal pipeline on fresh servers back to back
              (which goes first alternating: A B B A A B B A), each run timing
              --pair-executions executions in the steady state, between an untimed
              warm-up and a tail that keeps the window full; the median of the
              rounds' ratios, by throughput and by CPU per execution, with a 95%
              confidence interval for it, their quartiles and their range. A
              round's two runs see nearly the same machine, so their ratio moves
              far less than either run's throughput
  tracing     the one-step skill with tracing off and on (every trace sampled,
              spans to an exporter that drops them), median of at least 5 rounds
  engine      the workflow engine's per-step overhead (template, condition,
              checkpoint; in memory)
  registry    loading and validating 10,000 skills, and an edit on disk until the
              catalogs of a router and 4 workers hold it
  route       routing a text request against 10,000 generated skills (keyword
              recall, scoring, plan; in memory), and updating the index after one
              skill changes`,
		Example: `  skillbus bench
  skillbus bench --only ratio
  skillbus bench --only ratio --pairs 40
  skillbus bench --only throughput --executions 50000 --sync-interval 1s
  skillbus bench --only registry --registry-skills 20000
  skillbus bench --only tracing --rounds 5
  skillbus bench --only route
  skillbus bench --storage memory`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch storage {
			case "file":
				cfg.Storage = jetstream.FileStorage
			case "memory":
				cfg.Storage = jetstream.MemoryStorage
			default:
				return usage("--storage %q: want file or memory", storage)
			}
			switch server {
			case "embedded":
			case "process":
				cfg.ServerProcess = true
			default:
				return usage("--server %q: want process or embedded", server)
			}
			if cfg.Rounds < 1 || cfg.Executions < 1 || cfg.Window < 1 || cfg.Samples < 1 || cfg.Concurrency < 1 || cfg.Pairs < 0 || cfg.PairExecutions < 1 {
				return usage("--rounds, --executions, --window, --samples, --concurrency and --pair-executions must be positive, --pairs not negative")
			}
			cfg.Out = stdout
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			switch only {
			case "", "throughput", "registry", "engine":
			case "ratio":
				return bench.RunRatio(cmd.Context(), cfg)
			case "tracing":
				return bench.RunTracing(cmd.Context(), cfg)
			case "route":
				bench.PrintRoute(stdout, bench.RunRoute(10000, 5000, 100))
				return nil
			default:
				return usage("--only %q: want throughput, ratio, engine, registry, tracing or route", only)
			}
			if only == "" || only == "throughput" {
				if err := bench.Run(cmd.Context(), cfg); err != nil {
					return err
				}
			}
			if only == "" || only == "engine" {
				o, err := workflow.MeasureOverhead(cmd.Context(), 20000)
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, o.String())
			}
			if only == "" || only == "registry" {
				return bench.RunRegistry(cmd.Context(), bench.RegistryConfig{Out: stdout, Storage: cfg.Storage, SyncInterval: cfg.SyncInterval, Skills: regSkills, Edits: edits})
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Executions, "executions", 20000, "executions in the throughput phase")
	f.IntVar(&cfg.Window, "window", 1000, "triggers unfinished at once in the throughput phase")
	f.IntVar(&cfg.Samples, "samples", 500, "latency samples, one trigger at a time")
	f.IntVar(&cfg.Concurrency, "concurrency", 64, "router and worker concurrency")
	f.IntVar(&cfg.Rounds, "rounds", 3, "rounds of every configuration in turn, every other one in reverse order; the report quotes the median ratios")
	f.IntVar(&cfg.Pairs, "pairs", 0, "paired rounds of the headline ratio (one-step skill and minimal pipeline back to back), whose ratios' median the report quotes; 0: 20 with --only ratio, else 10")
	f.IntVar(&cfg.PairExecutions, "pair-executions", 5000, "executions timed in each run of a paired round (after 2000 untimed, with a window's worth more behind)")
	f.DurationVar(&cfg.SyncInterval, "sync-interval", 0, "JetStream fsync interval (0: server default, 2m)")
	f.IntVar(&cfg.Durable, "durable", 2000, "executions per round of the durable figure (sync_interval always: every write fsynced); 0 skips it")
	f.StringVar(&storage, "storage", "file", "stream storage: file or memory")
	f.StringVar(&server, "server", "embedded", "where each run's nats-server runs: embedded (in the bench's process) or process (its own, as deployed)")
	f.StringVar(&only, "only", "", "run one part: throughput (skillbus vs bare JetStream, 3-step workflow), ratio (the headline ratio alone, in paired rounds), engine (per-step overhead) registry (10k skills load, edit-to-catalog latency), tracing (throughput with tracing on/off) or route (routing a text request against 10k skills)")
	f.IntVar(&regSkills, "registry-skills", 10000, "skills generated for the registry figures")
	f.IntVar(&edits, "edits", 100, "edits timed from disk to 5 catalogs")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the bench's process to this file (the server's too only with --server embedded)")
	return cmd
}
