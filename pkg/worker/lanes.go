package worker

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Queue priority lanes.
//
// A run of a skill with queue_priority p ≠ 0 is queued as if enqueued p seconds
// earlier. JetStream hands a consumer's messages out in stream order, and its
// priority groups order the clients that pull, not the messages, so the router
// publishes such a job on a lane of its pool (events.Lane, events.LanePool):
// one consumer per lane, beside the pool's own. A worker that serves a pool
// with queue_priority skills pulls every lane of it and runs what it holds
// best first — by enqueue time less priority, then stream order — within one
// budget of Concurrency slots for the whole pool. A job at the head of its
// lane is held at once, whatever waits in the other lanes, so a high-priority
// run starts at the next free slot.
//
// A pool without queue_priority skills keeps its one consumer and runs its
// jobs straight from it: nothing here is on its path. A worker finds the pools
// with priorities in the catalog (and serves the lanes of a pool whose lanes
// still hold jobs after its last such skill went).

// laneWarmup bounds how long a worker that starts with jobs queued in several
// lanes of a pool waits for each of those lanes' first delivery before it runs
// anything: without it, the first job to arrive would take the first slot
// whatever its priority.
const laneWarmup = 2 * time.Second

// laneHandlers is how many deliveries of one lane a worker holds, running or
// waiting: its slots and as many more, at least laneWindow, so that however
// many of the lane's jobs run, that many more wait for the next free slot
// beside the other lanes' — the window within which the worker orders jobs
// exactly.
func laneHandlers(concurrency int) int { return concurrency + max(concurrency, laneWindow) }

// laneWindow is the fewest jobs of a lane a worker holds waiting.
const laneWindow = 8

// prioPools are the lanes of the pools this worker serves with priorities.
type prioPools struct {
	mu    sync.Mutex
	pools map[string]*lanes
	// swapped are the plain loops replaced by lanes, finishing what they hold.
	swapped sync.WaitGroup
	// check is how often the lanes of pools served without them are looked at
	// (watchLeftLanes); 0 is laneCheck.
	check time.Duration
}

// lanes runs the jobs of one pool's lanes, best first, in a budget of slots.
type lanes struct {
	pool    string
	h       bus.Handler
	ackWait time.Duration
	loops   []*bus.Loop // the lanes' loops, not the pool's own (in Worker.loops)

	mu      sync.Mutex
	free    int
	waiting laneHeap
	closing bool
	// expect are the lanes (by lane number) that held jobs when the lanes
	// started and have not delivered one yet: nothing runs before they have,
	// or laneWarmup passed.
	expect map[int]bool
	warm   *time.Timer
}

// laneWaiter is a delivery waiting for a slot.
type laneWaiter struct {
	msg     jetstream.Msg
	key     int64  // enqueue time less priority, unix nanos
	seq     uint64 // stream sequence, for jobs of the same key
	ready   chan struct{}
	granted bool
	index   int
}

type laneHeap []*laneWaiter

func (h laneHeap) Len() int { return len(h) }
func (h laneHeap) Less(i, j int) bool {
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].seq < h[j].seq
}
func (h laneHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *laneHeap) Push(x any) {
	wt := x.(*laneWaiter)
	wt.index = len(*h)
	*h = append(*h, wt)
}
func (h *laneHeap) Pop() any {
	old := *h
	wt := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	wt.index = -1
	return wt
}

// queuePriorityPools says which of the pools served have a skill with
// queue_priority.
func (w *Worker) queuePriorityPools(skills []*skill.Skill) map[string]bool {
	served := make(map[string]bool, len(w.cfg.Pools))
	for _, p := range w.cfg.Pools {
		served[p] = true
	}
	var out map[string]bool
	for _, s := range skills {
		if s.QueuePriority == "" || s.MaxConcurrent > 0 || !served[s.BasePool()] {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[s.BasePool()] = true
	}
	return out
}

// lanesLeft says whether a pool's lanes hold jobs, pending or in hand: a pool
// whose last queue_priority skill went is still served on its lanes until they
// are empty, so that no job is stranded there.
func (w *Worker) lanesLeft(ctx context.Context, pool string) bool {
	b := w.cfg.Bus
	for _, lane := range events.Lanes {
		c, err := b.Consumer(ctx, b.StreamJobs(), w.ConsumerConfig(events.LanePool(pool, lane)).Durable)
		if err != nil {
			continue
		}
		if info := c.CachedInfo(); info != nil && (info.NumPending > 0 || info.NumAckPending > 0) {
			return true
		}
	}
	return false
}

// startLanes creates the lanes' consumers of a pool and starts pulling them;
// base is the pool's own consumer, whose loop the caller starts with the
// returned lanes' handler(0).
func (w *Worker) startLanes(ctx context.Context, pool string, base jetstream.Consumer) (*lanes, error) {
	b := w.cfg.Bus
	s := &lanes{pool: pool, h: w.handle, ackWait: w.cfg.AckWait, free: w.cfg.Concurrency, expect: map[int]bool{}}
	cons := make(map[int]jetstream.Consumer, len(events.Lanes)+1)
	cons[0] = base
	for _, lane := range events.Lanes {
		cc := w.ConsumerConfig(events.LanePool(pool, lane))
		cc.Description = fmt.Sprintf("skillbus workers of pool %s: jobs of queue priority lane %d", pool, lane)
		c, err := b.EnsureConsumer(ctx, b.StreamJobs(), cc)
		if err != nil {
			return nil, fmt.Errorf("consumer for lane %d of pool %s: %w", lane, pool, err)
		}
		cons[lane] = c
	}
	for lane, c := range cons {
		// Jobs handed back by a worker that stopped are ack-pending until they
		// are delivered again, not pending; those another worker runs are too,
		// and then the wait lasts its bound.
		if info := c.CachedInfo(); info != nil && (info.NumPending > 0 || info.NumAckPending > 0) {
			s.expect[lane] = true
		}
	}
	if len(s.expect) > 1 {
		s.warm = time.AfterFunc(w.warmup, func() {
			s.mu.Lock()
			clear(s.expect)
			s.dispatch()
			s.mu.Unlock()
		})
	} else {
		clear(s.expect) // one lane with jobs: its order is the order
	}
	for _, lane := range events.Lanes {
		l, err := bus.Consume(cons[lane], laneHandlers(w.cfg.Concurrency), s.handler(lane), w.cfg.Log)
		if err != nil {
			s.stop(ctx)
			return nil, err
		}
		s.loops = append(s.loops, l)
	}
	w.cfg.Log.Info("worker: serving the queue priority lanes of a pool", "pool", pool)
	return s, nil
}

// handler runs a delivery of a lane when it is the best held and a slot is
// free; it hands the delivery back when the lanes stop first.
func (s *lanes) handler(lane int) bus.Handler {
	return func(ctx context.Context, msg jetstream.Msg) {
		if !s.acquire(ctx, msg, lane) {
			return // handed back
		}
		defer s.release()
		s.h(ctx, msg)
	}
}

// acquire waits for a slot for msg, telling JetStream it is in hand meanwhile;
// false when it handed msg back instead (the lanes stopped, or ctx ended).
func (s *lanes) acquire(ctx context.Context, msg jetstream.Msg, lane int) bool {
	wt := &laneWaiter{msg: msg, ready: make(chan struct{})}
	if md, err := msg.Metadata(); err == nil {
		wt.key, wt.seq = md.Timestamp.UnixNano(), md.Sequence.Stream
	} else {
		wt.key = time.Now().UnixNano()
	}
	if p := queuePriorityOf(msg); p != 0 {
		wt.key -= int64(p) * int64(time.Second)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = msg.Nak()
		return false
	}
	if len(s.expect) > 0 && s.expect[lane] {
		delete(s.expect, lane)
		if len(s.expect) == 0 && s.warm != nil {
			s.warm.Stop()
		}
	}
	heap.Push(&s.waiting, wt)
	s.dispatch()
	granted := wt.granted
	s.mu.Unlock()
	if granted { // a slot was free: no wait, no timer
		return true
	}
	t := time.NewTimer(s.ackWait / 3)
	defer t.Stop()
	for {
		select {
		case <-wt.ready:
			return wt.granted
		case <-t.C:
			_ = msg.InProgress()
			t.Reset(s.ackWait / 3)
		case <-ctx.Done():
			s.mu.Lock()
			if wt.index >= 0 {
				heap.Remove(&s.waiting, wt.index)
				s.mu.Unlock()
				_ = msg.Nak()
				return false
			}
			s.mu.Unlock()
			<-wt.ready
			return wt.granted
		}
	}
}

// dispatch grants free slots to the best waiting deliveries. Callers hold s.mu.
func (s *lanes) dispatch() {
	for s.free > 0 && len(s.waiting) > 0 && len(s.expect) == 0 {
		wt := heap.Pop(&s.waiting).(*laneWaiter)
		s.free--
		wt.granted = true
		close(wt.ready)
	}
}

func (s *lanes) release() {
	s.mu.Lock()
	s.free++
	s.dispatch()
	s.mu.Unlock()
}

// close hands back every delivery waiting for a slot, best first, so that the
// server delivers them again in that order; and any that arrives after.
func (s *lanes) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	if s.warm != nil {
		s.warm.Stop()
	}
	for len(s.waiting) > 0 {
		wt := heap.Pop(&s.waiting).(*laneWaiter)
		_ = wt.msg.Nak()
		close(wt.ready)
	}
}

// stop closes the lanes and stops their loops (not the pool's own).
func (s *lanes) stop(ctx context.Context) {
	s.close()
	var wg sync.WaitGroup
	for _, l := range s.loops {
		wg.Go(func() { l.Stop(ctx) })
	}
	wg.Wait()
}

// queuePriorityOf is a job's queue priority, from its header; 0 without one.
func queuePriorityOf(msg jetstream.Msg) int {
	h := msg.Headers()
	if h == nil {
		return 0
	}
	v := h.Get(events.HeaderQueuePriority)
	if v == "" {
		return 0
	}
	p, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return min(max(p, flow.MinPriority), flow.MaxPriority)
}

// syncLanes starts the lanes of a served pool that has gained a queue_priority
// skill: its plain loop is replaced by one that shares the lanes' slots, and
// finishes what it holds in the background.
func (w *Worker) syncLanes(ctx context.Context, skills []*skill.Skill) {
	want := w.queuePriorityPools(skills)
	if len(want) == 0 {
		return
	}
	w.prio.mu.Lock()
	defer w.prio.mu.Unlock()
	for _, pool := range w.cfg.Pools {
		if !want[pool] || w.prio.pools[pool] != nil || w.loops[pool] == nil {
			continue
		}
		if err := w.serveLanes(ctx, pool, nil); err != nil && ctx.Err() == nil {
			w.cfg.Log.Error("worker: cannot serve the queue priority lanes of a pool", "pool", pool, "err", err)
		}
	}
}

// serveLanes starts pool's lanes and its own loop sharing their slots, on its
// consumer c (nil: ensured here), in place of its plain loop when there is one.
// Callers hold w.prio.mu.
func (w *Worker) serveLanes(ctx context.Context, pool string, c jetstream.Consumer) error {
	b := w.cfg.Bus
	if c == nil {
		var err error
		if c, err = b.EnsureConsumer(ctx, b.StreamJobs(), w.ConsumerConfig(pool)); err != nil {
			return err
		}
	}
	s, err := w.startLanes(ctx, pool, c)
	if err != nil {
		return err
	}
	old := w.loops[pool]
	if old != nil {
		// The plain loop's runs count against the pool's Concurrency too: the
		// lanes get their slots when it has stopped and its runs have ended. The
		// lanes' loops run already: their dispatch reads free under s.mu.
		s.mu.Lock()
		s.free = 0
		s.mu.Unlock()
	}
	l, err := bus.Consume(c, laneHandlers(w.cfg.Concurrency), s.handler(0), w.cfg.Log)
	if err != nil {
		s.stop(ctx)
		return err
	}
	if w.prio.pools == nil {
		w.prio.pools = map[string]*lanes{}
	}
	w.prio.pools[pool] = s
	if old != nil {
		w.prio.swapped.Go(func() {
			old.Stop(context.WithoutCancel(ctx))
			s.mu.Lock()
			s.free += w.cfg.Concurrency
			s.dispatch()
			s.mu.Unlock()
		})
	}
	w.loops[pool] = l
	return nil
}

// stopLanes hands back what the lanes hold and stops their loops; the pools'
// own loops are stopped with the others.
func (w *Worker) stopLanes(ctx context.Context) {
	w.prio.mu.Lock()
	pools := w.prio.pools
	w.prio.pools = nil
	w.prio.mu.Unlock()
	for _, s := range pools {
		s.close()
	}
	var wg sync.WaitGroup
	for _, s := range pools {
		wg.Go(func() { s.stop(ctx) })
	}
	wg.Wait()
	w.prio.swapped.Wait()
}

// lanesAtStart are the served pools to start with lanes: those with a
// queue_priority skill in the catalog, and those whose lanes still hold jobs.
func (w *Worker) lanesAtStart(ctx context.Context) map[string]bool {
	cat, ok := w.cfg.Catalog.(Skills)
	if !ok {
		return nil
	}
	out := w.queuePriorityPools(cat.All())
	for _, pool := range w.cfg.Pools {
		if !out[pool] && w.lanesLeft(ctx, pool) {
			if out == nil {
				out = map[string]bool{}
			}
			out[pool] = true
		}
	}
	return out
}
