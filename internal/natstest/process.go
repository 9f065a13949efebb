//go:build cluster

// The process cluster serves the tests built with the cluster tag (make
// test-cluster) alone.

package natstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ProcessCluster is a JetStream cluster of nats-server processes, built from the
// nats-server module this repository depends on, so that a node can be killed with
// SIGKILL — no shutdown, no leadership hand-over, unsynced writes lost — as a
// crashed machine or an OOM-killed pod would be.
type ProcessCluster struct {
	t     testing.TB
	Nodes []*Process
}

// Process is one nats-server process of a ProcessCluster.
type Process struct {
	t              testing.TB
	Name           string
	Port, HTTPPort int
	bin, conf, log string
	cmd            *exec.Cmd
	done           chan struct{}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// serverBinary builds nats-server once per test binary (the Go build cache makes
// later builds quick), with BuildFlags.
func serverBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natstest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "nats-server")
		args := append([]string{"build"}, BuildFlags()...)
		args = append(args, "-o", builtBin, "github.com/nats-io/nats-server/v2")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// StartProcessCluster starts an n-node JetStream cluster of nats-server processes
// on loopback, each with its own store, and waits until every node is healthy and
// the cluster has a meta leader. The processes are killed by t.Cleanup; their logs
// are printed if the test failed.
func StartProcessCluster(t testing.TB, n int) *ProcessCluster {
	t.Helper()
	bin := serverBinary(t)
	c := &ProcessCluster{t: t}
	cports := make([]int, n)
	var routes []string
	for i := range n {
		cports[i] = FreePort(t)
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats://127.0.0.1:%d", cports[i])))
	}
	for i := range n {
		dir := t.TempDir()
		p := &Process{t: t, Name: fmt.Sprintf("n%d", i+1), Port: FreePort(t), HTTPPort: FreePort(t), bin: bin,
			conf: filepath.Join(dir, "nats.conf"), log: filepath.Join(dir, "nats.log")}
		// A cluster name of its own: a route that reaches another test's cluster
		// (another test process's ports) is refused instead of joining the two.
		conf := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
max_payload: 8MB
log_file: %q
jetstream { store_dir: %q }
cluster { name: test-%d, listen: "127.0.0.1:%d", routes: [%s] }
`, p.Name, p.Port, p.HTTPPort, p.log, filepath.Join(dir, "js"), cports[0], cports[i], strings.Join(routes, ", "))
		if err := os.WriteFile(p.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		p.Start()
		c.Nodes = append(c.Nodes, p)
	}
	t.Cleanup(func() {
		for _, p := range c.Nodes {
			p.Kill()
			if t.Failed() {
				if b, err := os.ReadFile(p.log); err == nil {
					// Without the retries of routes to a node that is down.
					var lines []string
					for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
						if !strings.Contains(l, "Error trying to connect to route") {
							lines = append(lines, l)
						}
					}
					t.Logf("%s log (last 60 lines but route retries):\n%s", p.Name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
				}
			}
		}
	})
	c.WaitHealthy(time.Minute)
	return c
}

// URLs is every node's client URL, comma-separated, as clients take it.
func (c *ProcessCluster) URLs() string {
	var urls []string
	for _, p := range c.Nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p.Port))
	}
	return strings.Join(urls, ",")
}

// Node returns the node named name (n1, n2, ...).
func (c *ProcessCluster) Node(name string) *Process {
	for _, p := range c.Nodes {
		if p.Name == name {
			return p
		}
	}
	c.t.Fatalf("natstest: no node %q", name)
	return nil
}

// MetaLeader is the name of the node leading the cluster's JetStream metadata, as
// the running nodes' monitoring endpoints report it ("" while there is none).
func (c *ProcessCluster) MetaLeader() string {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		var jsz struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if p.getJSON("/jsz", &jsz) == nil && jsz.Meta.Leader != "" {
			return jsz.Meta.Leader
		}
	}
	return ""
}

// WaitHealthy waits until every running node answers /healthz with 200 (JetStream
// current, its streams and consumers caught up) and there is a meta leader.
func (c *ProcessCluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	Eventually(c.t, d, func() bool {
		for _, p := range c.Nodes {
			if p.Running() && !p.Healthy() {
				return false
			}
		}
		return c.MetaLeader() != ""
	}, "the cluster did not become healthy")
}

// Start starts the node's process (again, on the same ports and store) and waits
// until it accepts connections.
func (p *Process) Start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, "-c", p.conf)
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("natstest: start %s: %v", p.Name, err)
	}
	done := make(chan struct{})
	p.done = done
	cmd := p.cmd
	go func() { _ = cmd.Wait(); close(done) }()
	Eventually(p.t, 30*time.Second, func() bool {
		var v struct{}
		return p.getJSON("/varz", &v) == nil
	}, "nats-server %s did not start (log %s)", p.Name, p.log)
}

// Kill sends SIGKILL to the node's process and waits until it is gone.
func (p *Process) Kill() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Healthy reports whether the node's /healthz answers 200.
func (p *Process) Healthy() bool {
	resp, err := httpClient.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", p.HTTPPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func (p *Process) getJSON(path string, v any) error {
	resp, err := httpClient.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.HTTPPort, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
