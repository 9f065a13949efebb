package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/internal/storage"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// flushTimeout bounds how long a stopping process spends exporting its last spans.
const flushTimeout = 5 * time.Second

// observe holds the observability flag of a long-running process; tracing itself
// is configured by the standard OTEL_* variables.
type observe struct {
	metricsAddr string
	natsHealthz string
	getenv      Env
}

func (o *observe) register(cmd *cobra.Command, getenv Env) {
	o.getenv = getenv
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-addr", getenv("SKILLBUS_METRICS_ADDR"),
		"address serving /metrics (Prometheus), /livez and /readyz, e.g. :9464; empty: none ($SKILLBUS_METRICS_ADDR). Tracing is set by the OTEL_* variables")
	cmd.Flags().StringVar(&o.natsHealthz, "nats-healthz", getenv("SKILLBUS_NATS_HEALTHZ"),
		"nats-server's monitoring /healthz URL, e.g. http://nats:8222/healthz: /readyz fails while it does (a stream that cannot write, a full disk) ($SKILLBUS_NATS_HEALTHZ)")
}

// start sets up tracing (from OTEL_*), metrics and the probes' listener, and returns
// them with log wrapped to add trace_id and span_id, and a stop that flushes the
// spans; defer it first, so it runs after the roles have drained.
func (o *observe) start(ctx context.Context, service string, log *slog.Logger) (*telemetry.Telemetry, *slog.Logger, func(), error) {
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: service, Getenv: o.getenv, Log: log})
	if err != nil {
		return nil, nil, nil, usage("%v", err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			log.Warn("telemetry: flushing at exit", "err", err)
		}
	}
	if o.metricsAddr != "" {
		addr, err := tel.Serve(o.metricsAddr)
		if err != nil {
			stop()
			return nil, nil, nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		log.Info("serving /metrics, /livez and /readyz", "addr", addr)
	}
	if tel.Tracing {
		log.Info("tracing: exporting spans over OTLP", "service", service)
	}
	return tel, telemetry.Logger(log), stop, nil
}

// watchBus makes readiness depend on the NATS connection and skillbus's streams, and
// liveness on the process's consume loops receiving while their consumers have
// messages waiting.
func watchBus(tel *telemetry.Telemetry, b *bus.Bus) {
	tel.Live.Add("consume", bus.Stalled)
	tel.Health.Add("nats", b.CheckConnected())
	names := make([]string, 0, len(b.Streams()))
	for _, sc := range b.Streams() {
		names = append(names, sc.Name)
	}
	tel.Health.Add("streams", bus.StreamsReachable(b, names...))
}

// watchStore makes readiness depend on the server storing messages: JetStream
// enabled, and, with --nats-healthz, the server's own health (a stream's write
// error shows only there).
func (o *observe) watchStore(tel *telemetry.Telemetry, b *bus.Bus) {
	tel.Health.Add("jetstream", storage.Remote(b))
	if o.natsHealthz != "" {
		tel.Health.Add("nats-server healthz", storage.Healthz(o.natsHealthz, nil))
	}
}

// watchConsumer makes readiness depend on a durable consumer the process reads, and
// reports its pending and ack-pending counts as metrics; pool is "" for the router.
func watchConsumer(tel *telemetry.Telemetry, b *bus.Bus, pool, stream, consumer string) {
	tel.Health.Add("consumer "+consumer, bus.ConsumerReachable(b, stream, consumer))
	// Cannot fail: the instruments are the ones NewMetrics made.
	_, _ = tel.Metrics.ObserveConsumers(bus.ConsumerInfo(b, telemetry.Consumer{Pool: pool, Stream: stream, Name: consumer}))
}

// watchCatalog loads the catalog for a router or worker, making readiness depend on
// it under name: not ready until it is loaded, nor after its watch ends.
func watchCatalog(ctx context.Context, tel *telemetry.Telemetry, name string, kv jetstream.KeyValue, log *slog.Logger) (*catalog.Catalog, error) {
	name = strings.TrimSpace(name)
	tel.Health.Add(name, telemetry.NewFlag("catalog not loaded yet").Check)
	cat, err := catalog.Watch(ctx, kv, log)
	if err != nil {
		return nil, err
	}
	tel.Health.Add(name, cat.Ready)
	return cat, nil
}
