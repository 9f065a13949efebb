package tool

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// meterScope is the instrumentation scope of the http tool's metrics: skillbus's,
// as for every other skillbus metric.
const meterScope = "github.com/skillbus/skillbus"

// clientBuckets are the boundaries of http.client.request.duration, in seconds: the
// ones OpenTelemetry's semantic conventions advise.
var clientBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// maxClientSets bounds the attribute sets kept for reuse; requests to more
// distinct hosts than that still count, with a set built for each.
const maxClientSets = 1024

// clientTransport measures the http tool's requests with OpenTelemetry's HTTP client
// conventions: the http.client.request.duration and http.client.request.body.size
// histograms, and a CLIENT span ("HTTP GET") per request, with W3C trace headers,
// when tracing is on.
//
// otelhttp's transport does all of that, but with tracing off it still costs ~11 µs
// a request: a span that records nothing, a copy of the request, the span's
// attributes and a new attribute set for the metrics, built every time. None of its
// options avoids that. Here a request whose context leads to no tracer that
// records goes straight to the base transport, carrying any trace context it
// already has, and is measured with an attribute set made once for each
// combination of method, server, scheme, protocol, status and error type; a request
// with tracing on goes through otelhttp, as before, with its metrics left to us.
type clientTransport struct {
	base     http.RoundTripper
	traced   http.RoundTripper // otelhttp over base, recording no metrics
	duration metric.Float64Histogram
	bodySize metric.Int64Histogram
	mu       sync.RWMutex
	sets     map[clientKey][]metric.RecordOption // one attribute set each, made once
	// propagator nil: the global one, read per request as otelhttp does.
	propagator propagation.TextMapPropagator
	// fixed: clientTelemetry.TracerProvider was set, and fixedOn tells whether
	// it records.
	fixed, fixedOn bool
}

// clientTelemetry configures newClientTransport; zero values select the global
// OpenTelemetry providers, which telemetry.Setup installs.
type clientTelemetry struct {
	MeterProvider metric.MeterProvider
	// TracerProvider, when set, makes every request's span (even with no span in
	// its context); nil: the provider of the span in the request's context, or
	// else the global one.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

func newClientTransport(base http.RoundTripper, c clientTelemetry) *clientTransport {
	mp := c.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(meterScope)
	t := &clientTransport{base: base, propagator: c.Propagator, sets: map[clientKey][]metric.RecordOption{}}
	// An instrument that fails to register (never, with these constant
	// definitions) is a no-op rather than a tool that fails to start.
	dur, err := httpconv.NewClientRequestDuration(meter, metric.WithExplicitBucketBoundaries(clientBuckets...))
	if err != nil {
		otel.Handle(fmt.Errorf("http tool: %w", err))
	}
	size, err := httpconv.NewClientRequestBodySize(meter)
	if err != nil {
		otel.Handle(fmt.Errorf("http tool: %w", err))
	}
	t.duration, t.bodySize = dur.Inst(), size.Inst()
	opts := []otelhttp.Option{otelhttp.WithMeterProvider(metricnoop.NewMeterProvider())}
	if c.TracerProvider != nil {
		opts = append(opts, otelhttp.WithTracerProvider(c.TracerProvider))
		t.fixed, t.fixedOn = true, !isNoopTracerProvider(c.TracerProvider)
	}
	if c.Propagator != nil {
		opts = append(opts, otelhttp.WithPropagators(c.Propagator))
	}
	t.traced = otelhttp.NewTransport(telemetry.RedactURLs(base), opts...)
	return t
}

// internalNoop is the tracer provider of a span context with no span started
// from it: the remote span context of an incoming traceparent.
var internalNoop = trace.SpanFromContext(context.Background()).TracerProvider()

func isNoopTracerProvider(tp trace.TracerProvider) bool {
	if _, ok := tp.(tracenoop.TracerProvider); ok {
		return true
	}
	return tp == internalNoop
}

// tracing reports whether otelhttp would start a span that records for a request
// with ctx: the provider it would use (the one of the span in ctx, else the
// global one) is not a no-op. Otherwise otelhttp's span would be the span
// context already in ctx, passed on as it is.
func (t *clientTransport) tracing(ctx context.Context) bool {
	if t.fixed {
		return t.fixedOn
	}
	if span := trace.SpanFromContext(ctx); span.SpanContext().IsValid() {
		return !isNoopTracerProvider(span.TracerProvider())
	}
	return !isNoopTracerProvider(otel.GetTracerProvider())
}

func (t *clientTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	var resp *http.Response
	var err error
	if ctx := r.Context(); t.tracing(ctx) {
		resp, err = t.traced.RoundTrip(r)
	} else {
		if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
			// The trace context goes on with the request (an incoming
			// traceparent, with tracing off), on a copy: a RoundTripper must
			// not change the request it is given.
			r = r.Clone(ctx)
			prop := t.propagator
			if prop == nil {
				prop = otel.GetTextMapPropagator()
			}
			prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
		}
		resp, err = t.base.RoundTrip(r)
	}
	d := time.Since(start)

	k := clientKey{method: r.Method, hostport: r.URL.Host, scheme: r.URL.Scheme, proto: r.Proto}
	if err == nil && resp != nil {
		k.status = resp.StatusCode
		if resp.Proto != "" {
			k.proto = resp.Proto
		}
	} else if err != nil {
		k.errType = errorType(err)
	}
	if k.hostport == "" {
		k.hostport = r.Header.Get("Host")
	}
	set := t.attributes(k)
	ctx := r.Context()
	t.duration.Record(ctx, float64(d)/float64(time.Second), set...)
	t.bodySize.Record(ctx, max(r.ContentLength, 0), set...)
	return resp, err
}

// clientKey is what the metrics' attributes are made of.
type clientKey struct {
	method, hostport, scheme, proto string
	status                          int
	errType                         string
}

func (t *clientTransport) attributes(k clientKey) []metric.RecordOption {
	t.mu.RLock()
	o, ok := t.sets[k]
	t.mu.RUnlock()
	if ok {
		return o
	}
	o = []metric.RecordOption{metric.WithAttributeSet(k.set())}
	t.mu.Lock()
	if len(t.sets) < maxClientSets {
		t.sets[k] = o
	}
	t.mu.Unlock()
	return o
}

// set gives the attributes otelhttp gives these metrics: the request's method
// (_OTHER for one HTTP does not define), server address, URL scheme, server port
// unless it is the scheme's default, protocol name and version, and the response's
// status code or, for a request that got no response, the error's type.
func (k clientKey) set() attribute.Set {
	host, port := splitHostPort(k.hostport)
	kv := make([]attribute.KeyValue, 0, 8)
	kv = append(kv, semconv.HTTPRequestMethodKey.String(standardMethod(k.method)), semconv.ServerAddress(host))
	scheme := k.scheme
	if scheme == "" {
		scheme = "http"
	}
	kv = append(kv, semconv.URLScheme(scheme))
	if port > 0 && (k.scheme == "https" && port != 443 || k.scheme != "https" && port != 80) {
		kv = append(kv, semconv.ServerPort(port))
	}
	name, version, _ := strings.Cut(k.proto, "/")
	if name != "" {
		kv = append(kv, semconv.NetworkProtocolName(strings.ToLower(name)))
	}
	if version != "" {
		kv = append(kv, semconv.NetworkProtocolVersion(version))
	}
	if k.status > 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(k.status))
	} else if k.errType != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(k.errType))
	}
	return attribute.NewSet(kv...)
}

func standardMethod(m string) string {
	m = strings.ToUpper(m)
	switch m {
	case http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// splitHostPort splits a URL's host into name and port; port is -1 when there is
// none or it is not a number.
func splitHostPort(hostport string) (string, int) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.LastIndexByte(hostport, ']')
		if end < 0 {
			return "", -1
		}
		if !strings.Contains(hostport[end:], ":") {
			return hostport[1:end], -1
		}
	} else if !strings.Contains(hostport, ":") {
		return hostport, -1
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return host, -1
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return host, -1
	}
	return host, int(port)
}

// errorType names the type of err, as otelhttp's error.type does: few distinct
// values, whatever the message.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t == nil {
		return "_OTHER"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" || t.Name() == "" {
		if s := t.String(); s != "" {
			return s
		}
		return "_OTHER"
	}
	return t.PkgPath() + "." + t.Name()
}
