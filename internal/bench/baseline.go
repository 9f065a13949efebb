package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Shape is what a bare-JetStream baseline persists per execution.
type Shape int

const (
	// Minimal is the least the system's shape needs: the trigger; a "router" that
	// publishes the job; a "worker" that publishes the result. Three persisted
	// publishes, two pull consumers, explicit acks.
	Minimal Shape = iota
	// SameWrites persists what skillbus persists at its default events level, the
	// way skillbus persists it: the trigger; a router that publishes the job
	// create-only on a subject of its own in a stream that keeps it (the job is the
	// activation's record); a worker that publishes the outcome, create-only. The
	// ratio to it is the client's own overhead: CloudEvents, routing, the engine,
	// JSON.
	SameWrites
)

func (s Shape) String() string {
	if s == SameWrites {
		return "bare JetStream, skillbus's writes"
	}
	return "bare JetStream"
}

// baseline is bare JetStream doing a pipeline's persisted hops with plain nats.go.
type baseline struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	pad     []byte
	its     []jetstream.MessagesContext
	wg      sync.WaitGroup
	sub     *nats.Subscription
	results chan int
	cleanup func()
	srv     *benchServer
}

func runBaseline(ctx context.Context, cfg Config, shape Shape, msgBytes int, p runPlan) (Result, error) {
	b, err := startBaseline(ctx, cfg, shape, msgBytes)
	if err != nil {
		return Result{}, err
	}
	defer b.stop()
	return measure(ctx, cfg, shape.String(), b, b.results, p)
}

// startBaseline starts the pipeline of shape with messages of msgBytes.
func startBaseline(ctx context.Context, cfg Config, shape Shape, msgBytes int) (_ *baseline, err error) {
	srv, nc, cleanup, err := server(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// The router, the worker and the driver each on a connection of its own, as
	// separate processes would be (and as skillbus is measured).
	conns := []*nats.Conn{nc}
	cleanup = closing(cleanup, &conns)
	var jss []jetstream.JetStream
	for i, name := range []string{"driver", "router", "worker"} {
		if i > 0 {
			c, err := bus.Connect(srv.URL(), "bench "+name)
			if err != nil {
				cleanup()
				return nil, err
			}
			conns = append(conns, c)
		}
		j, err := jetstream.New(conns[i], jetstream.WithPublishAsyncMaxPending(16384))
		if err != nil {
			cleanup()
			return nil, err
		}
		jss = append(jss, j)
	}
	js, jsRouter, jsWorker := jss[0], jss[1], jss[2]
	// Pad the data so a message is as large as skillbus's average, headers included.
	pad := max(0, msgBytes-60)
	b := &baseline{srv: srv, nc: nc, js: js, pad: []byte(`"` + strings.Repeat("x", pad) + `"`), cleanup: cleanup}
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	streams := []jetstream.StreamConfig{
		{Name: "BASE_TRIGGERS", Subjects: []string{"base.trigger.>"}, Storage: cfg.Storage, Duplicates: 2 * time.Minute},
		{Name: "BASE_JOBS", Subjects: []string{"base.exec.>"}, Storage: cfg.Storage, Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute},
		{Name: "BASE_EVENTS", Subjects: []string{"base.events.>"}, Storage: cfg.Storage, Duplicates: 2 * time.Minute},
	}
	if shape == SameWrites {
		streams[1].Retention = jetstream.LimitsPolicy
	}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return nil, err
		}
	}
	consumer := func(js jetstream.JetStream, stream, name, filter string) (jetstream.Consumer, error) {
		return js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxAckPending: 10000,
		})
	}
	rc, err := consumer(jsRouter, "BASE_TRIGGERS", "router", "base.trigger.>")
	if err != nil {
		return nil, err
	}
	wc, err := consumer(jsWorker, "BASE_JOBS", "worker", "base.exec.>")
	if err != nil {
		return nil, err
	}

	// The "router": the job, then the ack.
	b.loop(rc, cfg.Concurrency, func(m jetstream.Msg) []jetstream.PubAckFuture {
		id := m.Headers().Get("Bench-I")
		if shape == SameWrites {
			return []jetstream.PubAckFuture{b.publish(jsRouter, "base.exec.default.noop."+id+".job", id, "job", jetstream.WithExpectLastSequencePerSubject(0))}
		}
		return []jetstream.PubAckFuture{b.publish(jsRouter, "base.exec.default.noop", id, "job")}
	})
	// The "worker": the result, then the ack.
	b.loop(wc, cfg.Concurrency, func(m jetstream.Msg) []jetstream.PubAckFuture {
		id := m.Headers().Get("Bench-I")
		if shape == SameWrites {
			return []jetstream.PubAckFuture{b.publish(jsWorker, "base.events."+id+".completed", id, "completed", jetstream.WithExpectLastSequencePerSubject(0))}
		}
		return []jetstream.PubAckFuture{b.publish(jsWorker, "base.events."+id+".completed", id, "completed")}
	})

	results := make(chan int, 1024)
	b.results = results
	b.sub, err = nc.Subscribe("base.events.*.completed", func(m *nats.Msg) {
		i, err := strconv.Atoi(strings.Split(m.Subject, ".")[2])
		if err == nil {
			results <- i
		}
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *baseline) publish(js jetstream.JetStream, subject, id, stage string, opts ...jetstream.PublishOpt) jetstream.PubAckFuture {
	m := nats.NewMsg(subject)
	m.Header.Set(events.HeaderMsgID, id+"."+stage)
	m.Header.Set("Bench-I", id)
	m.Data = b.pad
	f, err := js.PublishMsgAsync(m, opts...)
	if err != nil {
		return nil
	}
	return f
}

// loop is the same bounded consume loop skillbus uses, written out with nats.go.
func (b *baseline) loop(c jetstream.Consumer, n int, handle func(jetstream.Msg) []jetstream.PubAckFuture) {
	it, err := c.Messages(jetstream.PullMaxMessages(2 * n))
	if err != nil {
		return
	}
	b.its = append(b.its, it)
	for range n {
		b.wg.Go(func() {
			for {
				m, err := it.Next()
				if err != nil {
					return
				}
				fs := handle(m)
				ok := fs != nil
				for _, f := range fs {
					if f == nil {
						ok = false
						continue
					}
					select {
					case <-f.Ok():
					case <-f.Err():
						ok = false
					}
				}
				if ok {
					_ = m.Ack()
				} else {
					_ = m.Nak()
				}
			}
		})
	}
}

func (b *baseline) trigger(ctx context.Context, i int) error {
	id := strconv.Itoa(i)
	m := nats.NewMsg("base.trigger.noop")
	m.Header.Set(events.HeaderMsgID, "t"+id)
	m.Header.Set("Bench-I", id)
	m.Data = b.pad
	_, err := b.js.PublishMsgAsync(m)
	return err
}

func (b *baseline) msgBytes(ctx context.Context) int { return len(b.pad) + 60 }

func (b *baseline) jetstream() jetstream.JetStream { return b.js }

func (b *baseline) server() *benchServer { return b.srv }

func (b *baseline) stop() {
	if b.sub != nil {
		_ = b.sub.Unsubscribe()
		close(b.results)
		b.sub = nil
	}
	for _, it := range b.its {
		it.Stop()
	}
	b.wg.Wait()
	b.cleanup()
}
