package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

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
