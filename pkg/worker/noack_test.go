package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// errsLogged keeps the errors of the records whose message has msg, and when
// each was logged.
type errsLogged struct {
	msg   string
	mu    sync.Mutex
	errs  []string
	times []time.Time
}

func (l *errsLogged) Enabled(context.Context, slog.Level) bool { return true }
func (l *errsLogged) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.msg) {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				l.mu.Lock()
				l.errs = append(l.errs, a.Value.String())
				l.times = append(l.times, r.Time)
				l.mu.Unlock()
			}
			return true
		})
	}
	return nil
}
func (l *errsLogged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errsLogged) WithGroup(string) slog.Handler      { return l }
func (l *errsLogged) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// span is the time between the first record kept and the last.
func (l *errsLogged) span() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.times) < 2 {
		return 0
	}
	return l.times[len(l.times)-1].Sub(l.times[0])
}

// A publish the server takes but never acknowledges — what a stream with a write
// error (a full disk) does: the message reaches it and no answer comes, so the
// publish ends in "timeout waiting for ack" — is a storage fault like a refusal:
// the worker keeps its finished execution and publishes it once acknowledgements
// come again, and never hands the job back to run its steps a second time.
//
// Deterministically: while the step runs, the events stream and the runs bucket
// give up their subjects and a subscriber that never answers takes them, so every
// publish of the worker there is delivered and unacknowledged.
func TestAPublishWithNoAckIsAStorageFaultNotAHandBack(t *testing.T) {
	t.Parallel()
	f := setup(t, oneStep("slow", "wait", 3))
	full := &errsLogged{msg: "cannot store"}
	// The worker's publishes wait 1.5s for their acknowledgements rather than the
	// default 10s: the worker keeps trying for two AckWaits after three of them,
	// not two of 10s. Still longer than the job's AckWait (1s).
	f.startWorkerOn(f.srv.Bus(t, bus.Config{PublishAckTimeout: 1500 * time.Millisecond}), "test", slog.New(full), nil)
	id := f.job("noack", "slow")
	<-f.blocked

	released := false
	defer func() {
		if !released {
			close(f.release)
		}
	}()
	var restore []jetstream.StreamConfig
	var silent []string
	for _, name := range []string{f.b.StreamEvents(), "KV_" + f.b.BucketRuns()} {
		st, err := f.b.JS.Stream(f.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		restore = append(restore, info.Config)
		silent = append(silent, info.Config.Subjects...)
		refusing := info.Config
		refusing.Subjects = []string{"parked." + name}
		if _, err := f.b.JS.UpdateStream(f.ctx, refusing); err != nil {
			t.Fatal(err)
		}
	}
	hole := f.srv.Conn(t)
	// Acks come again: before the worker stops, should the test fail first.
	unblocked := false
	unblock := func() {
		if unblocked {
			return
		}
		unblocked = true
		hole.Close()
		for _, cfg := range restore {
			if _, err := f.b.JS.UpdateStream(context.Background(), cfg); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unblock)
	for _, subj := range silent {
		if _, err := hole.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := hole.Flush(); err != nil {
		t.Fatal(err)
	}
	close(f.release)
	released = true
	natstest.Eventually(t, 30*time.Second, func() bool { return len(full.all()) > 0 }, "the worker did not say that it keeps the finished execution")
	for _, e := range full.all() {
		if !strings.Contains(e, "timeout") && !strings.Contains(e, "deadline") {
			t.Fatalf("the kept execution's error is %q, want no acknowledgement in time", e)
		}
	}
	// The worker keeps trying to store for longer than the job's AckWait (1s in
	// these tests), the job never delivered again meanwhile: a job handed back,
	// or left to lapse, would be redelivered, and its step run again once acks
	// come.
	natstest.Eventually(t, 30*time.Second, func() bool { return full.span() > 2*time.Second },
		"the worker did not keep trying to store for two AckWaits")
	cons, err := f.b.JS.Consumer(f.ctx, f.b.StreamJobs(), "worker-default")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.NumAckPending != 1 {
		t.Fatalf("jobs redelivered %d, ack pending %d while the worker kept trying to store; want 0 and 1 (the job held)", info.NumRedelivered, info.NumAckPending)
	}
	unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return len(f.events(id, events.TypeExecutionCompleted)) > 0 }, "no outcome once the server acknowledged again")
	f.drained()
	if n := f.calls["wait"].Load(); n != 1 {
		t.Fatalf("wait called %d times, want 1: the job was handed back on a missing ack and run again", n)
	}
	if n := len(f.events(id, events.TypeExecutionCompleted)); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}
