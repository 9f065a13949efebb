package tool

import (
	"context"
	"sync"
	"time"
)

// DefaultStopGrace is how long the processes of a stopped call have, after
// SIGTERM, before their process group is killed, unless Stop.Grace says otherwise.
const DefaultStopGrace = 5 * time.Second

// Stop asks a run to end early without cutting short what it is doing: a
// workflow starts no further step once a stop is requested, and the exec tool
// sends the processes of a call under way SIGTERM, then SIGKILL after Grace. It
// differs from cancelling the run's context, which aborts every call at once
// (an HTTP request mid-flight included).
//
// The zero Stop is ready to use; a Stop must not be copied after first use.
type Stop struct {
	// Grace is how long processes have between SIGTERM and SIGKILL; zero:
	// DefaultStopGrace. Set it before the Stop is shared.
	Grace time.Duration

	mu    sync.Mutex
	cause error
	done  chan struct{} // made when first asked for: most runs never are stopped
}

// Request stops the run with cause (which must not be nil). It reports whether
// this was the first request; later ones change nothing.
func (s *Stop) Request(cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		return false
	}
	s.cause = cause
	if s.done == nil {
		s.done = closedChan
	} else {
		close(s.done)
	}
	return true
}

// Err returns the cause of the stop, or nil while none was requested. A nil Stop
// is never stopped.
func (s *Stop) Err() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// Done returns a channel closed when a stop is requested.
func (s *Stop) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

func (s *Stop) grace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return DefaultStopGrace
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

type stopKey struct{}

// WithStop returns ctx carrying s, for the workflow engine and the exec tool to
// find.
func WithStop(ctx context.Context, s *Stop) context.Context {
	return context.WithValue(ctx, stopKey{}, s)
}

// StopContext is ctx carrying Stop, like WithStop's, for a caller that keeps it
// in a struct it allocates anyway: a pointer to it is a context.Context that costs
// no allocation of its own.
type StopContext struct {
	context.Context
	Stop *Stop
}

// Value returns the Stop for StopFrom, and asks the parent for anything else.
func (c *StopContext) Value(key any) any {
	if _, ok := key.(stopKey); ok {
		return c.Stop
	}
	return c.Context.Value(key)
}

// StopFrom returns the Stop that WithStop put on ctx, or nil.
func StopFrom(ctx context.Context) *Stop {
	s, _ := ctx.Value(stopKey{}).(*Stop)
	return s
}
