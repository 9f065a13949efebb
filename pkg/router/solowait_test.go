package router_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A live follower of a run of a skill whose concurrency limit has no key
// (max_concurrent) hears that it waits when every slot is taken, as it does for
// a keyed limit: the job waits undelivered in its pool, where no worker sees it.
func TestMaxConcurrentRunSaysItWaits(t *testing.T) {
	t.Parallel()
	s := &skill.Skill{Name: "one-at-a-time", Description: "runs alone", Kind: skill.KindWorkflow, Digest: "s0l00123456789ab",
		Triggers: []string{"com.example.solo"}, MaxConcurrent: 1}
	f := setup(t, s)
	pool := skill.SoloPool(s.Name)
	// The pool's consumer as a worker makes it, its one slot taken by the
	// first run, delivered and not acked.
	c, err := f.b.JS.CreateOrUpdateConsumer(f.ctx, f.b.StreamJobs(), jetstream.ConsumerConfig{
		Durable: "worker-" + pool, FilterSubject: "skillbus.exec." + pool + ".>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Minute, MaxAckPending: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.publish("skillbus.trigger.com.example.solo", ce("s1", "com.example.solo"), `{}`)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for range batch.Messages() {
		held++
	}
	if held != 1 {
		t.Fatalf("the first run's job was not delivered (%d)", held)
	}
	act := events.ActivationID("/test", "s2")
	ch := make(chan *nats.Msg, 16)
	sub, err := f.b.Subscribe(f.ctx, f.b.Subjects.LiveEvents(act), ch)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	h := ce("s2", "com.example.solo")
	h["ce-"+events.ExtProgress] = events.ProgressLive
	f.publish("skillbus.trigger.com.example.solo", h, `{}`)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if !strings.HasSuffix(m.Subject, "."+events.Kind(events.TypeExecutionWaiting)) {
				continue
			}
			var e struct {
				Data events.ExecutionWaiting `json:"data"`
			}
			if err := json.Unmarshal(m.Data, &e); err != nil {
				t.Fatal(err)
			}
			if e.Data.For != "concurrency" || e.Data.Detail != "1 at once" || e.Data.Skill != s.Name {
				t.Fatalf("heard %+v", e.Data)
			}
			return
		case <-deadline:
			t.Fatal("the follower heard no wait")
		}
	}
}
