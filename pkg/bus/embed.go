package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbedConfig configures an embedded nats-server with JetStream.
type EmbedConfig struct {
	// Host to listen on; default 127.0.0.1, so that nothing outside the machine can
	// reach an unauthenticated server by accident.
	Host string
	// Port to listen on; 0 means 4222, -1 a random free port.
	Port int
	// StoreDir holds JetStream's files; required.
	StoreDir string
	// SyncInterval is how often JetStream fsyncs its files; 0 keeps the server's
	// default (2 minutes). "always" is SyncAlways.
	SyncInterval time.Duration
	SyncAlways   bool
	// ServerName names the server; default "skillbus".
	ServerName string
	// Logging prints the server's own log lines.
	Logging bool
	// MaxStore caps the bytes JetStream stores (max_file_store); 0 means 75% of the
	// space free on StoreDir's filesystem at the first start, kept by Restart. Below the filesystem's size, a
	// full store refuses publishes with an error and takes them again as soon as
	// space is freed within it, where a full disk needs JetStream started again.
	MaxStore int64
	// User and Password, when Password is set, are the only credentials the server
	// takes (full permissions): a connection without them is refused. Default user
	// "skillbus".
	User, Password string
}

// Embedded is a running embedded server.
type Embedded struct {
	// Server is the server as started; Current is the one running after a Restart.
	Server *server.Server

	mu      sync.Mutex
	opts    server.Options
	logging bool
	lock    *os.File // the store's lock (lockStore), held until Shutdown
}

// StartEmbedded starts nats-server in this process and waits until it accepts
// connections.
func StartEmbedded(cfg EmbedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: StoreDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "skillbus"
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	if cfg.Port > 0 {
		// nats-server reports a busy port by logging and exiting; check first so the
		// user gets an error that says what to do.
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
		if err != nil {
			unlockStore(lock)
			return nil, fmt.Errorf("embedded nats: cannot listen on %s:%d (%v); is another skillbus dev or nats-server running? Stop it, or pick another port with --port (and another store with --store: two servers cannot share one)", cfg.Host, cfg.Port, err)
		}
		ln.Close()
	}
	opts := &server.Options{
		ServerName:         cfg.ServerName,
		Host:               cfg.Host,
		Port:               cfg.Port,
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		SyncInterval:       cfg.SyncInterval,
		SyncAlways:         cfg.SyncAlways,
		NoSigs:             true,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: -1,
		JetStreamMaxStore:  -1,
	}
	if cfg.MaxStore > 0 {
		opts.JetStreamMaxStore = cfg.MaxStore
	}
	if cfg.Password != "" {
		if cfg.User == "" {
			cfg.User = "skillbus"
		}
		opts.Users = []*server.User{{Username: cfg.User, Password: cfg.Password}}
	}
	e := &Embedded{opts: *opts, logging: cfg.Logging, lock: lock}
	s, err := e.start()
	if err != nil {
		unlockStore(lock)
		return nil, err
	}
	e.Server = s
	// A restart listens where this one does, a port picked at random included.
	e.opts.Port = s.Addr().(*net.TCPAddr).Port
	// and keeps the store limit this start resolved: left at -1, a restart after a
	// full disk would take 75% of the little space then free, fall below what is
	// stored, and find the store full at its own limit.
	if js := s.JetStreamConfig(); js != nil {
		e.opts.JetStreamMaxStore = js.MaxStore
	}
	return e, nil
}

func (e *Embedded) start() (*server.Server, error) {
	opts := e.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if e.logging {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown() // before the caller gives the store's lock back
		return nil, errors.New("embedded nats: not ready for connections after 10s")
	}
	return s, nil
}

// Current is the server running now.
func (e *Embedded) Current() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.Server
}

// Restart shuts the server down and starts it again on the same address and store,
// as a restart of the process would: clients reconnect, and JetStream loads its
// streams and consumers from disk (dropping the write errors a full disk left).
func (e *Embedded) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	s, err := e.start()
	if err != nil {
		return err
	}
	e.Server = s
	return nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.Current().ClientURL() }

// Shutdown stops the server and waits for it, then gives the store's lock back.
func (e *Embedded) Shutdown() {
	s := e.Current()
	s.Shutdown()
	s.WaitForShutdown()
	e.mu.Lock()
	unlockStore(e.lock)
	e.lock = nil
	e.mu.Unlock()
}

// Connect dials NATS with the options every skillbus process wants: a name that shows
// in monitoring, reconnecting forever, and a larger reconnect buffer so a short outage
// does not fail publishes.
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	base := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(64 << 20),
	}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}
