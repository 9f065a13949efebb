package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream returns the stream name (StreamTriggers, StreamEvents, ...), with its info
// as of the call.
func (b *Bus) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return b.JS.Stream(ctx, name)
}

// Consumer returns the durable consumer name of stream, with its info as of the
// call: looking a consumer up is how its pending counts are read afresh.
func (b *Bus) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	return b.JS.Consumer(ctx, stream, name)
}

// EnsureConsumer creates the consumer cfg describes on stream, or updates the one
// of that name to cfg: how a router, a worker pool or the repair service starts
// its durable consumer, idempotently and from every process.
func (b *Bus) EnsureConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return b.JS.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// CreateConsumer creates the consumer cfg describes on stream (ephemeral when cfg
// names no durable), failing when one of its name exists with another
// configuration. Its creator deletes it when done (DeleteConsumer), or leaves it
// to cfg.InactiveThreshold.
func (b *Bus) CreateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return b.JS.CreateConsumer(ctx, stream, cfg)
}

// OrderedConsumer reads stream in order from where cfg says, for a reader that
// pages through what is stored (a run's events, the dead letters) or follows it.
// It is ephemeral: delete it when done (DeleteConsumer) rather than leaving it to
// its inactivity threshold.
func (b *Bus) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	return b.JS.OrderedConsumer(ctx, stream, cfg)
}

// DeleteConsumer deletes the consumer name of stream.
func (b *Bus) DeleteConsumer(ctx context.Context, stream, name string) error {
	return b.JS.DeleteConsumer(ctx, stream, name)
}

// ObjectStore returns an object store that exists (the registry's skill files).
func (b *Bus) ObjectStore(ctx context.Context, bucket string) (jetstream.ObjectStore, error) {
	return b.JS.ObjectStore(ctx, bucket)
}

// EnsureObjectStore creates the object store cfg describes, or updates it to cfg.
func (b *Bus) EnsureObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	return b.JS.CreateOrUpdateObjectStore(ctx, cfg)
}

// AccountInfo reports what the connection's JetStream account stores and may
// store: a storage probe asks it to learn whether JetStream still answers.
func (b *Bus) AccountInfo(ctx context.Context) (*jetstream.AccountInfo, error) {
	return b.JS.AccountInfo(ctx)
}
