package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a JetStream cluster of servers in this process, each with its own
// store, client port and cluster port on loopback.
type Cluster struct {
	t       testing.TB
	Servers []*Server
}

// StartCluster starts an n-node JetStream cluster and waits until it has a meta
// leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{t: t}
	for i := range n {
		s := &Server{t: t, opts: server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
			Cluster:    server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		}}
		s.start()
		// Restarts keep the client port, so clients find the node again.
		s.opts.Port = s.Server.Addr().(*net.TCPAddr).Port
		t.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
	}
	c.WaitMetaLeader()
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URLs is every node's client URL, comma-separated, as clients take it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port))
	}
	return strings.Join(urls, ",")
}

// WaitMetaLeader waits until a running node is the JetStream meta leader and every
// running node knows the others.
func (c *Cluster) WaitMetaLeader() {
	c.t.Helper()
	Eventually(c.t, 30*time.Second, func() bool {
		leader := false
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			if !s.Server.JetStreamIsCurrent() {
				return false
			}
			leader = leader || s.Server.JetStreamIsLeader()
		}
		return leader
	}, "no JetStream meta leader")
}

// Node returns the node named name (n1, n2, ...).
func (c *Cluster) Node(name string) *Server {
	for _, s := range c.Servers {
		if s.opts.ServerName == name {
			return s
		}
	}
	c.t.Fatalf("natstest: no node %q", name)
	return nil
}

// Running reports whether the server is up.
func (s *Server) Running() bool { return s.Server != nil && s.Server.Running() }

// Stop shuts the server down, keeping its port and store for Start.
func (s *Server) Stop() { s.Shutdown() }

// Start starts a stopped server again on the same port and store.
func (s *Server) Start() {
	s.t.Helper()
	s.start()
}
