package cli

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/telemetry"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/schedule"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/mcptool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// routerFlags are the router's knobs, shared by `router` and `skillbus dev`.
type routerFlags struct {
	concurrency   int
	maxEventBytes int
	ackWait       time.Duration
	routing       routingFlags
	// events: the fleet's events level (the router's own --events flag; in dev the
	// workers' one).
	events string
}

// workerFlags are the worker's knobs, shared by `worker` and `skillbus dev`.
type workerFlags struct {
	pools          []string
	concurrency    int
	ackWait        time.Duration
	backoffBase    time.Duration
	backoffMax     time.Duration
	name           string
	execDir        string
	execPath       string
	execLimits     execLimitFlags
	maxDepth       int
	crashAllowance int
	confirmTimeout time.Duration
	events         string

	llmURL, llmModel, llmKey string
	llmTimeout               time.Duration
	llmMaxTurns              int
	mcpConfig                string
	busTools                 bool
	busToolsInterval         time.Duration
	getenv                   Env

	// Repair: park repairable failures on repair jobs and run a repair worker.
	repair       bool
	repairAuto   bool
	repairExpiry time.Duration
	// repairAckWait: how long a repair job may go without a sign of life before
	// another repair worker gets it.
	repairAckWait time.Duration
	repairBudget  repair.Budget
}

// startRouter starts a router on b with its own catalog watch; stop undoes it.
func startRouter(ctx context.Context, b *bus.Bus, log *slog.Logger, f routerFlags, tel *telemetry.Telemetry) (stop func(context.Context), err error) {
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cat, err := watchCatalog(ctx, tel, "catalog router", kv, log)
	if err != nil {
		return nil, err
	}
	rc := router.Config{Bus: b, Catalog: cat, Log: log, MaxEventBytes: f.maxEventBytes, Concurrency: f.concurrency, AckWait: f.ackWait, Metrics: tel.Metrics,
		Events: events.Level(f.events)}
	if err := f.routing.apply(&rc, log); err != nil {
		cat.Stop()
		return nil, err
	}
	r, err := router.New(rc)
	if err != nil {
		cat.Stop()
		return nil, usage("%v", err)
	}
	if err := r.Start(ctx); err != nil {
		cat.Stop()
		return nil, err
	}
	// Every router is a candidate to fire the schedules and delayed triggers;
	// one leads (package schedule).
	sch, err := schedule.New(schedule.Config{Bus: b, Catalog: cat, Log: log})
	if err == nil {
		err = sch.Start(ctx)
	}
	if err != nil {
		r.Stop(ctx)
		cat.Stop()
		return nil, err
	}
	return func(ctx context.Context) { sch.Stop(ctx); r.Stop(ctx); cat.Stop() }, nil
}

// startWorker starts a worker on b with its own catalog watch and the built-in tools.
// toolbox is what a worker process's workers share: the tools (built-ins, the skill
// tool, the llm tool, MCP servers' tools, and tools discovered on the bus), the
// workflow engine, the instruction runner and the skill-files reader. `skillbus dev`
// builds one for all its workers, so MCP servers are started once.
type toolbox struct {
	watcher *bustool.Watcher
	mcp     *mcptool.Client
	engine  *workflow.Engine
	runner  *instruct.Runner
	files   *catalog.Files
	exec    tool.ExecConfig
	chat    *llm.Client // the worker's chat model, if configured
}

func newToolbox(ctx context.Context, b *bus.Bus, log *slog.Logger, f workerFlags) (*toolbox, error) {
	tb := &toolbox{exec: tool.ExecConfig{WorkDir: f.execDir, Log: log}}
	if f.execPath != "" {
		tb.exec.BaseEnv = []string{"PATH=" + f.execPath}
	}
	if err := f.execLimits.apply(&tb.exec); err != nil {
		return nil, err
	}
	base := []tool.Tool{tool.NewHTTP(tool.HTTPConfig{}), tool.NewExec(tb.exec), tool.Echo(), tool.Noop(), worker.SkillTool(b, f.maxDepth)}
	var model instruct.Model
	if f.llmURL != "" {
		if f.llmModel == "" {
			return nil, usage("--llm-url needs --llm-model (or $SKILLBUS_LLM_MODEL)")
		}
		c, err := llm.New(llm.Config{URL: f.llmURL, Model: f.llmModel, APIKey: f.llmKey, Timeout: f.llmTimeout})
		if err != nil {
			return nil, usage("--llm-url: %v", err)
		}
		base, model, tb.chat = append(base, llm.NewTool(c)), c, c
	}
	if f.mcpConfig != "" {
		cfg, err := mcptool.LoadConfig(f.mcpConfig, f.getenv)
		if err != nil {
			return nil, usage("--mcp-config: %v", err)
		}
		cfg.Log = log
		if tb.mcp, err = mcptool.Open(ctx, cfg); err != nil {
			return nil, err
		}
		for _, t := range tb.mcp.Tools() {
			base = append(base, t)
		}
	}
	var err error
	tb.watcher, err = bustool.NewWatcher(b.Conn(), bustool.WatcherConfig{Config: bustool.Config{Prefix: b.Subjects.Prefix}, Interval: f.busToolsInterval, Base: base, Log: log})
	if err != nil {
		tb.close()
		return nil, err
	}
	if f.busTools {
		if err := tb.watcher.Start(ctx); err != nil {
			log.Warn("worker: tools on the bus will not be discovered", "err", err)
		}
	}
	if tb.engine, err = workflow.New(workflow.Config{Tools: tb.watcher.Set(), Log: log}); err != nil {
		tb.close()
		return nil, err
	}
	if tb.runner, err = instruct.New(instruct.Config{Model: model, MaxTurns: f.llmMaxTurns, Log: log}); err != nil {
		tb.close()
		return nil, usage("%v", err)
	}
	if tb.files, err = catalog.NewFiles(catalog.FilesConfig{Stores: b, Bucket: catalog.FilesBucket(b)}); err != nil {
		tb.close()
		return nil, err
	}
	return tb, nil
}

func (tb *toolbox) close() {
	if tb.watcher != nil {
		tb.watcher.Stop()
	}
	if tb.mcp != nil {
		_ = tb.mcp.Close()
	}
}

// startWorker starts a worker on b with its own catalog watch and the toolbox's tools.
func startWorker(ctx context.Context, b *bus.Bus, log *slog.Logger, f workerFlags, tb *toolbox, tel *telemetry.Telemetry) (stop func(context.Context), err error) {
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cat, err := watchCatalog(ctx, tel, "catalog worker "+f.name, kv, log)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Config{
		Bus: b, Catalog: cat, Engine: tb.engine, Log: log,
		Tools: tb.watcher, Files: tb.files, Instruct: tb.runner, Exec: tb.exec,
		Pools: f.pools, Concurrency: f.concurrency, AckWait: f.ackWait,
		Backoff: worker.Backoff{Base: f.backoffBase, Max: f.backoffMax}, Name: f.name, MaxDepth: f.maxDepth, CrashAllowance: f.crashAllowance, ConfirmTimeout: f.confirmTimeout,
		Events: events.Level(f.events), Metrics: tel.Metrics, Repair: f.repair,
	})
	if err != nil {
		cat.Stop()
		return nil, usage("%v", err)
	}
	if err := w.Start(ctx); err != nil {
		cat.Stop()
		return nil, err
	}
	return func(ctx context.Context) { w.Stop(ctx); cat.Stop() }, nil
}

// startRegistry publishes the skills under roots and keeps publishing their changes
// (watching the directories) and serves the skillbus-registry micro service.
// problems, if not nil, gets the skill files' problems as compiler-style lines
// instead of the log.
func startRegistry(ctx context.Context, b *bus.Bus, log *slog.Logger, roots []string, problems io.Writer) (*registry.Registry, error) {
	reg, err := registry.New(registry.Config{Bus: b, Roots: roots, Log: log, Problems: problems})
	if err != nil {
		return nil, usage("%v", err)
	}
	if err := reg.Start(ctx); err != nil {
		return nil, err
	}
	return reg, nil
}

// startRepair starts a repair worker: a consumer of the REPAIR stream that proposes
// patches (deterministic repairers, then the worker's chat model when configured) and
// publishes approved ones through the registry service.
func startRepair(ctx context.Context, b *bus.Bus, log *slog.Logger, f workerFlags, tb *toolbox, m *telemetry.Metrics) (stop func(context.Context), err error) {
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Watch(ctx, kv, log)
	if err != nil {
		return nil, err
	}
	cfg := service.Config{
		Bus: b, Catalog: cat, Files: tb.files, Publisher: registry.NewClient(b.Conn(), b.Subjects.Prefix),
		Validate: registry.RepairValidator(skill.LoadOptions{}), Budget: f.repairBudget, Auto: f.repairAuto,
		Expiry: f.repairExpiry, AckWait: f.repairAckWait, Log: log, Metrics: m,
	}
	if tb.chat != nil {
		cfg.Chat = &repair.Chat{Model: tb.chat, Timeout: f.llmTimeout}
	}
	svc, err := service.New(cfg)
	if err != nil {
		cat.Stop()
		return nil, usage("%v", err)
	}
	if err := svc.Start(ctx); err != nil {
		cat.Stop()
		return nil, err
	}
	return func(ctx context.Context) { svc.Stop(ctx); cat.Stop() }, nil
}
