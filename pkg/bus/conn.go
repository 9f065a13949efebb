package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Publish persists m on the stream its subject belongs to and waits for
// JetStream's acknowledgement, which says its sequence and whether it was a
// duplicate: a single publish whose caller answers with them (a trigger, a
// confirmation, a dead letter replayed). Publishes that must all persist before an
// input is acked go through a Batch, which pipelines them.
func (b *Bus) Publish(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return b.JS.PublishMsg(ctx, m, opts...)
}

// PublishLive sends m to whoever subscribes to its subject now, without persisting
// it: live progress and the router's announcement of a decision, which a follower
// that misses them reads from the stream instead.
func (b *Bus) PublishLive(m *nats.Msg) error {
	return b.NC.PublishMsg(m)
}

// Subscribe delivers the messages published on subject to ch from the moment it
// returns: it waits until the server has the subscription, so a message published
// after that (a trigger's live progress) is not missed. Unsubscribe when done.
func (b *Bus) Subscribe(ctx context.Context, subject string, ch chan *nats.Msg) (*nats.Subscription, error) {
	sub, err := b.NC.ChanSubscribe(subject, ch)
	if err != nil {
		return nil, err
	}
	if err := b.NC.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// Request sends data to a NATS micro service's endpoint (the registry's, a
// router's) and returns its reply, or the error ctx or the lack of a responder
// gives.
func (b *Bus) Request(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	return b.NC.RequestWithContext(ctx, subject, data)
}

// AddService serves a NATS micro service (discoverable with $SRV.INFO) on the
// bus's connection.
func (b *Bus) AddService(cfg micro.Config) (micro.Service, error) {
	return micro.AddService(b.NC, cfg)
}

// Flush waits until the server has processed everything sent on the connection
// so far (subscriptions included), or until ctx ends; without a deadline in ctx
// it waits 5 seconds.
func (b *Bus) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	return b.NC.FlushWithContext(ctx)
}

// Conn returns the bus's NATS connection, for the components built on plain NATS
// that take one by design and are also used without a Bus: bus tools
// (package bustool), the registry's client (registry.NewClient) and the
// benchmark's bare JetStream baseline. Everything else goes through the bus's
// named operations.
func (b *Bus) Conn() *nats.Conn { return b.NC }

// Connected reports whether the connection is up now.
func (b *Bus) Connected() bool { return b.NC.IsConnected() }

// Reconnects is how many times the connection was re-established: a value that
// changed between two reads means the server (or the bus's view of it) may have
// forgotten what happened in between.
func (b *Bus) Reconnects() uint64 { return b.NC.Stats().Reconnects }

// WaitConnected waits until the connection is up; false when ctx ends first or
// the connection is closed for good.
func (b *Bus) WaitConnected(ctx context.Context) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !b.NC.IsConnected() {
		if b.NC.IsClosed() {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// Reconnected returns a channel that receives each time the connection is
// established again, and a function that stops it and closes the channel. A
// reconnect that comes while the channel is full is dropped.
func (b *Bus) Reconnected() (<-chan nats.Status, func()) {
	ch := b.NC.StatusChanged(nats.CONNECTED)
	return ch, func() { b.NC.RemoveStatusListener(ch) }
}

// ServerURL is the URL of the server the bus is connected to, without its
// credentials.
func (b *Bus) ServerURL() string { return b.NC.ConnectedUrlRedacted() }

// Close closes the connection at once, dropping what it has not sent.
func (b *Bus) Close() { b.NC.Close() }

// Drain closes the connection once its subscriptions have handled what they hold
// and its publishes are sent.
func (b *Bus) Drain() error { return b.NC.Drain() }
