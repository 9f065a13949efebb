package cli_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// skillbus gateway --metrics-addr serves /livez, /readyz (ready once connected to
// NATS, with JetStream storing) and /metrics like every other long-running process.
// Started before the registry, it waits for the streams and the hooks bucket, and
// is not ready until then.
func TestGatewayProbes(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Skillbus(ctx, []string{"gateway", "--listen", "127.0.0.1:0", "--nats-url", srv.URL(), "--metrics-addr", "127.0.0.1:0"}, noEnv, &logs, &logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	}()
	// A service, it logs JSON by default, as the registry, router and worker do,
	// with durations as people write them.
	addrRE := regexp.MustCompile(`"msg":"serving /metrics, /livez and /readyz","addr":"([^"]+)"`)
	natstest.Eventually(t, 30*time.Second, func() bool { return addrRE.MatchString(logs.String()) }, "no metrics address in the log:\n%s", &logs)
	addr := addrRE.FindStringSubmatch(logs.String())[1]
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "waiting for the registry") && strings.Contains(logs.String(), "bucket hooks") && strings.Contains(logs.String(), `"retry_in":"250ms"`)
	}, "the gateway did not wait for the hooks bucket:\n%s", &logs)
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the streams exist: %d\n%s", code, body)
	}
	srv.Bus(t, bus.Config{}) // what the registry creates
	var ready string
	natstest.Eventually(t, 30*time.Second, func() bool {
		var code int
		code, ready = get("/readyz")
		return code == http.StatusOK
	}, "/readyz never became ready: %s", stringer(func() string { return ready }))
	if !strings.Contains(ready, "[+] nats ok") || !strings.Contains(ready, "[+] jetstream ok") {
		t.Errorf("/readyz lacks the NATS check:\n%s", ready)
	}
	if code, _ := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez: %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "target_info") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
}
