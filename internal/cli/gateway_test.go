package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// skillbus dev --gateway: a curl-shaped CloudEvent runs hello through the whole
// system and the answer carries its result.
func TestDevGateway(t *testing.T) {
	t.Parallel()
	logs := startDev(t, "--workers", "1", "--gateway", "127.0.0.1:0")
	url := devLine(t, logs, `HTTP gateway on (http://127\.0\.0\.1:\d+)`)[1]
	req, _ := http.NewRequest(http.MethodPost, url+"/events?wait=30s", strings.NewReader(`{"name":"Ada"}`))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "dev-1", "ce-source": "/curl", "ce-type": "com.example.greet", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status  string         `json:"status"`
		Outputs map[string]any `json:"outputs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Status != "completed" || out.Outputs["greeting"] != "Hello, Ada!" {
		t.Fatalf("%d %v %+v\n%s", resp.StatusCode, err, out, logs)
	}
}

// Without a token or a secret, the gateway refuses to listen beyond loopback.
func TestGatewayOpenOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	for _, args := range [][]string{
		{"gateway", "--listen", "0.0.0.0:0", "--nats-url", srv.URL()},
		{"gateway", "--listen", ":0", "--nats-url", srv.URL()},
		{"dev", "--port", "-1", "--store", t.TempDir(), "--skills", filepath.Join("..", "..", "testdata", "skills"), "--gateway", "0.0.0.0:0"},
	} {
		var out natstest.Buffer
		err := cli.Skillbus(context.Background(), args, noEnv, &out, &out)
		if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "SKILLBUS_GATEWAY_TOKENS") {
			t.Errorf("%v: %v", args, err)
		}
	}
	err := cli.Skillbus(context.Background(), []string{"gateway", "--listen", "127.0.0.1:0", "--nats-url", srv.URL(), "--hooks", "/nonexistent.yaml"}, noEnv, &natstest.Buffer{}, &natstest.Buffer{})
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "--hooks") {
		t.Errorf("missing hooks file: %v", err)
	}
}

// A gateway and a console on loopback answer only requests made for a loopback
// name or one allowed: a web page whose own name resolves to 127.0.0.1 (DNS
// rebinding) gets 421, and its event is not published.
func TestDevRefusesRequestsForOtherHosts(t *testing.T) {
	t.Parallel()
	logs := startDev(t, "--workers", "1", "--gateway", "127.0.0.1:0", "--allow-host", "proxy.example", "--ui", "127.0.0.1:0")
	gw := devLine(t, logs, `HTTP gateway on (http://127\.0\.0\.1:\d+)`)[1]
	ui := devLine(t, logs, `web console on (http://127\.0\.0\.1:\d+)`)[1]
	do := func(method, url, host, id string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(`{"name":"Ada"}`))
		req.Host = host
		for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "/curl", "ce-type": "com.example.greet", "Content-Type": "application/json"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do(http.MethodPost, gw+"/events?wait=30s", "rebind.evil.example:8080", "rebound"); code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allow-host NAME") {
		t.Errorf("gateway, Host rebind.evil.example: %d %s", code, body)
	}
	if code, body := do(http.MethodPost, gw+"/events?wait=30s", "proxy.example", "proxied"); code != http.StatusOK || !strings.Contains(body, "Hello, Ada!") {
		t.Errorf("gateway, Host proxy.example (allowed): %d %s", code, body)
	}
	if code, body := do(http.MethodGet, ui+"/", "rebind.evil.example:8090", ""); code != http.StatusMisdirectedRequest || !strings.Contains(body, "--ui-allow-host NAME") {
		t.Errorf("console, Host rebind.evil.example: %d %s", code, body)
	}
	if code, body := do(http.MethodGet, ui+"/", "localhost", ""); code != http.StatusOK || !strings.Contains(body, "hello") {
		t.Errorf("console, Host localhost: %d %.300s", code, body)
	}
	// The refused event never ran: the console has the allowed one's run, and
	// not the refused one's.
	run := func(id string) string { return ui + "/runs/" + events.ExecutionID("/curl", id, "hello") }
	natstest.Eventually(t, 30*time.Second, func() bool {
		code, _ := do(http.MethodGet, run("proxied"), "localhost", "")
		return code == http.StatusOK
	}, "the console never showed the allowed event's run")
	if code, _ := do(http.MethodGet, run("rebound"), "localhost", ""); code != http.StatusNotFound {
		t.Errorf("the refused event's run: %d, want 404", code)
	}
}
