package router

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

func reminderSkill() *skill.Skill {
	return &skill.Skill{Name: "remind", Description: "reminds a customer of an unpaid order", Kind: skill.KindWorkflow, Digest: "rem1nd0123456789",
		Triggers: []string{"com.example.order.created"},
		CancelOn: []skill.CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: skill.Duration(time.Hour)}}}
}

// cancelOnToken is the token a skill's first cancel_on rule files a run of a
// trigger with data under.
func cancelOnToken(t *testing.T, s *skill.Skill, data map[string]any) string {
	t.Helper()
	p, err := flow.CompileMatch(s.CancelOn[0].Match)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := (&cancelRule{match: p}).runToken(&flow.Event{Data: data})
	if !ok {
		t.Fatalf("no token for %v", data)
	}
	return tok
}

// An event routed while the run it cancels is being started — routed after the
// run's trigger was published, before the run's cancel_on key was written,
// because routers route triggers in parallel or because the trigger's routing
// failed at a write and is retried — still cancels the run.
func TestCancelOnEventRoutedBeforeTheRunsKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		retry bool // the trigger's routing fails there, and is retried
	}{{"in parallel", false}, {"retried after a write failed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The trigger's routing stops before the run's key is written, until
			// the event is routed.
			ctx, b, held, paidRouted := reminderHeldAt(t, "cancelon.index", tc.retry)
			publishTrigger(t, ctx, b, "c1", "com.example.order.created", `{"order": 1}`)
			select {
			case <-held:
			case <-ctx.Done():
				t.Fatal("order.created was not routed")
			}
			// The run's keys come before its job: no worker can start a run
			// an event would not find (and whose sender would hear that it
			// cancelled nothing).
			if n := count(t, ctx, b, b.StreamJobs(), "skillbus.exec.default.remind.>"); n != 0 {
				t.Fatalf("%d jobs of remind published before its cancel_on key", n)
			}
			publishTrigger(t, ctx, b, "p1", "com.example.order.paid", `{"order": 1}`)
			unmatched := b.Subjects.Event(events.ActivationID("/test", "p1"), events.TypeRouteUnmatched)
			natstest.Eventually(t, 20*time.Second, func() bool { return count(t, ctx, b, b.StreamEvents(), unmatched) == 1 }, "order.paid was not routed")
			close(paidRouted)

			runs, err := b.KV(ctx, b.BucketRuns())
			if err != nil {
				t.Fatal(err)
			}
			exec := events.ExecutionID("/test", "c1", "remind")
			var c *run.Cancel
			natstest.Eventually(t, 20*time.Second, func() bool {
				c, err = run.LoadCancel(ctx, runs, exec)
				return err == nil && c != nil
			}, "the run of order 1 was not cancelled (err %v)", err)
			if c.By != "cancel_on" {
				t.Fatalf("cancel: %+v", c)
			}
			natstest.Eventually(t, 20*time.Second, func() bool { return consumerIdle(t, ctx, b) }, "triggers still pending")
			tok := cancelOnToken(t, reminderSkill(), map[string]any{"order": 1.0})
			if _, err := runs.Get(ctx, events.RunCancelOnKey("remind", "com.example.order.paid", tok, exec)); err == nil {
				t.Fatal("the cancelled run's cancel_on key is left")
			}
		})
	}
}

// An event routed after a run's cancel_on key is written and before its job is
// published cancels the run in KV runs, where a worker's copy of the cancels may
// not have it yet when the job comes: the job of a run with cancel_on keys says
// to read the cancel from KV runs (found in review).
func TestCancelOnBetweenTheKeyAndTheJob(t *testing.T) {
	t.Parallel()
	ctx, b, held, paidRouted := reminderHeldAt(t, "plan.publish", false)
	publishTrigger(t, ctx, b, "c1", "com.example.order.created", `{"order": 1}`)
	<-held
	publishTrigger(t, ctx, b, "p1", "com.example.order.paid", `{"order": 1}`)
	unmatched := b.Subjects.Event(events.ActivationID("/test", "p1"), events.TypeRouteUnmatched)
	natstest.Eventually(t, 20*time.Second, func() bool { return count(t, ctx, b, b.StreamEvents(), unmatched) == 1 }, "order.paid was not routed")
	runs, _ := b.KV(ctx, b.BucketRuns())
	exec := events.ExecutionID("/test", "c1", "remind")
	if c, err := run.LoadCancel(ctx, runs, exec); err != nil || c == nil || c.By != "cancel_on" {
		t.Fatalf("no cancel of the run before its job: %+v (%v)", c, err)
	}
	close(paidRouted)
	st, _ := b.JS.Stream(ctx, b.StreamJobs())
	var m *jetstream.RawStreamMsg
	var err error
	natstest.Eventually(t, 20*time.Second, func() bool {
		m, err = st.GetLastMsgForSubject(ctx, "skillbus.exec.default.remind.>")
		return err == nil
	}, "no job")
	if m.Header.Get(events.HeaderCheckCancel) == "" {
		t.Errorf("the job of a run cancelled before it was published carries no %s (headers %v): a worker on the fast path may run it", events.HeaderCheckCancel, m.Header)
	}
}

// reminderHeldAt starts a router of reminderSkill on a server of its own. Its
// routing of the first trigger to reach the fault point stops there until
// release is closed, then fails if fail is set; held is closed when it stops.
func reminderHeldAt(t *testing.T, point string, fail bool) (ctx context.Context, b *bus.Bus, held, release chan struct{}) {
	t.Helper()
	srv := natstest.Start(t)
	b = srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r, err := New(Config{Bus: b, Catalog: staticCatalog([]*skill.Skill{reminderSkill()}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxEventBytes: 64 << 10, RetryBase: 50 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	held, release = make(chan struct{}), make(chan struct{})
	var once atomic.Int32
	r.faults = func(p string) error {
		if p != point || !once.CompareAndSwap(0, 1) {
			return nil
		}
		close(held)
		select {
		case <-release:
		case <-ctx.Done():
		}
		if fail {
			return errors.New("injected: a write failed")
		}
		return nil
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return ctx, b, held, release
}
