package tool

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// telemetryServer answers /ok, /missing (404) and /echo, and keeps the traceparent
// of the last request.
type telemetryServer struct {
	*httptest.Server
	mu          sync.Mutex
	traceparent []string
}

func newTelemetryServer(t *testing.T) *telemetryServer {
	s := &telemetryServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.traceparent = append(s.traceparent, r.Header.Get("traceparent"))
		s.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *telemetryServer) lastTraceparent() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.traceparent) == 0 {
		return "<no request>"
	}
	return s.traceparent[len(s.traceparent)-1]
}

func callWith(t *testing.T, ctx context.Context, rt http.RoundTripper, args map[string]any) {
	t.Helper()
	h := NewHTTP(HTTPConfig{Client: &http.Client{Transport: rt}})
	ctx = WithPermissions(ctx, Permissions{Network: true})
	if _, err := h.Call(ctx, Call{Args: args, IdempotencyKey: "k"}); err != nil {
		t.Logf("%v: %v", args, err)
	}
}

// histogram returns the data points of the named histogram by their attributes.
func histogram[N int64 | float64](t *testing.T, rd *sdkmetric.ManualReader, name string) (map[attribute.Distinct]metricdata.HistogramDataPoint[N], metricdata.Metrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[N])
			if !ok {
				t.Fatalf("%s is a %T", name, m.Data)
			}
			pts := map[attribute.Distinct]metricdata.HistogramDataPoint[N]{}
			for _, p := range h.DataPoints {
				pts[p.Attributes.Equivalent()] = p
			}
			return pts, m
		}
	}
	t.Fatalf("no metric %s", name)
	return nil, metricdata.Metrics{}
}

func sets[N int64 | float64](pts map[attribute.Distinct]metricdata.HistogramDataPoint[N]) []string {
	var out []string
	for _, p := range pts {
		out = append(out, p.Attributes.Encoded(attribute.DefaultEncoder())+" count="+strconv.FormatUint(p.Count, 10))
	}
	slices.Sort(out)
	return out
}

// TestHTTPClientMetrics: the documented histogram, http.client.request.duration
// (http_client_request_duration_seconds in Prometheus), is recorded in seconds with
// the same attributes otelhttp gives it — method, server address and port, scheme,
// protocol, status code, or error type — one series per combination.
func TestHTTPClientMetrics(t *testing.T) {
	srv := newTelemetryServer(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	u, _ := url.Parse(srv.URL)
	host, portText, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portText)

	calls := []map[string]any{
		{"url": srv.URL + "/ok"},
		{"url": srv.URL + "/ok", "query": map[string]any{"a": "b"}},
		{"url": srv.URL + "/missing"},
		{"url": srv.URL + "/echo", "json": map[string]any{"n": int64(1)}},
		{"url": srv.URL + "/echo", "method": "purge"},
		{"url": downURL + "/gone"},
	}

	run := func(newRT func(mp metric.MeterProvider) http.RoundTripper) *sdkmetric.ManualReader {
		rd := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
		rt := newRT(mp)
		for _, c := range calls {
			callWith(t, context.Background(), rt, c)
		}
		return rd
	}
	ours := run(func(mp metric.MeterProvider) http.RoundTripper {
		return newClientTransport(http.DefaultTransport.(*http.Transport).Clone(), clientTelemetry{MeterProvider: mp})
	})
	theirs := run(func(mp metric.MeterProvider) http.RoundTripper {
		return otelhttp.NewTransport(http.DefaultTransport.(*http.Transport).Clone(),
			otelhttp.WithMeterProvider(mp), otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()))
	})

	got, m := histogram[float64](t, ours, "http.client.request.duration")
	if m.Unit != "s" || m.Description != "Duration of HTTP client requests." {
		t.Errorf("unit %q, description %q", m.Unit, m.Description)
	}
	want := attribute.NewSet(
		attribute.String("http.request.method", "GET"),
		attribute.String("server.address", host),
		attribute.Int("server.port", port),
		attribute.String("url.scheme", "http"),
		attribute.String("network.protocol.name", "http"),
		attribute.String("network.protocol.version", "1.1"),
		attribute.Int("http.response.status_code", 200),
	)
	p, ok := got[want.Equivalent()]
	if !ok {
		t.Fatalf("no series %s among\n%s", want.Encoded(attribute.DefaultEncoder()), strings.Join(sets(got), "\n"))
	}
	if p.Count != 2 || p.Sum <= 0 {
		t.Errorf("GET /ok: count %d, sum %v; want 2 requests measured", p.Count, p.Sum)
	}
	if n := len(p.Bounds); n == 0 || p.Bounds[0] != 0.005 || p.Bounds[n-1] != 10 {
		t.Errorf("buckets %v", p.Bounds)
	}

	// Every series is the one otelhttp made.
	ref, _ := histogram[float64](t, theirs, "http.client.request.duration")
	if diff := cmp.Diff(sets(ref), sets(got)); diff != "" {
		t.Errorf("series differ from otelhttp's (-otelhttp +ours):\n%s", diff)
	}
	refSize, _ := histogram[int64](t, theirs, "http.client.request.body.size")
	gotSize, _ := histogram[int64](t, ours, "http.client.request.body.size")
	if diff := cmp.Diff(sets(refSize), sets(gotSize)); diff != "" {
		t.Errorf("body size series differ from otelhttp's (-otelhttp +ours):\n%s", diff)
	}
	for k, p := range gotSize {
		if r := refSize[k]; p.Sum != r.Sum {
			t.Errorf("body size %s: sum %d, otelhttp %d", p.Attributes.Encoded(attribute.DefaultEncoder()), p.Sum, r.Sum)
		}
	}
}

// TestHTTPClientAttributeSetsReused: a second request of the same kind reuses the
// attribute set of the first.
func TestHTTPClientAttributeSetsReused(t *testing.T) {
	srv := newTelemetryServer(t)
	rt := newClientTransport(http.DefaultTransport.(*http.Transport).Clone(), clientTelemetry{MeterProvider: metricnoop.NewMeterProvider()})
	for range 3 {
		callWith(t, context.Background(), rt, map[string]any{"url": srv.URL + "/ok"})
	}
	callWith(t, context.Background(), rt, map[string]any{"url": srv.URL + "/missing"})
	if n := len(rt.sets); n != 2 {
		t.Errorf("%d attribute sets kept, want 2", n)
	}
}

// TestHTTPClientTracing: with tracing on, each request has a CLIENT span, child of
// the span in its context, whose context the server receives in traceparent; with
// tracing off, a trace context already in the context still reaches the server.
func TestHTTPClientTracing(t *testing.T) {
	srv := newTelemetryServer(t)
	tc := propagation.TraceContext{}
	mp := metricnoop.NewMeterProvider()

	t.Run("on", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(context.Background())
		rt := newClientTransport(http.DefaultTransport.(*http.Transport).Clone(), clientTelemetry{MeterProvider: mp, Propagator: tc})
		ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
		callWith(t, ctx, rt, map[string]any{"url": srv.URL + "/ok"})
		parent.End()

		var client tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.Name == "HTTP GET" {
				client = s
			}
		}
		if client.Name == "" {
			t.Fatalf("no HTTP GET span among %d", len(exp.GetSpans()))
		}
		if client.SpanKind != trace.SpanKindClient || client.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span kind %v, parent %v; want a CLIENT child of %v", client.SpanKind, client.Parent.SpanID(), parent.SpanContext().SpanID())
		}
		want := "00-" + client.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"
		if got := srv.lastTraceparent(); got != want {
			t.Errorf("traceparent %q, want %q", got, want)
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range client.Attributes {
			attrs[kv.Key] = kv.Value
		}
		if attrs["http.request.method"].AsString() != "GET" || attrs["http.response.status_code"].AsInt64() != 200 ||
			attrs["url.full"].AsString() != srv.URL+"/ok" {
			t.Errorf("span attributes %v", client.Attributes)
		}
	})

	t.Run("on with no span in the context", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(context.Background())
		rt := newClientTransport(http.DefaultTransport.(*http.Transport).Clone(), clientTelemetry{MeterProvider: mp, TracerProvider: tp, Propagator: tc})
		callWith(t, context.Background(), rt, map[string]any{"url": srv.URL + "/ok"})
		spans := exp.GetSpans()
		if len(spans) != 1 || spans[0].Name != "HTTP GET" {
			t.Fatalf("spans %v", spans)
		}
		if got, want := srv.lastTraceparent(), spans[0].SpanContext.SpanID().String(); !strings.Contains(got, want) {
			t.Errorf("traceparent %q, want span %s", got, want)
		}
	})

	t.Run("off, passing an incoming trace context on", func(t *testing.T) {
		rt := newClientTransport(http.DefaultTransport.(*http.Transport).Clone(), clientTelemetry{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(), Propagator: tc})
		const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		ctx := tc.Extract(context.Background(), propagation.MapCarrier{"traceparent": incoming})
		callWith(t, ctx, rt, map[string]any{"url": srv.URL + "/ok"})
		if got := srv.lastTraceparent(); got != incoming {
			t.Errorf("traceparent %q, want %q", got, incoming)
		}
		callWith(t, context.Background(), rt, map[string]any{"url": srv.URL + "/ok"})
		if got := srv.lastTraceparent(); got != "" {
			t.Errorf("traceparent %q with no trace context", got)
		}
	})
}

// TestHTTPClientGlobalProviders: the tool's own client (no HTTPConfig.Client) uses
// the global providers telemetry.Setup installs, installed before or after the
// tool is made. OpenTelemetry's global providers hand instruments made before the
// first one is installed to that one only, once per process, so the test runs in a
// process of its own (the test binary again), which also leaves this one's
// globals alone.
func TestHTTPClientGlobalProviders(t *testing.T) {
	if os.Getenv("TOOLTEST_GLOBAL_PROVIDERS") != "1" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHTTPClientGlobalProviders$", "-test.count=1", "-test.v", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), "TOOLTEST_GLOBAL_PROVIDERS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHTTPClientGlobalProviders") {
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		}
		return
	}
	srv := newTelemetryServer(t)
	h := NewHTTP(HTTPConfig{})

	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})

	ctx := WithPermissions(context.Background(), Permissions{Network: true})
	if _, err := h.Call(ctx, Call{Args: map[string]any{"url": srv.URL + "/ok"}}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "HTTP GET" {
		t.Fatalf("spans %v", spans)
	}
	if got, want := srv.lastTraceparent(), spans[0].SpanContext.SpanID().String(); !strings.Contains(got, want) {
		t.Errorf("traceparent %q, want span %s", got, want)
	}
	pts, _ := histogram[float64](t, rd, "http.client.request.duration")
	if len(pts) != 1 {
		t.Errorf("series %v", sets(pts))
	}

	// Tracing turned off: no span, and the metric still counts.
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	if _, err := h.Call(ctx, Call{Args: map[string]any{"url": srv.URL + "/ok"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans, want none more with tracing off", n)
	}
	if got := srv.lastTraceparent(); got != "" {
		t.Errorf("traceparent %q with tracing off and no trace context", got)
	}
	pts, _ = histogram[float64](t, rd, "http.client.request.duration")
	for _, p := range pts {
		if p.Count != 2 {
			t.Errorf("count %d, want 2", p.Count)
		}
	}
}

// BenchmarkHTTPCall measures a call of the http tool to a local server with the
// providers a worker has with tracing off (a metric SDK, a no-op tracer), through
// otelhttp's transport as the tool had it, through clientTransport, and through no
// instrumentation at all.
func BenchmarkHTTPCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"n":7,"items":["a","b","c"],"ok":true}`)
	}))
	defer srv.Close()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	defer func() {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}()

	base := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 64
		return t
	}
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"otelhttp", otelhttp.NewTransport(base())},
		{"clientTransport", newClientTransport(base(), clientTelemetry{})},
		{"bare", base()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := NewHTTP(HTTPConfig{Client: &http.Client{Transport: bc.rt}})
			ctx := WithPermissions(context.Background(), Permissions{Network: true})
			c := Call{Args: map[string]any{"url": srv.URL + "/x", "query": map[string]any{"n": "7"}}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Call(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundTrip is BenchmarkHTTPCall's transports alone, without the tool.
func BenchmarkRoundTrip(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	defer otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", Body: http.NoBody, Request: r}, nil
	})
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"otelhttp", otelhttp.NewTransport(ok, otelhttp.WithMeterProvider(mp))},
		{"clientTransport", newClientTransport(ok, clientTelemetry{MeterProvider: mp})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:8080/x?n=7", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPClientSpanRedactsTheURL: a request's span carries its url.full with every
// query value (the tool's query argument included) and the user info replaced by
// REDACTED, as OpenTelemetry's semantic conventions advise, and no attribute, event or
// status of the span holds them, whether the request got an answer or not.
func TestHTTPClientSpanRedactsTheURL(t *testing.T) {
	srv := newTelemetryServer(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	rt := newClientTransport(http.DefaultTransport.(*http.Transport).Clone(),
		clientTelemetry{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tp, Propagator: propagation.TraceContext{}})

	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("ada", "PASS-S3CR3T")
	u.Path = "/ok"
	u.RawQuery = "api_key=QUERY-S3CR3T&flag&page=2"
	u.Fragment = "FRAG-S3CR3T"
	// A port nothing listens on: the request fails, and its span's status says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/down?token=DOWN-S3CR3T"
	ln.Close()

	callWith(t, context.Background(), rt, map[string]any{"url": u.String(), "query": map[string]any{"sig": "ARG-S3CR3T"}})
	callWith(t, context.Background(), rt, map[string]any{"url": closed})

	want := map[string]bool{
		"http://REDACTED:REDACTED@" + u.Host + "/ok?api_key=REDACTED&flag=REDACTED&page=REDACTED&sig=REDACTED": false,
		"http://" + ln.Addr().String() + "/down?token=REDACTED":                                                false,
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if kv.Key == "url.full" {
				if _, ok := want[kv.Value.AsString()]; !ok {
					t.Errorf("url.full %q, want one of %v", kv.Value.AsString(), want)
				}
				want[kv.Value.AsString()] = true
			}
		}
		all := fmt.Sprint(s.Attributes, s.Events, s.Status, s.Name)
		if strings.Contains(all, "S3CR3T") {
			t.Errorf("a span holds a secret: %s", all)
		}
	}
	for u, seen := range want {
		if !seen {
			t.Errorf("no span with url.full %q", u)
		}
	}
}
