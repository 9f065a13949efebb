package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/skillbus/skillbus/internal/spanrec"
)

// Environment variables read by Setup, as the OpenTelemetry specification names them.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvResourceAttrs  = "OTEL_RESOURCE_ATTRIBUTES"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// EnvSpans chooses what records skillbus's own spans under Setup's provider:
// "skillbus" (the default), its lighter recorder, or "sdk", the OpenTelemetry SDK's
// span — what every span of other instrumentation is either way. The two export the
// same; "sdk" is there to rule the recorder out if a trace ever looks wrong, at about
// twice tracing's CPU cost.
const EnvSpans = "SKILLBUS_OTEL_SPANS"

// ErrConfig is wrapped by every error Setup returns for a bad OTEL_* variable.
var ErrConfig = errors.New("telemetry: bad configuration")

// Config configures Setup. Zero values select the documented defaults.
type Config struct {
	// ServiceName names the process in traces when OTEL_SERVICE_NAME does not.
	// Default "skillbus".
	ServiceName string
	// ServiceVersion is the service.version resource attribute. Default: none.
	ServiceVersion string
	// Getenv reads the environment. Default os.Getenv.
	Getenv func(string) string
	// SpanExporter, when set, receives the spans instead of the OTLP exporter the
	// environment names, and turns tracing on regardless of it: for tests and for
	// measuring the cost of tracing with a no-op exporter.
	SpanExporter sdktrace.SpanExporter
	// Log receives export errors. Default slog.Default().
	Log *slog.Logger
}

// Telemetry is what Setup configured: the providers, the metric instruments and the
// health checks, with the HTTP listener that serves them.
type Telemetry struct {
	// Tracing reports whether spans are recorded and exported.
	Tracing bool
	// TracerProvider is the SDK provider when Tracing, else a no-op one.
	TracerProvider trace.TracerProvider
	// MeterProvider feeds the Prometheus registry.
	MeterProvider metric.MeterProvider
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Metrics holds skillbus's instruments.
	Metrics *Metrics
	// Health holds the readiness checks /readyz runs.
	Health *Health
	// Live holds the liveness checks /livez runs: failing ones mean the process is
	// wedged and is better restarted (a consume loop that no longer receives).
	Live *Health

	active *activeTracer
	rec    *spanrec.Recorder
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	log    *slog.Logger
	mu     sync.Mutex
	srv    []*http.Server
	once   sync.Once
	err    error
}

// Setup configures tracing from the OTEL_* environment and metrics with a
// Prometheus registry, installs them as the global OpenTelemetry providers with the
// W3C trace-context propagator, and returns them. Call Shutdown before the process
// exits: it flushes the spans not yet exported.
//
// Tracing is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set (and OTEL_SDK_DISABLED is not "true"). The
// protocol is OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: "http/protobuf" (default) or
// "grpc". The exporters read their other variables (headers, timeout, TLS
// certificates) themselves. The sampler is OTEL_TRACES_SAMPLER with
// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on); the resource carries
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "skillbus"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	getenv := cfg.Getenv
	t := &Telemetry{log: cfg.Log, Health: &Health{}, Live: &Health{}}

	res, err := newResource(cfg)
	if err != nil {
		return nil, err
	}

	exp := cfg.SpanExporter
	if exp == nil && !strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		exp, err = newExporter(ctx, getenv)
		if err != nil {
			return nil, err
		}
	}
	if exp != nil {
		sampler, err := newSampler(getenv)
		if err != nil {
			_ = exp.Shutdown(ctx)
			return nil, err
		}
		bsp := sdktrace.NewBatchSpanProcessor(exp)
		t.tp = sdktrace.NewTracerProvider(
			sdktrace.WithSpanProcessor(bsp),
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sampler),
			sdktrace.WithIDGenerator(idGenerator{}),
		)
		t.TracerProvider = t.tp
		t.Tracing = true
		// The provider's resource: WithResource merges the process environment in.
		pres, err := resource.Merge(resource.Environment(), res)
		if err != nil {
			pres = res
		}
		switch v := strings.ToLower(strings.TrimSpace(getenv(EnvSpans))); v {
		case "", "skillbus":
			t.rec = spanrec.New(spanrec.Config{
				Provider: t.tp, Sampler: sampler, IDs: idGenerator{}, Resource: pres, Processor: bsp,
				Limits: sdktrace.NewSpanLimits(), Scope: instrumentation.Scope{Name: ScopeName},
			})
		case "sdk":
		default:
			_ = t.tp.Shutdown(ctx)
			return nil, fmt.Errorf("%w: %s=%q: want skillbus or sdk", ErrConfig, EnvSpans, v)
		}
	} else {
		t.TracerProvider = noop.NewTracerProvider()
	}

	t.Registry = prometheus.NewRegistry()
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pe, err := promexporter.New(promexporter.WithRegisterer(t.Registry))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(pe), sdkmetric.WithResource(res))
	t.MeterProvider = t.mp
	t.Metrics, err = NewMetrics(t.mp)
	if err != nil {
		return nil, err
	}

	t.active = &activeTracer{off: !t.Tracing, tracer: t.Tracer(), rec: t.rec}
	active.Store(t.active)
	otel.SetTracerProvider(t.TracerProvider)
	otel.SetMeterProvider(t.mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		cfg.Log.Warn("telemetry: export failed", "err", err)
	}))
	return t, nil
}

// Tracer returns the skillbus tracer of t's provider.
func (t *Telemetry) Tracer() trace.Tracer { return t.TracerProvider.Tracer(ScopeName) }

// Serve listens on addr and serves /metrics, /livez and /readyz until Shutdown. It
// returns the address it listens on (useful with port 0).
func (t *Telemetry) Serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	srv := &http.Server{Handler: Handler(t.Registry, t.Health, t.Live), ReadHeaderTimeout: 10 * time.Second}
	t.mu.Lock()
	t.srv = append(t.srv, srv)
	t.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.log.Error("telemetry: metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// Shutdown stops the metrics listener and flushes and stops the providers, within
// ctx. It is safe to call more than once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.once.Do(func() {
		active.CompareAndSwap(t.active, nil)
		var errs []error
		t.mu.Lock()
		srvs := t.srv
		t.mu.Unlock()
		for _, s := range srvs {
			errs = append(errs, s.Shutdown(ctx))
		}
		if t.tp != nil {
			errs = append(errs, t.tp.Shutdown(ctx))
		}
		if t.mp != nil {
			errs = append(errs, t.mp.Shutdown(ctx))
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}

func newResource(cfg Config) (*resource.Resource, error) {
	attrs, err := parseResourceAttrs(cfg.Getenv(EnvResourceAttrs))
	if err != nil {
		return nil, err
	}
	name := cfg.ServiceName
	if v := strings.TrimSpace(cfg.Getenv(EnvServiceName)); v != "" {
		name = v
	} else if v, ok := attrs["service.name"]; ok && v != "" {
		name = v
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs)+2)
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	kvs = append(kvs, semconv.ServiceName(name))
	if cfg.ServiceVersion != "" {
		kvs = append(kvs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	// Built without resource.Default, which reads the process environment itself
	// and would ignore Config.Getenv.
	return resource.New(context.Background(), resource.WithTelemetrySDK(), resource.WithAttributes(kvs...))
}
