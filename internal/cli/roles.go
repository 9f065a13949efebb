package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// routerFlags are the router's knobs, shared by `router` and `skillbus dev`.
type routerFlags struct {
	concurrency   int
	maxEventBytes int
	ackWait       time.Duration
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
	maxDepth       int
	confirmTimeout time.Duration
}

// startRouter starts a router on b with its own catalog watch; stop undoes it.
func startRouter(ctx context.Context, b *bus.Bus, log *slog.Logger, f routerFlags) (stop func(context.Context), err error) {
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Watch(ctx, kv, log)
	if err != nil {
		return nil, err
	}
	r, err := router.New(router.Config{Bus: b, Catalog: cat, Log: log, MaxEventBytes: f.maxEventBytes, Concurrency: f.concurrency, AckWait: f.ackWait})
	if err != nil {
		cat.Stop()
		return nil, usage("%v", err)
	}
	if err := r.Start(ctx); err != nil {
		cat.Stop()
		return nil, err
	}
	return func(ctx context.Context) { r.Stop(ctx); cat.Stop() }, nil
}

// startWorker starts a worker on b with its own catalog watch and the built-in tools.
func startWorker(ctx context.Context, b *bus.Bus, log *slog.Logger, f workerFlags) (stop func(context.Context), err error) {
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Watch(ctx, kv, log)
	if err != nil {
		return nil, err
	}
	execCfg := tool.ExecConfig{WorkDir: f.execDir}
	if f.execPath != "" {
		execCfg.BaseEnv = []string{"PATH=" + f.execPath}
	}
	tools, err := tool.NewSet(tool.NewHTTP(tool.HTTPConfig{}), tool.NewExec(execCfg), tool.Echo(), tool.Noop(), worker.SkillTool(b, f.maxDepth))
	if err != nil {
		cat.Stop()
		return nil, err
	}
	eng, err := workflow.New(workflow.Config{Tools: tools, Log: log})
	if err != nil {
		cat.Stop()
		return nil, err
	}
	w, err := worker.New(worker.Config{
		Bus: b, Catalog: cat, Engine: eng, Log: log,
		Pools: f.pools, Concurrency: f.concurrency, AckWait: f.ackWait,
		Backoff: worker.Backoff{Base: f.backoffBase, Max: f.backoffMax}, Name: f.name, MaxDepth: f.maxDepth, ConfirmTimeout: f.confirmTimeout,
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

// syncRegistry loads the skills once and publishes them; it returns the registry for
// later syncs.
func syncRegistry(ctx context.Context, b *bus.Bus, log *slog.Logger, roots []string) (*registry.Registry, *registry.Report, error) {
	reg, err := registry.New(registry.Config{Bus: b, Roots: roots, Log: log})
	if err != nil {
		return nil, nil, usage("%v", err)
	}
	rep, err := reg.Sync(ctx)
	if err != nil {
		return nil, nil, err
	}
	return reg, rep, nil
}
