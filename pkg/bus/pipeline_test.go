package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A publish no stream takes is sent again a few times, in case a stream is
// electing its leader, then fails with jetstream.ErrNoStreamResponse, as
// PublishMsgAsync's would.
func TestBatchNoStreamFailsAfterRetries(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bt := b.Batch()
	bt.Publish(&nats.Msg{Subject: "nostream.x", Data: []byte("x")})
	start := time.Now()
	err := bt.Wait(ctx)
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("Wait = %v, want ErrNoStreamResponse", err)
	}
	// Two retries, 250 ms apart.
	if d := time.Since(start); d < 2*jetstream.DefaultPubRetryWait {
		t.Errorf("Wait failed after %v, before its retries", d)
	}
}

// A publish whose acknowledgement is still due when the connection is lost fails
// at once with nats.ErrDisconnected rather than waiting out PublishAckTimeout: the
// acknowledgement may have gone with the connection.
func TestBatchFailsOnDisconnect(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{PublishAckTimeout: time.Minute})
	swallow := srv.Conn(t) // takes the publish and never answers
	sub, err := swallow.SubscribeSync("lost.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	bt := b.Batch()
	bt.Publish(&nats.Msg{Subject: "lost.x", Data: []byte("x")})
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("the publish did not go out: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- bt.Wait(context.Background()) }()
	srv.Restart()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrDisconnected) {
			t.Fatalf("Wait = %v, want ErrDisconnected", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait still blocked 30s after the connection was lost")
	}
	// The batch's unacknowledged publish is what Resend sends again.
	var again []string
	bt.Resend(b.Batch(), func(m *nats.Msg) bool { again = append(again, m.Subject); return true })
	if len(again) != 1 || again[0] != "lost.x" {
		t.Fatalf("Resend offers %v, want [lost.x]", again)
	}
}

// A Wait whose context ends returns its error, and the publishes it did not see
// acknowledged are what Resend sends again; their acknowledgements, when they
// come, are no one's.
func TestBatchWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	swallow := srv.Conn(t)
	if _, err := swallow.SubscribeSync("lost.>"); err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	bt := b.Batch()
	bt.PublishEvent(b.Subjects.Event("e1", "io.skillbus.test"), bus.Event{ID: "e1", Source: "/t", Type: "io.skillbus.test", Data: 1})
	bt.Publish(&nats.Msg{Subject: "lost.x", Data: []byte("x")})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := bt.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	var again []string
	bt.Resend(b.Batch(), func(m *nats.Msg) bool { again = append(again, m.Subject); return true })
	if len(again) != 1 || again[0] != "lost.x" {
		t.Fatalf("Resend offers %v, want only the unacknowledged [lost.x]", again)
	}
}

// A message given to a batch is the batch's: once JetStream has it, Wait takes
// its buffer back for the pool and leaves the message without data; one whose
// publish failed keeps its data for Resend. A create-only message given twice is
// still reported a duplicate by its event id, read before its buffer goes back.
func TestBatchGive(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{PublishAckTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj := b.Subjects.Exec("default", "x", "a1", "plan")
	for round := range 2 {
		m, err := bus.Event{ID: "e1.job", Source: "/t", Type: "io.skillbus.job", Data: round}.PooledMsg(subj)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := bus.Event{ID: "e1.done", Source: "/t", Type: "io.skillbus.test", Data: round}.PooledMsg(b.Subjects.Event("e1", "io.skillbus.test"))
		if err != nil {
			t.Fatal(err)
		}
		bt := b.Batch()
		bt.GiveCreate(m)
		bt.Give(ev)
		if err := bt.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Data != nil || ev.Data != nil || m.Header != nil || ev.Header != nil {
			t.Fatalf("round %d: a given message acknowledged keeps its data or headers", round)
		}
		if got := bt.Duplicate("e1.job"); got != (round == 1) {
			t.Fatalf("round %d: Duplicate(e1.job) = %v", round, got)
		}
		if got := bt.Duplicate("e1.done"); got != (round == 1) {
			t.Fatalf("round %d: Duplicate(e1.done) = %v", round, got)
		}
	}

	swallow := srv.Conn(t) // takes the publish and never answers
	if _, err := swallow.SubscribeSync("lost.>"); err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	lost, err := bus.Event{ID: "l1", Source: "/t", Type: "io.skillbus.test", Data: 1}.PooledMsg("lost.x")
	if err != nil {
		t.Fatal(err)
	}
	data := string(lost.Data)
	bt := b.Batch()
	bt.Give(lost)
	if err := bt.Wait(ctx); !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		t.Fatalf("Wait = %v, want ErrAsyncPublishTimeout", err)
	}
	var again []string
	bt.Resend(b.Batch(), func(m *nats.Msg) bool { again = append(again, string(m.Data)); return true })
	if len(again) != 1 || again[0] != data {
		t.Fatalf("Resend offers %q, want the unacknowledged message's data %q", again, data)
	}
}

// Two Waits of one batch at once both return, and once a Wait returns nil every
// message queued before it is stored, those the other Wait took first too.
func TestBatchConcurrentWaits(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := b.JS.Stream(ctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		bt := b.Batch()
		done := make(chan error, 2)
		for w := range 2 {
			var subjects []string
			for i := range 20 {
				id := fmt.Sprintf("r%d.w%d.%d", round, w, i)
				subject := b.Subjects.Event(id, "io.skillbus.test")
				subjects = append(subjects, subject)
				bt.PublishEvent(subject, bus.Event{ID: id, Source: "/t", Type: "io.skillbus.test", Data: i})
			}
			go func() {
				err := bt.Wait(ctx)
				for _, subject := range subjects {
					if err != nil {
						break
					}
					if _, serr := events.GetLastMsgForSubject(ctx, subject); serr != nil {
						err = fmt.Errorf("returned before %s was stored: %v", subject, serr)
					}
				}
				done <- err
			}()
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatalf("round %d: Wait = %v", round, err)
			}
		}
	}
}

// A Wait behind another gives up when its context ends, rather than when the other
// is done; what it queued is waited for by the next Wait.
func TestBatchWaitBehindAnotherHonoursItsContext(t *testing.T) {
	t.Parallel()
	b, bt, swallow, a, first := firstWaitHeld(t, "slow")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	subject := b.Subjects.Event("queued", "io.skillbus.test")
	bt.PublishEvent(subject, bus.Event{ID: "queued", Source: "/t", Type: "io.skillbus.test", Data: 1})
	short, stop := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() { second <- bt.Wait(short) }()
	natstest.Eventually(t, 10*time.Second, func() bool { return bt.Waits() == 2 }, "the second Wait never began")
	stop()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("second Wait = %v, want its context's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Wait, its context ended, still waits for the first")
	}
	if err := swallow.Publish(a.Reply, []byte(`{"stream":"X","seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first Wait = %v", err)
	}
	if err := bt.Wait(ctx); err != nil {
		t.Fatalf("a third Wait, for what the second queued: %v", err)
	}
	events, err := b.JS.Stream(ctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.GetLastMsgForSubject(ctx, subject); err != nil {
		t.Fatalf("what the second Wait queued was not stored: %v", err)
	}
}

// A Wait behind another that fails fails too: the publishes the other took were
// queued before it, and are not all stored.
func TestBatchWaitBehindAFailedWaitFails(t *testing.T) {
	t.Parallel()
	b, bt, swallow, a, first := firstWaitHeld(t, "held")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	bt.Publish(&nats.Msg{Subject: "held.b", Data: []byte("b")})
	second := make(chan error, 1)
	go func() { second <- bt.Wait(ctx) }()
	natstest.Eventually(t, 10*time.Second, func() bool { return bt.Waits() == 2 }, "the second Wait never began")
	if err := swallow.Publish(a.Reply, []byte(`{"error":{"code":503,"err_code":10077,"description":"stream store failed"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err == nil || !strings.Contains(err.Error(), "stream store failed") {
		t.Fatalf("first Wait = %v, want the refusal", err)
	}
	select {
	case err := <-second:
		if err == nil || !strings.Contains(err.Error(), "stream store failed") {
			t.Fatalf("second Wait = %v, want the first's refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Wait, behind a failed one, still waits")
	}
	var again []string
	bt.Resend(b.Batch(), func(m *nats.Msg) bool { again = append(again, m.Subject); return true })
	if !slices.Equal(again, []string{"held.a", "held.b"}) {
		t.Errorf("Resend offers %q, want held.a and held.b", again)
	}
}

// A given message whose Wait failed while a publish of it was still waiting to be
// sent again (no stream had answered it) can be resent on another batch and
// acknowledged there before that publish goes out again: the publish going out
// again still sends the message as it was given, so that a create-only subject
// ends up with the one message the first acknowledgement stored, not a second,
// emptied one without its headers.
func TestBatchGivenMessageResentWhileRetrying(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{PublishAckTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The test answers batch A's publishes itself, each when it chooses.
	swallow := srv.Conn(t)
	sub, err := swallow.SubscribeSync("rev.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	next := func(what string) *nats.Msg {
		t.Helper()
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("%s did not go out: %v", what, err)
		}
		return m
	}
	job, err := bus.Event{ID: "j1", Source: "/t", Type: "io.skillbus.job", Data: 1}.PooledMsg("rev.j1")
	if err != nil {
		t.Fatal(err)
	}
	data := string(job.Data)

	a := b.Batch()
	a.Publish(&nats.Msg{Subject: "rev.first", Data: []byte("x")})
	a.GiveCreate(job)
	first, sentJob := next("rev.first"), next("rev.j1")
	// The first publish is refused: A's Wait fails there, before the job's.
	if err := swallow.Publish(first.Reply, []byte(`{"error":{"code":503,"err_code":10077,"description":"duplicate message id is in process"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(ctx); err == nil {
		t.Fatal("Wait of A succeeded, want the first publish's refusal")
	}

	// Now a stream takes the job, resent on batch B.
	if _, err := b.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "REV", Subjects: []string{"rev.j1"}}); err != nil {
		t.Fatal(err)
	}
	bb := b.Batch()
	a.Resend(bb, func(m *nats.Msg) bool { return m.Subject == "rev.first" })
	if err := bb.Wait(ctx); err != nil {
		t.Fatalf("Wait of B = %v", err)
	}
	next("B's publish of rev.j1")

	// Then A's publish of the job hears that no stream took it (as it would
	// have, had the stream been electing its leader), and goes out again.
	answers, err := swallow.SubscribeSync(sentJob.Reply)
	if err != nil {
		t.Fatal(err)
	}
	noResponders := &nats.Msg{Subject: sentJob.Reply, Header: nats.Header{"Status": []string{"503"}}}
	if err := swallow.PublishMsg(noResponders); err != nil {
		t.Fatal(err)
	}
	again := next("A's publish of rev.j1, again")
	if again.Reply != sentJob.Reply {
		t.Fatalf("got a publish with reply %q, want A's %q sent again", again.Reply, sentJob.Reply)
	}
	if string(again.Data) != data || again.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != "0" {
		t.Errorf("A's publish went out again as %q with headers %v, want %q create-only", again.Data, again.Header, data)
	}
	for { // the stream's answer to it, after the test's own 503
		m, err := answers.NextMsg(10 * time.Second)
		if errors.Is(err, nats.ErrNoResponders) {
			continue
		}
		if err != nil {
			t.Fatalf("no answer from the stream to A's publish sent again: %v", err)
		}
		if len(m.Data) > 0 {
			break
		}
	}
	s, err := b.JS.Stream(ctx, "REV")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the create-only subject holds %d messages, want 1", info.State.Msgs)
	}
}

// A publish that no stream answered has PublishAckTimeout again each time it is
// sent again, as PublishMsgAsync's has: with a timeout shorter than its retries
// take, one a stream takes on its last retry (a leader elected meanwhile) still
// succeeds, and one that is never answered then still times out.
func TestBatchRetryHasItsTimeoutAgain(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	const timeout = 400 * time.Millisecond // < the 2 retries' 500 ms
	b := srv.Bus(t, bus.Config{PublishAckTimeout: timeout})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	swallow := srv.Conn(t) // the test answers for the stream
	sub, err := swallow.SubscribeSync("elect.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, answered := range []bool{true, false} {
		bt := b.Batch()
		bt.Publish(&nats.Msg{Subject: "elect.x", Data: []byte("x")})
		done := make(chan error, 1)
		go func() { done <- bt.Wait(ctx) }()
		for send := range 1 + jetstream.DefaultPubRetryAttempts {
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("send %d did not go out: %v", send, err)
			}
			switch {
			case send < jetstream.DefaultPubRetryAttempts:
				err = swallow.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{"Status": []string{"503"}}})
			case answered:
				err = swallow.Publish(m.Reply, []byte(`{"stream":"S","seq":1}`))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		err := <-done
		switch {
		case answered && err != nil:
			t.Fatalf("Wait = %v, want the last retry's acknowledgement", err)
		case !answered && !errors.Is(err, jetstream.ErrAsyncPublishTimeout):
			t.Fatalf("Wait = %v, want ErrAsyncPublishTimeout", err)
		}
	}
}

// firstWaitHeld starts a Wait of a new batch whose one publish, on prefix.a,
// the test answers itself (through swallow, to a's reply), or never; it returns
// once the Wait is under way, first to receive what it returns.
func firstWaitHeld(t *testing.T, prefix string) (b *bus.Bus, bt *bus.Batch, swallow *nats.Conn, a *nats.Msg, first chan error) {
	t.Helper()
	srv := natstest.Start(t)
	b = srv.Bus(t, bus.Config{PublishAckTimeout: time.Minute})
	swallow = srv.Conn(t)
	sub, err := swallow.SubscribeSync(prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	bt = b.Batch()
	bt.Publish(&nats.Msg{Subject: prefix + ".a", Data: []byte("a")})
	first = make(chan error, 1)
	go func() { first <- bt.Wait(t.Context()) }()
	if a, err = sub.NextMsg(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return bt.Waits() == 1 }, "the first Wait never began")
	return b, bt, swallow, a, first
}
