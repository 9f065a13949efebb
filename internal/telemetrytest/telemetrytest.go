// Package telemetrytest turns tracing on for a test, every span kept in memory.
package telemetrytest

import (
	"context"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Recorder holds the spans a test's processes end.
type Recorder struct {
	t   testing.TB
	exp *tracetest.InMemoryExporter
	tel *telemetry.Telemetry
}

// Record sets up telemetry as a skillbus process does, with every span sampled and
// exported to memory, and puts the global providers back when the test ends. It
// changes process-wide state: tests that call it must not run in parallel.
func Record(t testing.TB) *Recorder {
	t.Helper()
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		Getenv: func(string) string { return "" }, SpanExporter: keep{exp}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
	return &Recorder{t: t, exp: exp, tel: tel}
}

// Spans flushes the span batcher and returns every span ended so far.
func (r *Recorder) Spans() tracetest.SpanStubs {
	r.t.Helper()
	if p, ok := r.tel.TracerProvider.(interface{ ForceFlush(context.Context) error }); ok {
		if err := p.ForceFlush(context.Background()); err != nil {
			r.t.Fatal(err)
		}
	}
	return r.exp.GetSpans()
}

// Exporter is the in-memory exporter the spans go to, for tests that flush the
// global tracer provider themselves.
func (r *Recorder) Exporter() *tracetest.InMemoryExporter { return r.exp }

// keep makes the in-memory exporter survive the provider's Shutdown, which would
// otherwise forget the spans.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

// Flush flushes the global tracer provider's batcher, for tests that read the
// exporter themselves.
func Flush(t testing.TB) {
	t.Helper()
	if tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		if err := tp.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Attrs is a span's attributes as strings, by key.
func Attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// Named is the first span of spans called name; the test fails without one.
func Named(t testing.TB, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return tracetest.SpanStub{}
}
