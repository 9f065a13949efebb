package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Handler processes one message. It must ack, nak or term the message itself.
type Handler func(ctx context.Context, msg jetstream.Msg)

// Loop runs a bounded number of handlers over a pull consumer.
type Loop struct {
	it      jetstream.MessagesContext
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped sync.Once
}

// Consume starts n goroutines that take messages from c and run h, each handling one
// message at a time, so at most n messages are in the handlers at once and at most 2n
// are held by this process. Handlers get a context that outlives Stop's drain, so
// in-flight work can finish; it is cancelled when Stop's context ends.
func Consume(c jetstream.Consumer, n int, h Handler, log *slog.Logger) (*Loop, error) {
	if n <= 0 {
		return nil, fmt.Errorf("consume: concurrency must be positive, got %d", n)
	}
	it, err := c.Messages(jetstream.PullMaxMessages(2 * n))
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Loop{it: it, cancel: cancel}
	for range n {
		l.wg.Go(func() {
			for {
				msg, err := it.Next()
				if err != nil {
					if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
						return
					}
					log.Warn("consume: next message", "err", err)
					continue
				}
				h(ctx, msg)
			}
		})
	}
	return l, nil
}

// Stop stops pulling, lets the handlers finish what this process already holds, and
// returns when they are done. If ctx ends first, the handlers' context is cancelled
// (they hand their messages back) and Stop still waits for them to return.
func (l *Loop) Stop(ctx context.Context) {
	l.stopped.Do(func() {
		l.it.Drain()
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			l.cancel()
			<-done
		}
		l.cancel()
	})
}
