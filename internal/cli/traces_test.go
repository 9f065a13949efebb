package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// skillbus traces prints a trace an OTLP exporter sends it as a tree, once it has
// gone quiet: the child under its parent, the error on the failed span.
func TestTracesPrintsATree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out, errs := &natstest.Buffer{}, &natstest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- cli.Skillbus(ctx, []string{"traces", "--listen", "127.0.0.1:0", "--quiet", "200ms"}, noEnv, out, errs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("traces: %v", err)
		}
	}()
	re := regexp.MustCompile(`receiving traces on (http://127\.0\.0\.1:\d+)`)
	natstest.Eventually(t, 10*time.Second, func() bool { return re.MatchString(errs.String()) }, "traces did not start:\n%s", errs)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(re.FindStringSubmatch(errs.String())[1]+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("svc"))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	sctx, root := tr.Start(context.Background(), "process trigger")
	_, child := tr.Start(sctx, "step fetch")
	child.SetStatus(codes.Error, "boom")
	child.End()
	root.End()
	natstest.Eventually(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "step fetch") }, "no trace printed:\n%s", out)
	got := out.String()
	if !regexp.MustCompile(`(?m)^trace [0-9a-f]{32} \(2 spans\)\n  process trigger  \[svc\] .*\n    step fetch  \[svc\] .*ERROR boom$`).MatchString(got) {
		t.Errorf("not the tree:\n%s", got)
	}
}
