package bus_test

import (
	"context"
	"errors"
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
