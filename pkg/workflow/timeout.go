package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
)

// TimeoutError is a time limit that ended a run's context or a step's: a step's
// timeout (Step names the step) or the skill's. It is the cause (context.Cause)
// of the context it ends, so that a failure it caused says which limit fired and
// how long it was, where context.DeadlineExceeded alone says neither.
type TimeoutError struct {
	// Step is the step whose timeout it is; "" for the skill's.
	Step string
	// Limit is the timeout.
	Limit time.Duration
	// Default says the skill's timeout is the default, not one it sets.
	Default bool
}

func (e *TimeoutError) Error() string {
	switch {
	case e.Step != "":
		return "the step's timeout of " + limitString(e.Limit)
	case e.Default:
		return "the skill's timeout of " + limitString(e.Limit) + " (the default; a skill sets its own with timeout:)"
	}
	return "the skill's timeout of " + limitString(e.Limit)
}

// limitString writes a timeout as a skill would: 2s, 5m, 1h30m.
func limitString(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// timeoutOf is the TimeoutError that ended ctx, or nil when ctx has not ended,
// or ended otherwise.
func timeoutOf(ctx context.Context) *TimeoutError {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	var te *TimeoutError
	if errors.As(context.Cause(ctx), &te) {
		return te
	}
	return nil
}

// timedOut is err, the failure of work done under ctx, saying which timeout
// stopped it when one of them ended ctx; its class is err's.
func timedOut(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	te := timeoutOf(ctx)
	if te == nil || errors.As(err, new(*TimeoutError)) {
		return err
	}
	return failure.Wrap(failure.ClassOf(err), fmt.Errorf("stopped by %w: %w", te, err))
}

// stopped is why ctx ended: its error, after the timeout that ended it when one
// did ("stopped by the skill's timeout of 3s: context deadline exceeded"); nil
// when it has not ended.
func stopped(ctx context.Context) error {
	err := ctx.Err()
	if te := timeoutOf(ctx); te != nil {
		return fmt.Errorf("stopped by %w: %w", te, err)
	}
	return err
}
