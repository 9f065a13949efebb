package worker

import (
	"context"
	"fmt"
	"sync"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Skills is the optional part of a VersionLookup that lets a worker serve the pools of
// skills with max_concurrent; *catalog.Catalog implements it. Without it a worker
// serves only its configured pools.
type Skills interface {
	All() []*skill.Skill
	Revision() uint64
	// Changed blocks until the revision is past after, or ctx ends.
	Changed(ctx context.Context, after uint64) error
}

// Solo pools.
//
// A skill with max_concurrent: N runs in a pool of its own, "solo-<name>", whose one
// durable consumer — shared by every worker that serves the skill's base pool — has
// MaxAckPending N: JetStream hands out at most N of its jobs at a time across the
// whole fleet, however many workers there are. Workers find such skills in the
// catalog and start (or resize) the consumer when one appears or changes; a worker
// runs at most min(N, Concurrency) of them itself.
type solo struct {
	mu    sync.Mutex
	loops map[string]*soloLoop // by pool
}

type soloLoop struct {
	limit int
	loop  *bus.Loop
}

// watchSolo follows the catalog and serves the solo pools of skills whose base pool
// this worker serves, until ctx ends.
func (w *Worker) watchSolo(ctx context.Context, cat Skills) {
	var rev uint64
	for {
		rev = cat.Revision()
		all := cat.All()
		w.syncCurrent(ctx, all)
		w.syncSolo(ctx, all)
		w.syncLanes(ctx, all)
		if err := cat.Changed(ctx, rev); err != nil {
			return
		}
	}
}

func (w *Worker) syncSolo(ctx context.Context, skills []*skill.Skill) {
	served := make(map[string]bool, len(w.cfg.Pools))
	for _, p := range w.cfg.Pools {
		served[p] = true
	}
	w.solo.mu.Lock()
	defer w.solo.mu.Unlock()
	if w.solo.loops == nil {
		w.solo.loops = map[string]*soloLoop{}
	}
	for _, s := range skills {
		if s.MaxConcurrent <= 0 || !served[s.BasePool()] {
			continue
		}
		pool := skill.SoloPool(s.Name)
		if cur, ok := w.solo.loops[pool]; ok && cur.limit == s.MaxConcurrent {
			continue
		}
		if err := w.serveSolo(ctx, pool, s.MaxConcurrent); err != nil {
			if ctx.Err() == nil {
				w.cfg.Log.Error("worker: cannot serve the pool of a skill with max_concurrent", "skill", s.Name, "pool", pool, "err", err)
			}
		}
	}
}

// serveSolo creates or resizes a solo pool's consumer and runs its loop. Callers hold
// w.solo.mu.
func (w *Worker) serveSolo(ctx context.Context, pool string, limit int) error {
	b := w.cfg.Bus
	cc := w.ConsumerConfig(pool)
	cc.MaxAckPending = limit
	cc.Description = fmt.Sprintf("skillbus workers of %s: at most %d at once across the fleet", pool, limit)
	c, err := b.EnsureConsumer(ctx, b.StreamJobs(), cc)
	if err != nil {
		return err
	}
	if cur, ok := w.solo.loops[pool]; ok {
		cur.loop.Stop(ctx)
		delete(w.solo.loops, pool)
	}
	l, err := bus.Consume(c, min(limit, w.cfg.Concurrency), w.handle, w.cfg.Log)
	if err != nil {
		return err
	}
	w.solo.loops[pool] = &soloLoop{limit: limit, loop: l}
	w.cfg.Log.Info("worker: serving the pool of a skill with max_concurrent", "pool", pool, "max_concurrent", limit)
	return nil
}

// stopSolo stops every solo loop.
func (w *Worker) stopSolo(ctx context.Context) {
	w.solo.mu.Lock()
	loops := w.solo.loops
	w.solo.loops = nil
	w.solo.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { l.loop.Stop(ctx) })
	}
	wg.Wait()
}
