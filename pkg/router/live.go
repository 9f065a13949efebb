package router

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/stats"
)

// live is what the router learns from the running system, without adding anything
// to the execution path: terminal results per skill version (the counts the workers
// write to the stats bucket, see package stats) and which pools have a live worker
// (the workers bucket's heartbeats).
type live struct {
	r *Router

	mu      sync.Mutex
	workers map[string][]string

	stats *stats.Window
	kw    jetstream.KeyWatcher
	done  chan struct{}
}

func newLive(r *Router) *live {
	return &live{r: r, workers: map[string][]string{}, done: make(chan struct{})}
}

func (l *live) start(ctx context.Context) error {
	b := l.r.cfg.Bus
	skv, err := b.KV(ctx, b.BucketStats())
	if err != nil {
		return err
	}
	if l.stats, err = stats.Watch(ctx, skv, l.r.cfg.StatsWindow, l.r.cfg.Log); err != nil {
		return err
	}
	kv, err := b.KV(ctx, b.BucketWorkers())
	if err != nil {
		l.stats.Stop()
		return err
	}
	l.kw, err = kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		l.stats.Stop()
		return err
	}
	go func() {
		defer close(l.done)
		for e := range l.kw.Updates() {
			if e == nil {
				continue
			}
			l.mu.Lock()
			if e.Operation() != jetstream.KeyValuePut {
				delete(l.workers, e.Key())
			} else {
				var hb struct {
					Pools []string `json:"pools"`
				}
				if json.Unmarshal(e.Value(), &hb) == nil {
					l.workers[e.Key()] = hb.Pools
				}
			}
			l.mu.Unlock()
		}
	}()
	return nil
}

func (l *live) stop() {
	if l.stats != nil {
		l.stats.Stop()
	}
	if l.kw != nil {
		_ = l.kw.Stop()
		<-l.done
	}
}

// success is selector.Env.Success.
func (l *live) success(name, version string) (int, int) {
	return l.stats.Success(name, version)
}

// poolLive is selector.Env.PoolLive.
func (l *live) poolLive(pool string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ps := range l.workers {
		for _, p := range ps {
			if p == pool {
				return true
			}
		}
	}
	return false
}

func (l *live) env() selector.Env {
	return selector.Env{Success: l.success, PoolLive: l.poolLive}
}
