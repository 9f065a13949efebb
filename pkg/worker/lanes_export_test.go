package worker

import "time"

// LaneWaiting is how many jobs of a pool w holds waiting for a slot whose
// queue priority is prio.
func LaneWaiting(w *Worker, pool string, prio int) int {
	w.prio.mu.Lock()
	s := w.prio.pools[pool]
	w.prio.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, wt := range s.waiting {
		if queuePriorityOf(wt.msg) == prio {
			n++
		}
	}
	return n
}

// ServesLanes says whether w serves the lanes of pool, its own loop swapped
// for the one that shares their slots.
func ServesLanes(w *Worker, pool string) bool {
	w.prio.mu.Lock()
	defer w.prio.mu.Unlock()
	return w.prio.pools[pool] != nil
}

// SetLaneWarmup sets how long w, not started yet, waits at its start for the
// first delivery of each lane of a pool that holds jobs (laneWarmup).
func SetLaneWarmup(w *Worker, d time.Duration) { w.warmup = d }

// SetLaneCheck sets how often w, not started yet, looks for jobs on the lanes
// of pools it serves without them (laneCheck).
func SetLaneCheck(w *Worker, d time.Duration) { w.prio.check = d }
