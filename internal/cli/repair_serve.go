package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// repairServeCommand runs the repair service as its own process: the one writer
// of KV repairs, under its own NATS user, so that nothing a worker holds can
// write a repair, let alone approve one.
func repairServeCommand(c *common, getenv Env, stderr io.Writer) *cobra.Command {
	var rf workerFlags
	var o observe
	var ensureStreams bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the repair service: park executions for workers, propose patches, publish approved ones",
		Long: `serve runs the repair service. Workers started with --repair ask it (on the REPAIR
stream) to park an execution that failed with a repairable fault; it records the
execution and, once per skill version and fault, a repair, proposes a patch
(deterministic repairers, then the chat model of --llm-url when set), and when the
repair is approved — by an operator with 'skillbus repair approve', or at once for a
skill that says repair: auto — asks the registry to publish the patched version and
runs the parked executions again on it. It alone writes the repairs bucket: run it
as the NATS user repair (docs/operations.md, "Security model"). Run one or more;
they share the work.`,
		Example: `  SKILLBUS_NATS_USER=repair SKILLBUS_NATS_PASSWORD=... skillbus repair serve --ensure=false
  skillbus repair serve --llm-url https://api.openai.com/v1 --llm-model gpt-4o-mini`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			tel, log, stopTel, err := o.start(cmd.Context(), "skillbus-repair", log)
			if err != nil {
				return err
			}
			defer stopTel()
			tb := &toolbox{}
			if rf.llmURL != "" {
				if rf.llmModel == "" {
					return usage("--llm-url needs --llm-model (or $SKILLBUS_LLM_MODEL)")
				}
				if tb.chat, err = llm.New(llm.Config{URL: rf.llmURL, Model: rf.llmModel, APIKey: rf.llmKey, Timeout: rf.llmTimeout}); err != nil {
					return usage("--llm-url: %v", err)
				}
			}
			b, err := c.connectWait(cmd.Context(), "skillbus-repair", log)
			if err != nil {
				return err
			}
			defer b.Drain()
			watchBus(tel, b)
			o.watchStore(tel, b)
			if err := startRetry(cmd.Context(), log, "repair service", func() error {
				return ensure(cmd.Context(), b, ensureStreams, log, repairNeeds(b))
			}); err != nil {
				return err
			}
			if tb.files, err = catalog.NewFiles(catalog.FilesConfig{Stores: b, Bucket: catalog.FilesBucket(b)}); err != nil {
				return err
			}
			var stop func(context.Context)
			if err := startRetry(cmd.Context(), log, "repair service", func() (err error) {
				stop, err = startRepair(cmd.Context(), b, log, rf, tb, tel.Metrics)
				return err
			}); err != nil {
				return err
			}
			watchConsumer(tel, b, "", b.StreamRepair(), "repair")
			log.Info("repair service: running", "nats", c.natsURL, "auto", rf.repairAuto, "chat", rf.llmURL != "")
			<-cmd.Context().Done()
			shutdown(log, stop)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&ensureStreams, "ensure", true, "create or update the streams and buckets at start (turn off where this process's NATS user may not)")
	rf.llmKey = getenv("SKILLBUS_LLM_API_KEY")
	f.StringVar(&rf.llmURL, "llm-url", getenv("SKILLBUS_LLM_URL"), "OpenAI-compatible chat-completions URL of the model that proposes patches when no deterministic repairer has one ($SKILLBUS_LLM_URL; the key comes from $SKILLBUS_LLM_API_KEY)")
	f.StringVar(&rf.llmModel, "llm-model", getenv("SKILLBUS_LLM_MODEL"), "chat model name ($SKILLBUS_LLM_MODEL)")
	f.DurationVar(&rf.llmTimeout, "llm-timeout", 2*time.Minute, "timeout of one chat request")
	rf.registerRepair(cmd, "")
	c.registerRetention(cmd, getenv)
	o.register(cmd, getenv)
	return cmd
}

// repairNeeds: the catalog, repairs, and the skill files.
func repairNeeds(b *bus.Bus) needs {
	return needs{buckets: []string{b.BucketSkills(), b.BucketRepairs()}, objectStores: []string{catalog.FilesBucket(b)}}
}
