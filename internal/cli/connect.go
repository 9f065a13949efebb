package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
)

// Waiting for NATS at start: the first retry after connectRetryMin, doubling up to
// connectRetryMax.
const (
	connectRetryMin = 250 * time.Millisecond
	connectRetryMax = 10 * time.Second
)

// registerAuth adds the TLS and credential flags beside --creds and --tls-ca.
func (c *common) registerAuth(cmd *cobra.Command, getenv Env) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.tlsCert, "tls-cert", getenv("SKILLBUS_NATS_CERT"), "client certificate for NATS servers that verify clients (mTLS), with --tls-key ($SKILLBUS_NATS_CERT)")
	f.StringVar(&c.tlsKey, "tls-key", getenv("SKILLBUS_NATS_KEY"), "private key of --tls-cert ($SKILLBUS_NATS_KEY)")
	f.StringVar(&c.nkey, "nkey", getenv("SKILLBUS_NATS_NKEY"), "file holding a NATS user nkey seed (SU...) to authenticate with ($SKILLBUS_NATS_NKEY)")
}

// natsOptions are the connection options the flags and environment ask for.
func (c *common) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
	}
	if c.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(c.nkey)
		if err != nil {
			return nil, usage("--nkey %s: %v", c.nkey, err)
		}
		opts = append(opts, o)
	}
	if user := c.natsUser(); user != "" {
		opts = append(opts, nats.UserInfo(user, c.password))
	}
	if c.tlsCA != "" {
		opts = append(opts, nats.RootCAs(c.tlsCA))
	}
	switch {
	case c.tlsCert != "" && c.tlsKey != "":
		opts = append(opts, nats.ClientCert(c.tlsCert, c.tlsKey))
	case c.tlsCert != "" || c.tlsKey != "":
		return nil, usage("--tls-cert and --tls-key go together: give both, or neither")
	}
	if log := c.log; log != nil {
		// Once disconnected the connection no longer names its server: remember it.
		var last atomic.Value
		last.Store("")
		opts = append(opts,
			nats.ConnectHandler(func(nc *nats.Conn) { last.Store(nc.ConnectedUrlRedacted()) }),
			nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
				if err != nil {
					log.Warn("NATS disconnected; reconnecting", "server", last.Load(), "err", err)
				} else if !nc.IsClosed() {
					log.Warn("NATS disconnected; reconnecting", "server", last.Load())
				}
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				last.Store(nc.ConnectedUrlRedacted())
				log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted(), "server_name", nc.ConnectedServerName())
			}),
			nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
				server := nc.ConnectedUrlRedacted()
				if server == "" {
					server = last.Load().(string) // disconnected: the server it had
				}
				attrs := []any{"server", server, "err", err}
				if sub != nil {
					attrs = append(attrs, "subject", sub.Subject)
				}
				if errors.Is(err, nats.ErrConsumerNotActive) {
					// A consumer's heartbeats stopped: the server restarting or away,
					// which the disconnect and reconnect lines say; consuming resumes.
					log.Warn("NATS consumer heartbeats missed", attrs...)
					return
				}
				log.Error("NATS error", attrs...)
			}),
		)
	}
	return opts, nil
}

// connectWait connects like connect, but while no NATS server answers it waits,
// retrying with backoff and saying so, until ctx ends: a service started before
// NATS (in Kubernetes, in compose) waits for it instead of crashing. Errors a retry
// cannot fix — bad credentials, a TLS mismatch, bad flags — are returned at once.
func (c *common) connectWait(ctx context.Context, name string, log *slog.Logger) (*bus.Bus, error) {
	wait := connectRetryMin
	for {
		b, err := c.connect(name)
		if err == nil || !retryable(err) {
			if err == nil && wait > connectRetryMin {
				log.Info("connected to NATS", "server", b.ServerURL())
			}
			return b, err
		}
		log.Warn("waiting for NATS", "url", c.natsURL, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, connectRetryMax)
	}
}

// retryable reports whether a connection error may go away by itself: nothing is
// listening yet, the server is still starting, or it went away in the middle of the
// handshake (a restart: the connection is reset or closed before its INFO).
func retryable(err error) bool {
	s := err.Error()
	if strings.Contains(s, "tls:") || strings.Contains(s, "x509:") || strings.Contains(s, "Authorization Violation") {
		return false // a configuration to fix, whatever the connection did
	}
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	for _, m := range []string{"connection refused", "no such host", "i/o timeout", "connection reset by peer", "broken pipe", "EOF"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// defaultNATSUser is the user a password alone signs in as: the one skillbus dev
// makes when it is given $SKILLBUS_NATS_PASSWORD alone.
const defaultNATSUser = "skillbus"

// natsUser is the user to sign in as: $SKILLBUS_NATS_USER, or with a password and no
// user, defaultNATSUser.
func (c *common) natsUser() string {
	if c.user == "" && c.password != "" {
		return defaultNATSUser
	}
	return c.user
}

// connectError explains a connection failure.
func (c *common) connectError(err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(err.Error(), "Authorization Violation"):
		who := "the user and password ($SKILLBUS_NATS_USER, $SKILLBUS_NATS_PASSWORD)"
		switch {
		case c.password != "" && c.user == "":
			who = fmt.Sprintf("the password: it was tried as user %s, the user when $SKILLBUS_NATS_PASSWORD is set and $SKILLBUS_NATS_USER is not; set $SKILLBUS_NATS_USER to sign in as another", defaultNATSUser)
		case c.user != "":
			who = fmt.Sprintf("the user and password: user %s from $SKILLBUS_NATS_USER, and $SKILLBUS_NATS_PASSWORD", c.user)
		}
		return fmt.Errorf("%w (check %s, --creds or --nkey)", err, who)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w (a file the connection needs: check --creds, --nkey, --tls-ca, --tls-cert and --tls-key)", err)
	case strings.Contains(err.Error(), "tls:"), strings.Contains(err.Error(), "x509:"), errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("%w (check --tls-ca, --tls-cert and --tls-key against the server's TLS settings)", err)
	}
	return fmt.Errorf("%w (is a NATS server running there? 'skillbus dev' starts one; or point --nats-url at yours)", err)
}

// startRetry runs start (a process's start-up after it connected: streams, consumers,
// the catalog) until it succeeds, fails for a reason other than the server being
// away, or ctx ends. A server that goes away while a process starts — killed,
// restarting, electing a leader — times its requests out; the process waits for it
// with backoff, as it waits to connect, instead of exiting.
func startRetry(ctx context.Context, log *slog.Logger, what string, start func() error) error {
	wait := connectRetryMin
	for {
		err := start()
		if err == nil || ctx.Err() != nil || !startRetryable(err) {
			return err
		}
		msg := ": start-up interrupted; NATS is not answering, trying again"
		if strings.Contains(err.Error(), "does not run JetStream") {
			msg = ": start-up waits for JetStream, which the NATS server does not run; trying again" // bus.NoJetStream's
		}
		log.Warn(what+msg, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, connectRetryMax)
	}
}

// startRetryable reports whether a start-up error means the server did not answer
// (yet), rather than that something is wrong.
func startRetryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}
