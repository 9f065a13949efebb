package cli

import (
	"io"
	"os"
	"runtime/pprof"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/internal/bench"
)

func benchCommand(stdout io.Writer) *cobra.Command {
	var cfg bench.Config
	var storage, cpuProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure skillbus against bare JetStream doing the same persisted hops",
		Long: `bench starts an embedded NATS server and measures, in one run, (a) skillbus running a
one-step no-op skill from trigger to result, and (b) bare JetStream doing the same eight
persisted publishes with plain nats.go, with the same concurrency, message sizes and
acknowledgement discipline. It prints executions/s and trigger-to-result latency for
both, and skillbus's ratio to the baseline, with the settings that produced them.`,
		Example: `  skillbus bench
  skillbus bench --executions 50000 --sync-interval 1s
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
			if cfg.Rounds < 1 || cfg.Executions < 1 || cfg.Window < 1 || cfg.Samples < 1 || cfg.Concurrency < 1 {
				return usage("--executions, --window, --samples and --concurrency must be positive")
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
			return bench.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Executions, "executions", 20000, "executions in the throughput phase")
	f.IntVar(&cfg.Window, "window", 1000, "triggers unfinished at once in the throughput phase")
	f.IntVar(&cfg.Samples, "samples", 500, "latency samples, one trigger at a time")
	f.IntVar(&cfg.Concurrency, "concurrency", 64, "router and worker concurrency")
	f.IntVar(&cfg.Rounds, "rounds", 3, "rounds of (skillbus, baseline), alternating; the report quotes the median ratio")
	f.DurationVar(&cfg.SyncInterval, "sync-interval", 0, "JetStream fsync interval (0: server default, 2m)")
	f.StringVar(&storage, "storage", "file", "stream storage: file or memory")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (server included) to this file")
	return cmd
}
