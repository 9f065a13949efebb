package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runDeadline is a job's run context under its Stop and parent (runContext): it
// ends at the run's time limit, when the run is cancelled (cancel: a lost claim, a
// stopped instruction run, the run's end) or when the delivery's context ends, as
// the context of context.WithDeadline (or WithCancel, without a limit) would. It
// makes that context, and its timer, only when something asks for Done: most runs
// never do — they ask Err between steps, which it answers from the clock — and
// end long before their limit. It lives in the job: a run that never asks for
// Done costs no allocation and no timer.
type runDeadline struct {
	parent   context.Context
	deadline time.Time // zero: none
	// cause is what ends c at its deadline (context.Cause), when the deadline is
	// the run's time limit: it names that limit.
	cause error
	mu    sync.Mutex
	err   error // why it ended, until made; then made's
	made  atomic.Pointer[madeCtx]
}

// madeCtx is the context a runDeadline made when Done was first asked for.
type madeCtx struct {
	ctx    context.Context
	cancel context.CancelFunc // nil for one made ended
}

// start sets c up as a context of parent that ends after limit (0: no limit),
// with cause as its context.Cause when the limit ends it.
func (c *runDeadline) start(parent context.Context, limit time.Duration, cause error) {
	c.parent, c.cause = parent, nil
	if limit > 0 {
		c.deadline, c.cause = time.Now().Add(limit), cause
		if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
			c.deadline, c.cause = d, nil
		}
	} else if d, ok := parent.Deadline(); ok {
		c.deadline = d
	}
}

func (c *runDeadline) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c *runDeadline) Done() <-chan struct{} { return c.ctx().Done() }

func (c *runDeadline) Err() error {
	if m := c.made.Load(); m != nil {
		return m.ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.made.Load(); m != nil {
		return m.ctx.Err()
	}
	if c.err == nil {
		if err := c.parent.Err(); err != nil {
			c.err = err
		} else if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			if c.cause != nil {
				// Made, so that context.Cause finds the cause.
				return c.makeLocked().ctx.Err()
			}
			c.err = context.DeadlineExceeded
		}
	}
	return c.err
}

func (c *runDeadline) Value(key any) any {
	if m := c.made.Load(); m != nil {
		return m.ctx.Value(key) // its cancelCtx, for the children of c to hang on
	}
	return c.parent.Value(key)
}

// ctx returns the context c stands for, making it the first time.
func (c *runDeadline) ctx() context.Context {
	if m := c.made.Load(); m != nil {
		return m.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.makeLocked().ctx
}

// makeLocked makes the context c stands for, if it has not been made; c.mu is
// held.
func (c *runDeadline) makeLocked() *madeCtx {
	if m := c.made.Load(); m != nil {
		return m
	}
	m := &madeCtx{}
	switch {
	case c.err != nil:
		m.ctx = endedCtx{Context: c.parent, err: c.err} // as Err said
	case !c.deadline.IsZero():
		m.ctx, m.cancel = context.WithDeadlineCause(c.parent, c.deadline, c.cause)
	default:
		m.ctx, m.cancel = context.WithCancel(c.parent)
	}
	c.made.Store(m)
	return m
}

// cancel ends c, if it has not ended, with context.Canceled, and releases the
// timer of a context it made.
func (c *runDeadline) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.made.Load(); m != nil {
		if m.cancel != nil {
			m.cancel()
		}
		return
	}
	if c.err == nil {
		c.err = context.Canceled
	}
}

// endedCtx is a context that has ended with err.
type endedCtx struct {
	context.Context
	err error
}

var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (e endedCtx) Done() <-chan struct{} { return closed }
func (e endedCtx) Err() error            { return e.err }
