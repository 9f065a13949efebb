package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/otlptest"
)

type stringer func() string

func (f stringer) String() string { return f() }

// TestDevObservability runs `skillbus dev` with --metrics-addr and the OTEL_*
// variables, waits for /readyz, scrapes /metrics, and publishes a trigger with
// `skillbus trigger`, whose producer span reaches the OTLP receiver.
func TestDevObservability(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv := func(service string) cli.Env {
		kv := map[string]string{}
		for _, e := range rcv.Env(service) {
			k, v, _ := strings.Cut(e, "=")
			kv[k] = v
		}
		return func(k string) string { return kv[k] }
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Skillbus(ctx, []string{"dev", "--port", "-1", "--store", t.TempDir(), "--skills", "../../testdata/skills",
			"--skills", "../../testdata/e2e", "--backoff-base", "20ms", "--backoff-max", "50ms",
			"--workers", "1", "--metrics-addr", "127.0.0.1:0"}, otelEnv("skillbus-dev"), io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop")
		}
	}()

	addrRE := regexp.MustCompile(`serving /metrics, /livez and /readyz" addr=(\S+)`)
	urlRE := regexp.MustCompile(`NATS\s+(nats://\S+)`)
	var addr, natsURL string
	natstest.Eventually(t, 30*time.Second, func() bool {
		out := stderr.String()
		if m := addrRE.FindStringSubmatch(out); m != nil {
			addr = m[1]
		}
		if m := urlRE.FindStringSubmatch(out); m != nil {
			natsURL = m[1]
		}
		return addr != "" && natsURL != ""
	}, "dev did not report its metrics address and NATS URL:\n%s", &stderr)

	var ready string
	natstest.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ready = string(b)
		return resp.StatusCode == http.StatusOK
	}, "/readyz never became ready: %s", stringer(func() string { return ready }))
	for _, check := range []string{"[+] nats ok", "[+] streams ok", "[+] consumer router ok", "[+] consumer worker-default ok",
		"[+] catalog router ok", "[+] catalog worker "} {
		if !strings.Contains(ready, check) {
			t.Errorf("/readyz lacks %q:\n%s", check, ready)
		}
	}
	// Liveness includes the consume loops (router, worker): receiving, or nothing waits.
	if resp, err := http.Get("http://" + addr + "/livez"); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "[+] consume ok\nok\n" {
			t.Errorf("/livez = %d %q", resp.StatusCode, b)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `skillbus_consumer_pending{messaging_consumer_group_name="worker-default"`) ||
		!strings.Contains(string(b), `skillbus_consumer_ack_pending{messaging_consumer_group_name="router"`) {
		t.Errorf("/metrics lacks the consumers' backlog:\n%.3000s", b)
	}
	if !strings.Contains(string(b), "go_goroutines") || !strings.Contains(string(b), `target_info{`) || !strings.Contains(string(b), `service_name="skillbus-dev"`) {
		t.Errorf("/metrics lacks the runtime metrics or the service's target_info:\n%.2000s", b)
	}

	var out bytes.Buffer
	if err := cli.Skillbus(ctx, []string{"trigger", "--nats-url", natsURL, "--skill", "hello", "--data", `{"name":"Ada"}`},
		otelEnv("skillbus-cli"), &out, &out); err != nil {
		t.Fatalf("trigger: %v\n%s", err, out.String())
	}
	// trigger flushed its spans before returning.
	spans := rcv.Spans()
	pub := otlptest.Must(t, spans, "publish skillbus.trigger.skill.hello")
	if pub.Service != "skillbus-cli" || pub.ParentSpanID != "" || pub.Attrs["messaging.system"] != "nats" || pub.Attrs["skillbus.skill.name"] != "hello" {
		t.Errorf("publish span %v attrs %v", pub, pub.Attrs)
	}

	// A known workload, then every metric it moves: hello completes; an order of 50
	// makes reserve-stock fail and fall back to queue-backorder; always-retry is
	// retried twice and dead-lettered; an event nobody listens for is unmatched.
	for _, args := range [][]string{
		{"com.example.order.created", "--data", `{"order_id":"ORD-1","quantity":50}`},
		{"--skill", "always-retry", "--data", `{}`},
		{"com.example.nobody.listens", "--data", `{}`},
	} {
		out.Reset()
		if err := cli.Skillbus(ctx, append([]string{"trigger", "--nats-url", natsURL}, args...), otelEnv("skillbus-cli"), &out, &out); err != nil {
			t.Fatalf("trigger %v: %v\n%s", args, err, out.String())
		}
	}
	label := func(name, value string) string { return `[^}]*` + name + `="` + regexp.QuoteMeta(value) + `"` }
	metric := func(name string, labels ...string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + name + `\{` + strings.Join(labels, "") + `[^}]*\} `)
	}
	want := []struct {
		re    *regexp.Regexp
		value string
	}{
		{metric("skillbus_executions_total", label("skillbus_outcome", "completed"), label("skillbus_skill_name", "hello"), label("skillbus_skill_version", "1.0.0")), "1"},
		{metric("skillbus_executions_total", label("skillbus_outcome", "fallback"), label("skillbus_skill_name", "reserve-stock")), "1"},
		{metric("skillbus_executions_total", label("skillbus_outcome", "completed"), label("skillbus_skill_name", "queue-backorder")), "1"},
		{metric("skillbus_executions_total", label("skillbus_outcome", "failed"), label("skillbus_skill_name", "always-retry")), "1"},
		{metric("skillbus_execution_duration_seconds_count", label("skillbus_outcome", "completed"), label("skillbus_skill_name", "hello")), "1"},
		{metric("skillbus_step_duration_seconds_count", label("skillbus_outcome", "completed"), label("skillbus_skill_name", "hello"), label("skillbus_step_kind", "compute")), "1"},
		{metric("skillbus_step_duration_seconds_count", label("skillbus_outcome", "completed"), label("skillbus_skill_name", "hello"), label("skillbus_step_kind", "tool")), "1"},
		{metric("skillbus_retries_total", label("skillbus_failure_class", "retryable"), label("skillbus_skill_name", "always-retry")), "2"},
		{metric("skillbus_fallbacks_total", label("skillbus_failure_class", "fatal"), label("skillbus_skill_name", "reserve-stock")), "1"},
		{metric("skillbus_dead_letters_total", label("skillbus_failure_class", "retryable"), label("skillbus_skill_name", "always-retry")), "1"},
		{metric("skillbus_route_decisions_total", label("skillbus_outcome", "routed"), label("skillbus_route_method", "rule")), "1"},
		{metric("skillbus_route_decisions_total", label("skillbus_outcome", "unmatched")), "1"},
		{metric("skillbus_route_duration_seconds_count", label("skillbus_outcome", "unmatched")), "1"},
		{metric("skillbus_consumer_pending", label("messaging_consumer_group_name", "worker-default"), label("skillbus_pool", "default")), "0"},
		{metric("skillbus_consumer_ack_pending", label("messaging_consumer_group_name", "worker-default"), label("skillbus_pool", "default")), "0"},
		{metric("skillbus_consumer_pending", label("messaging_consumer_group_name", "router")), "0"},
	}
	var scraped string
	missing := func() []string {
		var m []string
		for _, w := range want {
			line := w.re.FindString(scraped)
			i := w.re.FindStringIndex(scraped)
			if i == nil {
				m = append(m, w.re.String()+" (absent)")
				continue
			}
			rest := scraped[i[1]:]
			if end := strings.IndexByte(rest, '\n'); end >= 0 {
				rest = rest[:end]
			}
			if rest != w.value {
				m = append(m, line+rest+" (want "+w.value+")")
			}
		}
		return m
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scraped = string(b)
		return len(missing()) == 0
	}, "/metrics after the workload: %s", stringer(func() string { return strings.Join(missing(), "\n") }))
}
