package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/otlptest"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// restoreGlobals puts back the global providers Setup replaced.
func restoreGlobals(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
}

func TestSetupWithoutEndpointIsOff(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Tracing || !telemetry.Off() {
		t.Fatalf("tracing is on with no endpoint set (Off %v)", telemetry.Off())
	}
	ctx, span := telemetry.StartPublish(context.Background(), telemetry.Message{Destination: "skillbus.trigger.x"})
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("span with tracing off: recording=%v valid=%v, want a no-op span", span.IsRecording(), span.SpanContext().IsValid())
	}
	span.End()
	if tp, _ := telemetry.Inject(ctx); tp != "" {
		t.Fatalf("Inject with tracing off and no parent = %q, want none", tp)
	}

	// A trace context that arrives still travels on unchanged.
	const in = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx = telemetry.Extract(context.Background(), in, "vendor=x")
	ctx, span = telemetry.StartProcess(ctx, telemetry.Message{Destination: "skillbus.jobs.default"}, nil)
	defer span.End()
	tp, ts := telemetry.Inject(ctx)
	if tp != in || ts != "vendor=x" {
		t.Fatalf("Inject = %q, %q; want the incoming %q, %q", tp, ts, in, "vendor=x")
	}
}

func TestSetupExportsToEndpointAndShutdownFlushes(t *testing.T) {
	restoreGlobals(t)
	rcv := otlptest.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		ServiceName: "fallback-name",
		Getenv: env(map[string]string{
			telemetry.EnvEndpoint:      rcv.Endpoint(),
			telemetry.EnvProtocol:      "http/protobuf",
			telemetry.EnvServiceName:   "skillbus-test",
			telemetry.EnvResourceAttrs: "deployment.environment.name=ci,team=a%20b",
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Tracing || telemetry.Off() {
		t.Fatalf("tracing is off with an endpoint set (Off %v)", telemetry.Off())
	}
	ctx, parent := telemetry.StartPublish(context.Background(), telemetry.Message{Destination: "skillbus.trigger.x", ID: "e1"})
	_, child := telemetry.StartStep(ctx, "fetch", "tool")
	child.End()
	parent.End()
	// The batcher would wait seconds; Shutdown must flush at once.
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	p := otlptest.Must(t, spans, "publish skillbus.trigger.x")
	c := otlptest.Must(t, spans, "step fetch")
	otlptest.AssertChild(t, p, c)
	if p.Service != "skillbus-test" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's skillbus-test", p.Service)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestSetupSamplerFromEnvironment(t *testing.T) {
	restoreGlobals(t)
	rcv := otlptest.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(map[string]string{
		telemetry.EnvTracesEndpoint: rcv.Endpoint() + "/v1/traces",
		telemetry.EnvSampler:        "always_off",
	})})
	if err != nil {
		t.Fatal(err)
	}
	_, span := telemetry.Start(context.Background(), "dropped")
	if span.IsRecording() {
		t.Error("always_off sampler records a span")
	}
	span.End()
	_, span = telemetry.Start(context.Background(), "also dropped")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rcv.Spans()); n != 0 {
		t.Errorf("%d spans exported with always_off", n)
	}
}

func TestSetupGRPC(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(map[string]string{
		telemetry.EnvEndpoint: "http://127.0.0.1:4317",
		telemetry.EnvProtocol: "grpc",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Tracing {
		t.Error("tracing is off with a gRPC endpoint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSetupDisabled(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(map[string]string{
		telemetry.EnvEndpoint:    "http://127.0.0.1:4318",
		telemetry.EnvSDKDisabled: "true",
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Tracing {
		t.Error("tracing is on with OTEL_SDK_DISABLED=true")
	}
	if _, ok := tel.TracerProvider.(trace.TracerProvider); !ok {
		t.Error("no tracer provider")
	}
}

func TestSetupBadEnvironment(t *testing.T) {
	for name, kv := range map[string]map[string]string{
		"endpoint not a URL": {telemetry.EnvEndpoint: "collector:4318"},
		"unknown protocol":   {telemetry.EnvEndpoint: "http://c:4318", telemetry.EnvProtocol: "thrift"},
		"http/json":          {telemetry.EnvEndpoint: "http://c:4318", telemetry.EnvProtocol: "http/json"},
		"unknown sampler":    {telemetry.EnvEndpoint: "http://c:4318", telemetry.EnvSampler: "jaeger_remote"},
		"bad ratio":          {telemetry.EnvEndpoint: "http://c:4318", telemetry.EnvSampler: "traceidratio", telemetry.EnvSamplerArg: "2"},
		"bad resource":       {telemetry.EnvResourceAttrs: "novalue"},
		"bad escape":         {telemetry.EnvResourceAttrs: "a=%zz"},
		"unknown spans":      {telemetry.EnvEndpoint: "http://c:4318", telemetry.EnvSpans: "fast"},
	} {
		t.Run(name, func(t *testing.T) {
			restoreGlobals(t)
			tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(kv)})
			if err == nil {
				tel.Shutdown(context.Background())
				t.Fatal("Setup accepted it")
			}
			if !errors.Is(err, telemetry.ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}
