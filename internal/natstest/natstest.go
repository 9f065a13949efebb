// Package natstest starts real nats-servers with JetStream inside tests: random port,
// storage in t.TempDir(), shut down by t.Cleanup.
package natstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/bus"
)

// Server is a running test server.
type Server struct {
	t      testing.TB
	opts   server.Options
	Server *server.Server
}

// Start starts a JetStream server on a free loopback port (FreePort).
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith starts a JetStream server like Start after edit has changed its options
// (a fixed port, TLS, users).
func StartWith(t testing.TB, edit func(*server.Options)) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		ServerName: "test",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	}}
	if edit != nil {
		edit(&s.opts)
	}
	if s.opts.Port == -1 {
		// A port of the kernel's ephemeral range would be free for anyone while
		// a test stops its server to start it again (Stop, Restart): another
		// test's server or an outgoing connection could take it, and the test's
		// clients would reconnect to that. FreePort's are outside that range,
		// and no other test's.
		s.opts.Port = FreePort(t)
	}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(&s.opts)
	if err != nil {
		s.t.Fatalf("natstest: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("natstest: server not ready")
	}
	s.Server = srv
}

// URL is the client URL.
func (s *Server) URL() string { return s.Server.ClientURL() }

// Restart shuts the server down and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.opts.Port = s.Server.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.start()
}

// Shutdown stops the server; idempotent.
func (s *Server) Shutdown() {
	if s.Server != nil {
		s.Server.Shutdown()
		s.Server.WaitForShutdown()
	}
}

// Conn connects to the server, closed by t.Cleanup.
func (s *Server) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Bus connects and creates skillbus's streams and buckets.
func (s *Server) Bus(t testing.TB, cfg bus.Config) *bus.Bus {
	t.Helper()
	b, err := bus.New(s.Conn(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A bound for a hung server, not a wait: creating every stream and bucket took
	// over 10 s on a 2-core machine loaded by other tests.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// Eventually polls cond every few milliseconds until it holds or d passes.
func Eventually(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: "+format, append([]any{d}, args...)...)
		}
		time.Sleep(wait) // polling interval of a condition, not a wait for an event
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Stop shuts the server down, keeping its port and store for Start.
func (s *Server) Stop() {
	s.opts.Port = s.Server.Addr().(*net.TCPAddr).Port
	s.Shutdown()
}

// Start starts a stopped server again on the same port and store.
func (s *Server) Start() {
	s.t.Helper()
	s.start()
}
