package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestMetricsEndpoint(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	addr, err := tel.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := tel.Metrics
	m.Execution(ctx, "hello", "1.0.0", telemetry.OutcomeCompleted, 1500*time.Millisecond)
	m.Execution(ctx, "hello", "1.0.0", telemetry.OutcomeCompleted, 100*time.Millisecond)
	m.Execution(ctx, "hello", "1.0.0", telemetry.OutcomeFailed, time.Second)
	m.Execution(ctx, "hello", "2.0.0", telemetry.OutcomeCompleted, time.Second) // a series of its own
	m.Step(ctx, "hello", "tool", telemetry.OutcomeCompleted, 20*time.Millisecond)
	m.Retry(ctx, "hello", "retryable")
	m.Fallback(ctx, "hello", "fatal")
	m.DeadLetter(ctx, "hello", "fatal")
	m.Repair(ctx, "hello", telemetry.OutcomeCompleted)
	m.Route(ctx, telemetry.OutcomeRouted, "rule", 3*time.Millisecond)
	m.Route(ctx, telemetry.OutcomeUnmatched, "", time.Millisecond)
	unreg, err := m.ObserveConsumers(func(context.Context) []telemetry.ConsumerStat {
		return []telemetry.ConsumerStat{{Pool: "gpu", Stream: "JOBS", Consumer: "worker-gpu", Pending: 7, AckPending: 3}}
	})
	if err != nil {
		t.Fatal(err)
	}

	code, body := get(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`skillbus_executions_total{otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_outcome="completed",skillbus_skill_name="hello",skillbus_skill_version="1.0.0"} 2`,
		`skillbus_executions_total{otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_outcome="failed",skillbus_skill_name="hello",skillbus_skill_version="1.0.0"} 1`,
		`skillbus_executions_total{otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_outcome="completed",skillbus_skill_name="hello",skillbus_skill_version="2.0.0"} 1`,
		`skillbus_execution_duration_seconds_bucket{otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_outcome="completed",skillbus_skill_name="hello",skillbus_skill_version="1.0.0",le="2.5"} 2`,
		`skillbus_step_duration_seconds_count{`,
		`skillbus_retries_total{`,
		`skillbus_fallbacks_total{`,
		`skillbus_dead_letters_total{`,
		`skillbus_repairs_total{`,
		`skillbus_route_decisions_total{otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_outcome="routed",skillbus_route_method="rule"} 1`,
		`skillbus_route_duration_seconds_count{`,
		`skillbus_consumer_pending{messaging_consumer_group_name="worker-gpu",otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_pool="gpu",skillbus_stream="JOBS"} 7`,
		`skillbus_consumer_ack_pending{messaging_consumer_group_name="worker-gpu",otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_pool="gpu",skillbus_stream="JOBS"} 3`,
		`go_goroutines `,
		`target_info{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
	if err := unreg(); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, "http://"+addr+"/metrics"); strings.Contains(body, "skillbus_consumer_pending{") {
		t.Error("consumer gauges still reported after unregistering")
	}

	var nilMetrics *telemetry.Metrics
	nilMetrics.Execution(ctx, "x", "1", "completed", time.Second) // records nothing, does not panic
}

func TestProbes(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := tel.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	catalog := telemetry.NewFlag("catalog not loaded yet")
	tel.Health.Add("nats", func(context.Context) error { return nil })
	tel.Health.Add("catalog", catalog.Check)

	if code, body := get(t, "http://"+addr+"/livez"); code != 200 || body != "ok\n" {
		t.Errorf("/livez = %d %q", code, body)
	}
	code, body := get(t, "http://"+addr+"/readyz")
	if code != http.StatusServiceUnavailable || body != "[-] catalog: catalog not loaded yet\n[+] nats ok\nnot ready\n" {
		t.Errorf("/readyz before the catalog = %d %q", code, body)
	}
	catalog.Set(true)
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 || body != "[+] catalog ok\n[+] nats ok\nready\n" {
		t.Errorf("/readyz when ready = %d %q", code, body)
	}
	tel.Health.Add("stream", func(context.Context) error { return errors.New("stream JOBS:\nnot found") })
	if code, body := get(t, "http://"+addr+"/readyz"); code != 503 || !strings.Contains(body, "[-] stream: stream JOBS: not found\n") {
		t.Errorf("/readyz with a failing check = %d %q", code, body)
	}
	tel.Health.Remove("stream")
	if code, _ := get(t, "http://"+addr+"/readyz"); code != 200 {
		t.Errorf("/readyz after removing the failing check = %d", code)
	}

	// Liveness: a wedged part of the process (a consume loop that no longer
	// receives) makes /livez fail, so that the probe restarts the process.
	var wedged atomic.Bool
	tel.Live.Add("consume", func(context.Context) error {
		if wedged.Load() {
			return errors.New("consume: stalled: consumer worker-default: no message for 1m0s while 12 were waiting")
		}
		return nil
	})
	if code, body := get(t, "http://"+addr+"/livez"); code != 200 || body != "[+] consume ok\nok\n" {
		t.Errorf("/livez with a passing check = %d %q", code, body)
	}
	wedged.Store(true)
	if code, body := get(t, "http://"+addr+"/livez"); code != 503 || body != "[-] consume: consume: stalled: consumer worker-default: no message for 1m0s while 12 were waiting\nnot live\n" {
		t.Errorf("/livez with a failing check = %d %q", code, body)
	}
	if code, _ := get(t, "http://"+addr+"/readyz"); code != 200 {
		t.Errorf("/readyz follows a liveness check: %d", code)
	}

	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/livez"); err == nil {
		t.Error("the listener still serves after Shutdown")
	}
}

func TestLogHandler(t *testing.T) {
	exp := record(t)
	_ = exp
	var buf bytes.Buffer
	log := telemetry.Logger(slog.New(slog.NewJSONHandler(&buf, nil))).With("role", "worker")
	ctx, span := telemetry.Start(context.Background(), "work")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var in, out map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() || in["role"] != "worker" {
		t.Errorf("inside a span: %s", lines[0])
	}
	for _, l := range lines[1:] {
		if err := json.Unmarshal([]byte(l), &out); err != nil {
			t.Fatal(err)
		}
		if _, ok := out["trace_id"]; ok {
			t.Errorf("outside a span: %s", l)
		}
	}
}
