package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// NATSConnected is a check that nc is connected.
func NATSConnected(nc *nats.Conn) telemetry.Check {
	return func(context.Context) error {
		if nc == nil {
			return errors.New("no NATS connection")
		}
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", s)
		}
		return nil
	}
}

// CheckConnected is a check that the bus's connection is up.
func (b *Bus) CheckConnected() telemetry.Check { return NATSConnected(b.NC) }

// StreamLookup finds a stream by name: a *Bus is one, and so is a
// jetstream.JetStream.
type StreamLookup interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// ConsumerLookup finds a consumer of a stream by name: a *Bus is one, and so is a
// jetstream.JetStream.
type ConsumerLookup interface {
	Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error)
}

// StreamsReachable is a check that every stream named exists and answers.
func StreamsReachable(js StreamLookup, names ...string) telemetry.Check {
	return func(ctx context.Context) error {
		for _, n := range names {
			if _, err := js.Stream(ctx, n); err != nil {
				return fmt.Errorf("stream %s: %w", n, err)
			}
		}
		return nil
	}
}

// ConsumerReachable is a check that the durable consumer of stream answers.
func ConsumerReachable(js ConsumerLookup, stream, consumer string) telemetry.Check {
	return func(ctx context.Context) error {
		if _, err := js.Consumer(ctx, stream, consumer); err != nil {
			return fmt.Errorf("consumer %s of stream %s: %w", consumer, stream, err)
		}
		return nil
	}
}

// ConsumerInfo returns a function for telemetry.Metrics.ObserveConsumers that asks JetStream for each
// consumer's info at collection time; a consumer that does not answer is left out
// of that collection.
func ConsumerInfo(js ConsumerLookup, consumers ...telemetry.Consumer) func(context.Context) []telemetry.ConsumerStat {
	return func(ctx context.Context) []telemetry.ConsumerStat {
		out := make([]telemetry.ConsumerStat, 0, len(consumers))
		for _, c := range consumers {
			cctx, cancel := context.WithTimeout(ctx, telemetry.CheckTimeout)
			// Looking the consumer up fetches its info afresh.
			cons, err := js.Consumer(cctx, c.Stream, c.Name)
			cancel()
			if err != nil {
				continue
			}
			info := cons.CachedInfo()
			if info == nil {
				continue
			}
			out = append(out, telemetry.ConsumerStat{Pool: c.Pool, Stream: c.Stream, Consumer: c.Name,
				Pending: int64(info.NumPending), AckPending: int64(info.NumAckPending)})
		}
		return out
	}
}
