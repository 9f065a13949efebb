package cli

import (
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/embedrecall"
	"github.com/skillbus/skillbus/pkg/llmrecall"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// routingFlags are the router's routing knobs: the decision and the optional recall
// sources. Names start with route- or recall- so they do not clash with the worker's
// flags in `skillbus dev`.
type routingFlags struct {
	threshold              float64
	maxActive              int
	weights, generic       string
	textFields             []string
	recallTimeout          time.Duration
	embedURL, embedModel   string
	recallURL, recallModel string
}

func (r *routingFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Float64Var(&r.threshold, "route-threshold", selector.DefaultThreshold, "score a skill needs to be selected by relevance")
	f.IntVar(&r.maxActive, "route-max-active", 3, "most skills a plan selects (primary, parallel partners, fallbacks)")
	f.StringVar(&r.weights, "route-weights", "", "score weights, e.g. intent=.4,trigger=.2,success=.15,context=.1,cost=.1,conflict=.05")
	f.StringVar(&r.generic, "route-generic", "", "a skill appended to every fallback chain")
	f.StringSliceVar(&r.textFields, "route-text-fields", nil, "trigger data fields the routing text comes from (default query,text,message,prompt)")
	f.DurationVar(&r.recallTimeout, "recall-timeout", 2*time.Second, "how long routing waits for embeddings or the recall model before going on without them")
	f.StringVar(&r.embedURL, "embed-url", os.Getenv("SKILLBUS_EMBED_URL"), "OpenAI-compatible embeddings URL for semantic recall; off when empty ($SKILLBUS_EMBED_URL; key from $SKILLBUS_EMBED_API_KEY)")
	f.StringVar(&r.embedModel, "embed-model", os.Getenv("SKILLBUS_EMBED_MODEL"), "embedding model name ($SKILLBUS_EMBED_MODEL)")
	f.StringVar(&r.recallURL, "recall-llm-url", os.Getenv("SKILLBUS_RECALL_LLM_URL"), "OpenAI-compatible chat-completions URL asked which skills fit a request; off when empty ($SKILLBUS_RECALL_LLM_URL; key from $SKILLBUS_RECALL_LLM_API_KEY)")
	f.StringVar(&r.recallModel, "recall-llm-model", os.Getenv("SKILLBUS_RECALL_LLM_MODEL"), "chat model for recall ($SKILLBUS_RECALL_LLM_MODEL)")
}

// apply puts the routing knobs into a router configuration.
func (r *routingFlags) apply(cfg *router.Config, log *slog.Logger) error {
	sf := selectorFlags{threshold: r.threshold, maxActive: r.maxActive, generic: r.generic, weights: r.weights}
	sc, err := sf.config()
	if err != nil {
		return err
	}
	cfg.Selector, cfg.TextFields, cfg.RecallTimeout = sc, r.textFields, r.recallTimeout
	if r.embedURL != "" {
		if r.embedModel == "" {
			return usage("--embed-url needs --embed-model")
		}
		e, err := embedrecall.New(embedrecall.Config{URL: r.embedURL, Model: r.embedModel, APIKey: os.Getenv("SKILLBUS_EMBED_API_KEY"), Log: log})
		if err != nil {
			return usage("--embed-url: %v", err)
		}
		cfg.Recallers = append(cfg.Recallers, e)
	}
	if r.recallURL != "" {
		if r.recallModel == "" {
			return usage("--recall-llm-url needs --recall-llm-model")
		}
		c, err := llm.New(llm.Config{URL: r.recallURL, Model: r.recallModel, APIKey: os.Getenv("SKILLBUS_RECALL_LLM_API_KEY"), Timeout: r.recallTimeout})
		if err != nil {
			return usage("--recall-llm-url: %v", err)
		}
		lr, _ := llmrecall.New(llmrecall.Config{Chat: c})
		cfg.Recallers = append(cfg.Recallers, lr)
	}
	return nil
}
