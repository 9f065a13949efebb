package worker

import (
	"context"
	"time"
)

// laneCheck is how often a worker looks for jobs on the lanes of the pools it
// serves without lanes.
//
// A job can land on a lane of a pool that no longer has a queue_priority skill:
// a run planned, or put to sleep, while its skill had one is published again
// (resumed, released from a slot, sent on to a fallback) on the lane its
// priority names. A worker that served the lanes when the skill lost its
// queue_priority goes on serving them, and one that starts serves them if they
// hold jobs; a worker started between the change and the job's return would not
// see the job without this check.
const laneCheck = 30 * time.Second

// watchLeftLanes serves, until ctx ends, the lanes of every served pool whose
// lanes hold jobs that nothing of this worker pulls.
func (w *Worker) watchLeftLanes(ctx context.Context) {
	every := w.prio.check
	if every <= 0 {
		every = laneCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.serveLeftLanes(ctx)
	}
}

// serveLeftLanes starts the lanes of the served pools that have none and whose
// lanes hold jobs.
func (w *Worker) serveLeftLanes(ctx context.Context) {
	w.prio.mu.Lock()
	var pools []string
	for _, pool := range w.cfg.Pools {
		if w.prio.pools[pool] == nil && w.loops[pool] != nil {
			pools = append(pools, pool)
		}
	}
	w.prio.mu.Unlock()
	for _, pool := range pools {
		if !w.lanesLeft(ctx, pool) {
			continue
		}
		w.prio.mu.Lock()
		if w.prio.pools[pool] == nil && w.loops[pool] != nil {
			w.cfg.Log.Info("worker: the lanes of a pool hold jobs though none of its skills has queue_priority; serving them", "pool", pool)
			if err := w.serveLanes(ctx, pool, nil); err != nil && ctx.Err() == nil {
				w.cfg.Log.Error("worker: cannot serve the queue priority lanes of a pool", "pool", pool, "err", err)
			}
		}
		w.prio.mu.Unlock()
	}
}
