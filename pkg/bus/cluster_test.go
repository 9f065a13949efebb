//go:build cluster

package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A stream leader SIGKILLed while pipelined publishes are in flight to it through
// another node never answers some of them: the messages went down with it, and the
// client, connected to a surviving node, sees no disconnect that would fail them.
// Every publish of a Batch still ends, acknowledged or failed, within
// PublishAckTimeout of the kill, so that its Wait returns and the caller can
// publish again under the same message id.
func TestClusterBatchEndsWhenTheLeaderDiesWithPublishesInFlight(t *testing.T) {
	t.Parallel()
	c := natstest.StartProcessCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("stream leader: %v", err)
	}
	leader := c.Node(info.Cluster.Leader)
	var via *natstest.Process
	for _, p := range c.Nodes {
		if p != leader {
			via = p
			break
		}
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", via.Port), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const timeout = 3 * time.Second
	b, err := bus.New(nc, bus.Config{PublishAckTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}

	// Batches of 100 publishes, one after the other, the leader killed while one
	// is in flight: killed as soon as the first batch is acknowledged, from
	// another goroutine, while the publishing goes on.
	started := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		<-started
		leader.Kill()
		close(killed)
	}()
	var batches []*bus.Batch
	for i := 0; ; i++ {
		bt := b.Batch()
		for j := range 100 {
			bt.Publish(&nats.Msg{Subject: fmt.Sprintf("out.%d.%d", i, j), Data: []byte("x")})
		}
		batches = append(batches, bt)
		if i == 0 {
			if err := bt.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			close(started)
		}
		select {
		case <-killed:
		default:
			continue
		}
		break
	}
	killedAt := time.Now()
	var ok, failed, timedOut int
	for _, bt := range batches[1:] {
		done := make(chan error, 1)
		go func() { done <- bt.Wait(context.Background()) }()
		select {
		case err := <-done:
			switch {
			case err == nil:
				ok++
			case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
				timedOut++
			default:
				failed++
			}
		case <-time.After(timeout + 20*time.Second - time.Since(killedAt)):
			t.Fatalf("a batch still waits %v after the leader was killed (PublishAckTimeout %v)", time.Since(killedAt).Round(time.Second), timeout)
		}
	}
	t.Logf("leader %s killed with the client on %s: of %d batches of 100 in flight, %d acknowledged, %d failed, %d timed out waiting for an ack",
		leader.Name, via.Name, len(batches)-1, ok, failed, timedOut)
}

// On a clustered stream, a create-only publish sent while an earlier one to the
// same subject is still being replicated is refused with "wrong last sequence" and
// no sequence: the earlier one may yet fail to be stored, so the refusal is not a
// duplicate. Batch.Wait returns it (bus.InProcess), the caller publishes again, and
// then finds the subject taken.
func TestClusterCreateInProcessIsNoDuplicate(t *testing.T) {
	t.Parallel()
	c := natstest.StartProcessCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, bus.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	inProcess := 0
	for i := range 20 {
		subj := b.Subjects.Exec("default", "x", fmt.Sprintf("a%d", i), "job")
		id := fmt.Sprintf("e%d.job", i)
		create := func(bt *bus.Batch) {
			m, err := bus.Event{ID: id, Source: "/t", Type: "io.skillbus.job", Data: i}.JobMsg(subj)
			if err != nil {
				t.Fatal(err)
			}
			bt.Create(m)
		}
		bt := b.Batch()
		create(bt) // the same job twice, back to back, as a re-send would
		create(bt)
		err := bt.Wait(ctx)
		switch {
		case err == nil:
		case bus.InProcess(err):
			inProcess++
			// Sent again until the answer is known: the first is stored by now, or not.
			natstest.Eventually(t, 30*time.Second, func() bool {
				again := b.Batch()
				create(again)
				if err := again.Wait(ctx); err != nil {
					if !bus.InProcess(err) {
						t.Fatalf("publish again: %v", err)
					}
					return false
				}
				return again.Duplicate(id)
			}, "the first publish to %s is not found stored", subj)
		default:
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if inProcess == 0 {
		t.Fatal("no publish was refused as in process: a re-send while the first is replicated was taken for a duplicate")
	}
	t.Logf("%d of 20 re-sends refused while the first was replicated", inProcess)
}
