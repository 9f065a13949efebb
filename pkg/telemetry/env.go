package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newExporter returns the OTLP span exporter the environment names, or nil when no
// endpoint is set.
func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	endpoint := strings.TrimSpace(getenv(EnvTracesEndpoint))
	signal := endpoint != ""
	name := EnvTracesEndpoint
	if !signal {
		endpoint = strings.TrimSpace(getenv(EnvEndpoint))
		name = EnvEndpoint
	}
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%w: %s=%q is not an http:// or https:// URL with a host", ErrConfig, name, endpoint)
	}
	protocol := strings.TrimSpace(getenv(EnvTracesProtocol))
	pname := EnvTracesProtocol
	if protocol == "" {
		protocol = strings.TrimSpace(getenv(EnvProtocol))
		pname = EnvProtocol
	}
	switch protocol {
	case "", "http/protobuf":
		if !signal {
			// The generic endpoint is a base URL: each signal has its own path.
			u = u.JoinPath("v1", "traces")
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/HTTP exporter for %s: %w", u, err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC exporter for %s: %w", u, err)
		}
		return exp, nil
	case "http/json":
		return nil, fmt.Errorf("%w: %s=http/json is not supported; use http/protobuf or grpc", ErrConfig, pname)
	default:
		return nil, fmt.Errorf("%w: %s=%q: want http/protobuf or grpc", ErrConfig, pname, protocol)
	}
}

// newSampler returns the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// name; default parentbased_always_on, so a sampled publisher's trace is kept whole.
func newSampler(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.TrimSpace(getenv(EnvSampler))
	arg := strings.TrimSpace(getenv(EnvSamplerArg))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("%w: %s=%q is not a ratio between 0 and 1", ErrConfig, EnvSamplerArg, arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("%w: %s=%q: want always_on, always_off, traceidratio or their parentbased_ forms", ErrConfig, EnvSampler, name)
}

// parseResourceAttrs reads OTEL_RESOURCE_ATTRIBUTES: key=value pairs separated by
// commas, values percent-encoded.
func parseResourceAttrs(s string) (map[string]string, error) {
	out := map[string]string{}
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: %s: %q is not key=value", ErrConfig, EnvResourceAttrs, pair)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the value of %q is badly percent-encoded: %v", ErrConfig, EnvResourceAttrs, k, err)
		}
		out[k] = dv
	}
	return out, nil
}
