// Package storage makes JetStream storage faults loud and short: readiness checks
// that fail, with the reason, while the server cannot write (a full disk, a store
// error, JetStream disabled or at its storage limit), a classifier that tells such
// faults from other errors, and, for a server embedded in this process, a guard that
// starts JetStream again once space returns.
//
// nats-server 2.15 keeps a stream's first write error (ENOSPC included) until the
// stream is loaded again: freeing space alone does not help, and a publish to that
// stream gets no acknowledgement. A clustered server short of space disables
// JetStream altogether. Neither is undone without restarting the server; Guard does
// that for an embedded server, and an external server needs its operator to.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrFault is what every storage fault reported by this package wraps.
var ErrFault = errors.New("JetStream cannot store messages")

// Fault reports what stops the embedded server s from storing messages: nil when
// nothing does.
func Fault(s *server.Server) error {
	if !s.JetStreamEnabled() {
		return fmt.Errorf("%w: JetStream is disabled (the server turns it off when its store cannot be written)", ErrFault)
	}
	if hz := s.Healthz(&server.HealthzOptions{}); hz != nil && hz.Error != "" {
		return fmt.Errorf("%w: %s", ErrFault, hz.Error)
	}
	if jsz, err := s.Jsz(&server.JSzOptions{}); err == nil && jsz.Config.MaxStore > 0 {
		used, limit := int64(jsz.Store), jsz.Config.MaxStore
		if limit-used < limitMargin(limit) {
			return fmt.Errorf("%w: its store is full: %s of its %s limit (max_file_store) used", ErrFault, size(used), size(limit))
		}
	}
	return nil
}

// limitMargin is how close to its storage limit a server is counted full: the
// room of a few ordinary messages.
func limitMargin(limit int64) int64 { return min(256<<10, limit/64) }

// AccountInfoer answers for a JetStream account: a *bus.Bus is one, and so is a
// jetstream.JetStream.
type AccountInfoer interface {
	AccountInfo(ctx context.Context) (*jetstream.AccountInfo, error)
}

// ErrNotChecked is a readiness check that could not ask the server: the NATS
// connection is down, so whether JetStream can store is not known.
var ErrNotChecked = errors.New("cannot be checked until NATS is reachable again (see the nats check)")

// Remote is a readiness check against a server this process is connected to: it
// fails while the server answers that JetStream is disabled. A server that keeps
// JetStream on while a stream cannot write says so only on its monitoring port
// (see Healthz). While js's connection (when it has one: a *bus.Bus, a
// jetstream.JetStream) is not up, it fails with ErrNotChecked instead of blaming
// the store for a server it cannot reach.
func Remote(js AccountInfoer) func(context.Context) error {
	down := func() bool {
		c, ok := js.(interface{ Conn() *nats.Conn })
		return ok && c.Conn() != nil && !c.Conn().IsConnected()
	}
	return func(ctx context.Context) error {
		if down() {
			return ErrNotChecked
		}
		_, err := js.AccountInfo(ctx)
		switch {
		case err == nil:
			return nil
		case down():
			// Lost while asking: the question went unanswered for that.
			return ErrNotChecked
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return fmt.Errorf("%w: the NATS server has JetStream disabled (%v): it was started without it (nats-server -js, or jetstream {} in its configuration file), or it turned it off because its store could not be written (free space, then restart nats-server)", ErrFault, err)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			// A server that shut JetStream down leaves its API unanswered.
			return fmt.Errorf("%w: JetStream did not answer (%v): it is disabled (a store that could not be written; free space, then restart nats-server) or the server is overloaded", ErrFault, err)
		default:
			return fmt.Errorf("JetStream account info: %w", err)
		}
	}
}

// Healthz is a readiness check that fails while the nats-server monitoring
// endpoint url (http://host:8222/healthz) does: a stream that hit a write error,
// JetStream disabled. client nil means a client with a 2s timeout.
func Healthz(url string, client *http.Client) func(context.Context) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("nats-server healthz %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("nats-server healthz %s: %w", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		return fmt.Errorf("%w: nats-server healthz %s answered %s: %s", ErrFault, url, resp.Status, strings.TrimSpace(string(body)))
	}
}

// IsFault reports whether err is what a write gets from a server that cannot
// store it just then: no acknowledgement in time, no stream answering, JetStream
// disabled, out of resources or a store failure, or the connection away. Work that
// failed so is retried until it succeeds, never given up after a number of tries.
func IsFault(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrFault) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrConnectionClosed) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsInsufficientResources, jsStorageResourcesExceeded, jsStreamStoreFailed:
			return true
		}
		return apiErr.Code == http.StatusServiceUnavailable
	}
	return false
}

// JetStream API error codes of storage faults (nats-server's
// jetstream_errors_generated.go).
const (
	jsInsufficientResources    jetstream.ErrorCode = 10023
	jsStorageResourcesExceeded jetstream.ErrorCode = 10047
	jsStreamStoreFailed        jetstream.ErrorCode = 10077
)

func size(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
