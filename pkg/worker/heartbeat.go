package worker

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/bus"
)

// Heartbeat is what a worker writes to KV workers under its name, every 10s; the
// bucket's TTL removes workers that stop.
type Heartbeat struct {
	Name        string    `json:"name"`
	Pools       []string  `json:"pools"`
	Concurrency int       `json:"concurrency"`
	Started     time.Time `json:"started"`
	Seen        time.Time `json:"seen"`
}

type heartbeat struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startHeartbeat(ctx context.Context, b *bus.Bus, cfg Config) *heartbeat {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &heartbeat{cancel: cancel}
	kv, err := b.KV(ctx, b.BucketWorkers())
	if err != nil {
		cfg.Log.Warn("worker: no heartbeats", "err", err)
		return h
	}
	hb := Heartbeat{Name: cfg.Name, Pools: cfg.Pools, Concurrency: cfg.Concurrency, Started: time.Now().UTC()}
	put := func() {
		hb.Seen = time.Now().UTC()
		v, _ := json.Marshal(hb)
		if _, err := kv.Put(ctx, cfg.Name, v); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("worker: heartbeat", "err", err)
		}
	}
	h.wg.Go(func() {
		put()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				put()
			case <-ctx.Done():
				dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = kv.Delete(dctx, cfg.Name)
				cancel()
				return
			}
		}
	})
	return h
}

func (h *heartbeat) stop() {
	h.cancel()
	h.wg.Wait()
}

// startJobBeats beats the running jobs that are due (keepAlive) until stopped:
// one ticker for the worker, rather than a timer for every job. It looks every
// AckWait/6 and beats a job due before it looks again, so none waits more than
// AckWait/3 for its beat; each beat runs on a goroutine of its own, so that a slow
// renewal delays no other job's.
func startJobBeats(ctx context.Context, w *Worker) *heartbeat {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &heartbeat{cancel: cancel}
	every := max(w.cfg.AckWait/6, time.Millisecond)
	h.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				now := time.Now()
				for _, j := range w.inflight.all() {
					if j.beat.due(now, every) {
						h.wg.Go(j.beat.fire)
					}
				}
			case <-ctx.Done():
				return
			}
		}
	})
	return h
}
