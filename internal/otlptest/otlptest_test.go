package otlptest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReceiver(t *testing.T) {
	rcv := otlptest.Start(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.Endpoint()+"/v1/traces"), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("svc"))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")

	ctx, root := tr.Start(context.Background(), "root")
	_, child := tr.Start(ctx, "child", trace.WithLinks(trace.Link{SpanContext: root.SpanContext()}))
	child.SetAttributes(semconv.MessagingDestinationName("subj"))
	child.End()
	root.End()

	spans := rcv.WaitSpans(t, 10*time.Second, "root", "child")
	r, c := otlptest.Must(t, spans, "root"), otlptest.Must(t, spans, "child")
	otlptest.AssertChild(t, r, c)
	otlptest.AssertLinked(t, c, r)
	if r.Service != "svc" || r.ParentSpanID != "" || c.Attrs["messaging.destination.name"] != "subj" || c.Kind != 1 {
		t.Errorf("root %v, child %v %v", r, c, c.Attrs)
	}
	if got := otlptest.InTrace(spans, r.TraceID); len(got) != 2 {
		t.Errorf("InTrace = %d spans", len(got))
	}
	if tree := otlptest.Tree(spans); !strings.Contains(tree, "\n  svc \"child\"") {
		t.Errorf("Tree does not nest the child:\n%s", tree)
	}
}
