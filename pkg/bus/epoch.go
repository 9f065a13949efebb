package bus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// NewEpoch tracks the epoch of stream (see Epoch); Fresh learns it on first use.
func (b *Bus) NewEpoch(stream string) *Epoch {
	return &Epoch{nc: b.NC, stream: func(ctx context.Context) (uint64, error) {
		s, err := b.JS.Stream(ctx, stream)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.State.LastSeq, nil
	}}
}

// Epoch tracks a stream's last sequence as of the start of this process's current
// connection to the server. A message stored after that (Fresh) cannot have been
// delivered to anyone before a server restart made the broker forget deliveries:
// its first delivery is its first. Anything older may have been, whatever its
// delivery count says.
type Epoch struct {
	nc     *nats.Conn
	stream func(ctx context.Context) (uint64, error) // the stream's last sequence

	mu         sync.Mutex
	known      bool
	reconnects uint64
	seq        uint64
	restartAt  time.Time // when a reconnect began the epoch; zero for the first
}

// Fresh reports whether a job stored at stream sequence seq was stored during the
// current epoch, refreshing the epoch first if the connection was re-established.
// An epoch it cannot learn counts as not fresh (the claim path is always safe).
func (e *Epoch) Fresh(ctx context.Context, seq uint64) bool {
	r := e.nc.Stats().Reconnects
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.known || e.reconnects != r {
		last, err := e.stream(ctx)
		if err != nil {
			e.known = false
			return false
		}
		if e.known || r > 0 {
			e.restartAt = time.Now()
		}
		e.known, e.reconnects, e.seq = true, r, last
	}
	return seq > e.seq
}

// Invalidate makes the next Fresh refresh the epoch.
func (e *Epoch) Invalidate() {
	e.mu.Lock()
	e.known = false
	e.restartAt = time.Now()
	e.mu.Unlock()
}

// Young reports how much longer the grace after a reconnect lasts, or 0.
func (e *Epoch) Young(grace time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.restartAt.IsZero() {
		return 0
	}
	return max(0, grace-time.Since(e.restartAt))
}
