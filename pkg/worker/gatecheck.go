package worker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
)

// Nothing strands, whatever a worker misses.
//
// A free releases a waiting run because the watchers see it: a delete, or the
// server's marker of a slot that expired. Two things can break that. The free may
// never be seen: the marker not written (a full store, a server restart at that
// moment) or gone before a watcher that was away came back. And a released run
// may not take the slot it was given: cancelled, or ended meanwhile by another
// copy of its job; the free is then used up with the slot still free. Both leave
// waiting runs with a free slot and no one to release them.
//
// So a released run's job names its gate (events.HeaderConcGate), and a delivery
// of it that ends without going through the slots passes the turn on: it checks
// the gate's slots in KV and releases as many waiting runs as are free. And every
// worker checks, every half ack wait, each gate with waiting runs in its view of
// which it has seen no free or release for an ack wait. Renewals and takes do not
// count: a gate whose other slots are held by live runs would otherwise never be
// checked, and its lost slot never found. So a gate whose runs are long and whose
// waiting runs wait costs each worker one read of its slots per ack wait; a gate
// with no waiting run costs nothing. A check also corrects the view: a slot it
// shows taken that KV shows free is dropped, since a run tries few of the slots the
// view shows taken and would rarely find it; and a released run that finds no
// slot of its gate free corrects its worker's view the same way before it waits
// again (that worker may not have checked yet). Releases go through releaseNext,
// the same oldest-first, one-message-id release as a seen free, so workers that
// check at once publish the same run once; and a worker that sees another's
// release (its waiting record deleted) counts it as its own, so that it does not
// release a second run for the same free before the first takes it.

// checkGates checks the quiet gates every half ack wait until ctx ends.
func (w *Worker) checkGates(ctx context.Context) {
	t := time.NewTicker(w.cfg.AckWait / 2)
	defer t.Stop()
	g := &w.gates
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var quiet []string
		g.mu.Lock()
		for gate, at := range g.seen {
			if time.Since(at) >= w.cfg.AckWait {
				quiet = append(quiet, gate)
			}
		}
		g.mu.Unlock()
		for _, gate := range quiet {
			w.recheck(ctx, gate)
		}
	}
}

// passTurn is called when a delivery of a run released for a slot of gate ends:
// if it settled (err nil) without going through the slots, the turn it was given
// goes to the gate's next waiting run.
func (w *Worker) passTurn(ctx context.Context, j *job, gate string, err error) {
	if err != nil || j.gated || ctx.Err() != nil {
		return
	}
	if _, ok := events.ConcSlotGate(events.ConcSlotKey(gate, 0)); !ok {
		return // not a gate: not ours
	}
	w.recheck(ctx, gate)
}

// recheck releases as many of gate's waiting runs as KV shows slots free.
func (w *Worker) recheck(ctx context.Context, gate string) {
	g := &w.gates
	g.mu.Lock()
	n, limit, rctx := len(g.waiting[gate]), w.gateLimit(gate), g.ctx
	g.mu.Unlock()
	if n == 0 || rctx == nil {
		return
	}
	free, err := n, error(nil)
	if limit < noLimit {
		free, err = w.reconcile(ctx, gate, limit)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Warn("worker: could not check the slots of a concurrency gate with waiting runs", "gate", gate, "err", err)
		}
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.seen[gate]; ok {
		g.seen[gate] = time.Now()
	}
	free = min(free, len(g.waiting[gate]))
	if free > 0 {
		w.cfg.Log.Info("worker: releasing runs waiting for concurrency slots that are free", "gate", gate, "free", free)
	}
	for range free {
		w.releaseNext(rctx, gate)
	}
}

// reconcile reads gate's slots in KV, drops from the view each slot it shows
// taken that KV shows free (a free no watcher saw: without this, no run would
// try that slot first again, and a run tries few of those the view shows taken),
// and returns the number of free slots.
func (w *Worker) reconcile(ctx context.Context, gate string, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.AckWait)
	defer cancel()
	taken := make([]bool, limit)
	if limit > 16 {
		// One listing rather than a read per slot.
		l, err := w.runs.ListKeysFiltered(ctx, gate+".*")
		if err != nil {
			return 0, err
		}
		for k := range l.Keys() {
			if gk, ok := events.ConcSlotGate(k); ok && gk == gate {
				if n, err := strconv.Atoi(k[len(gate)+1:]); err == nil && n >= 0 && n < limit {
					taken[n] = true
				}
			}
		}
	} else {
		for n := range limit {
			_, err := w.runs.Get(ctx, events.ConcSlotKey(gate, n))
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			case err != nil:
				return 0, err
			default:
				taken[n] = true
			}
		}
	}
	// Slots at or above the limit, held under a higher limit since lowered,
	// count against it while they are held: those the view shows are read too.
	var above []int
	w.gates.mu.Lock()
	for n := range w.gates.slots[gate] {
		if n >= limit {
			above = append(above, n)
		}
	}
	w.gates.mu.Unlock()
	held := 0
	var gone []int
	for _, n := range above {
		_, err := w.runs.Get(ctx, events.ConcSlotKey(gate, n))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			gone = append(gone, n)
		case err != nil:
			return 0, err
		default:
			held++
		}
	}
	free := 0
	g := &w.gates
	g.mu.Lock()
	defer g.mu.Unlock()
	shown := g.slots[gate]
	for _, n := range gone {
		delete(shown, n)
	}
	for n, t := range taken {
		if t {
			continue
		}
		free++
		// A take written after the read is dropped too: the view is only where
		// runs try first, and the take's next renewal puts it back.
		delete(shown, n)
	}
	if shown != nil && len(shown) == 0 {
		delete(g.slots, gate)
	}
	return max(0, free-held), nil
}
