package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A run's context ends as context.WithDeadline's would: at its limit, on cancel,
// or with its parent; whether or not Done was asked for before it ended, and so
// do the contexts made from it.
func TestRunDeadline(t *testing.T) {
	t.Parallel()
	type ending struct {
		name string
		end  func(c *runDeadline, cancelParent context.CancelFunc)
		want error
	}
	endings := []ending{
		{"limit", func(c *runDeadline, _ context.CancelFunc) { time.Sleep(time.Until(c.deadline)) }, context.DeadlineExceeded},
		{"cancel", func(c *runDeadline, _ context.CancelFunc) { c.cancel() }, context.Canceled},
		{"parent", func(_ *runDeadline, cancelParent context.CancelFunc) { cancelParent() }, context.Canceled},
	}
	for _, e := range endings {
		for _, doneFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/done-asked-first=%v", e.name, doneFirst), func(t *testing.T) {
				t.Parallel()
				parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), parentKey{}, "p"))
				defer cancelParent()
				var c runDeadline
				limit := 50 * time.Millisecond
				cause := errors.New("the skill's timeout")
				c.start(parent, limit, cause)
				defer c.cancel()
				if d, ok := c.Deadline(); !ok || time.Until(d) > limit {
					t.Fatalf("deadline %v, %v; want within %v", d, ok, limit)
				}
				if c.Value(parentKey{}) != "p" {
					t.Fatal("the parent's values are not the context's")
				}
				if err := c.Err(); err != nil {
					t.Fatalf("Err %v before the end", err)
				}
				var done <-chan struct{}
				var child context.Context
				if doneFirst {
					done = c.Done()
					var cancelChild context.CancelFunc
					child, cancelChild = context.WithCancel(&c)
					defer cancelChild()
				}
				e.end(&c, cancelParent)
				if doneFirst {
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("Done not closed at the end")
					}
				}
				if err := c.Err(); !errors.Is(err, e.want) {
					t.Fatalf("Err %v, want %v", err, e.want)
				}
				select {
				case <-c.Done():
				default:
					t.Fatal("Done asked for after the end is not closed")
				}
				if err := c.Err(); !errors.Is(err, e.want) {
					t.Fatalf("Err %v after Done, want %v", err, e.want)
				}
				if child == nil {
					var cancelChild context.CancelFunc
					child, cancelChild = context.WithCancel(&c)
					defer cancelChild()
				}
				select {
				case <-child.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("a context made from it did not end with it")
				}
				// The limit's cause is the context's and its children's, so a
				// failure can say which time limit ended it.
				wantCause := e.want
				if e.want == context.DeadlineExceeded {
					wantCause = cause
				}
				if got := context.Cause(&c); got != wantCause {
					t.Errorf("Cause %v, want %v", got, wantCause)
				}
				if got := context.Cause(child); got != wantCause {
					t.Errorf("Cause of a child %v, want %v", got, wantCause)
				}
			})
		}
	}
}

// Without a limit a run's context ends only on cancel or with its parent.
func TestRunDeadlineWithoutLimit(t *testing.T) {
	t.Parallel()
	var c runDeadline
	c.start(context.Background(), 0, nil)
	if _, ok := c.Deadline(); ok {
		t.Fatal("a deadline without a limit")
	}
	done := c.Done()
	if c.Err() != nil {
		t.Fatal("ended before cancel")
	}
	c.cancel()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err %v, want Canceled", c.Err())
	}
}
