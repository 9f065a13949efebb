package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

func consumeSetup(t *testing.T, cc jetstream.ConsumerConfig) (jetstream.JetStream, jetstream.Stream, jetstream.Consumer) {
	t.Helper()
	srv := natstest.Start(t)
	return consumeOn(t, srv.Conn(t), cc)
}

// consumeOn makes stream Q (subjects q.>) and the consumer cc on it over nc.
func consumeOn(t *testing.T, nc *nats.Conn, cc jetstream.ConsumerConfig) (jetstream.JetStream, jetstream.Stream, jetstream.Consumer) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	return js, s, c
}

func publishN(t *testing.T, js jetstream.JetStream, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("q.%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer deleted and created again (by an operator, or a worker starting while
// the cluster lost it) ends the iterator with a terminal status: the loop pulls
// from a new one instead of its handlers quietly returning for good.
func TestConsumeOutlivesItsConsumerBeingRecreated(t *testing.T) {
	t.Parallel()
	cc := jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy}
	js, s, c := consumeSetup(t, cc)
	got := make(chan string, 100)
	l, err := bus.Consume(c, 2, func(_ context.Context, m jetstream.Msg) {
		got <- m.Subject()
		_ = m.Ack()
	}, slog.New(slog.DiscardHandler), bus.Watch{Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	publishN(t, js, 0, 1)
	if subj := <-got; subj != "q.0" {
		t.Fatalf("got %s", subj)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.DeleteConsumer(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	// nats-server removes a deleted consumer's files after it answers: a consumer
	// of the same name made at once may find its directory going, and the server
	// answers 500 (rename .../obs/w/o.dat.tmp: no such file or directory, seen once
	// on a loaded machine). An operator would try again; so does the test.
	for {
		_, err := s.CreateOrUpdateConsumer(ctx, cc)
		if err == nil {
			break
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 500 || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the server's file removal has no signal to wait on
	}
	publishN(t, js, 1, 1)
	// The stream keeps messages (limits retention), so the new consumer delivers
	// q.0 again before q.1.
	for done := false; !done; {
		select {
		case subj := <-got:
			done = subj == "q.1"
		case <-time.After(20 * time.Second):
			t.Fatal("no q.1 after the consumer was created again: the loop stopped pulling")
		}
	}
	if l.Renewals() < 1 {
		t.Errorf("Renewals = %d, want at least 1", l.Renewals())
	}
}

// A loop with free handlers that gets nothing while its consumer has messages
// waiting pulls afresh, and once that has gone on for Watch.Stuck, Stalled says so;
// as soon as messages flow again it is not stalled any more. Here the loop's pull
// requests never reach the consumer because its user may not send them (as if
// they were lost on a dead server, and again after every retry); then the
// permission is given back.
func TestConsumeReportsAStallWhileMessagesWait(t *testing.T) {
	t.Parallel()
	var opts *server.Options
	deny := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.CONSUMER.MSG.NEXT.>"}}}
	srv := natstest.StartWith(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "a"}, {Username: "loop", Password: "l", Permissions: deny}}
		opts = o
	})
	connect := func(user, pass string) *nats.Conn {
		nc, err := nats.Connect(srv.URL(), nats.UserInfo(user, pass), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin, err := jetstream.New(connect("admin", "a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateOrUpdateConsumer(ctx, "Q", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(connect("loop", "l"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, "Q", "w")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan jetstream.Msg, 10)
	l, err := bus.Consume(c, 4, func(_ context.Context, m jetstream.Msg) { got <- m; _ = m.Ack() }, slog.New(slog.DiscardHandler),
		bus.Watch{Heartbeat: time.Second, Idle: 200 * time.Millisecond, Every: 20 * time.Millisecond, Stuck: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	publishN(t, admin, 0, 2)

	natstest.Eventually(t, 20*time.Second, func() bool { return l.Stalled() != nil }, "a loop with 2 messages waiting and nothing delivered is not reported")
	err = l.Stalled()
	if !errors.Is(err, bus.ErrStalled) || !strings.Contains(err.Error(), "consumer w") || !strings.Contains(err.Error(), "2 were waiting") {
		t.Fatalf("Stalled = %v, want ErrStalled naming consumer w and 2 waiting", err)
	}
	if l.Renewals() < 1 {
		t.Errorf("Renewals = %d: the loop did not pull afresh before reporting", l.Renewals())
	}
	if err := bus.Stalled(context.Background()); !errors.Is(err, bus.ErrStalled) {
		t.Errorf("bus.Stalled (the process's /livez check) = %v, want ErrStalled", err)
	}

	allow := opts.Clone()
	for _, u := range allow.Users {
		u.Permissions = nil
	}
	if err := srv.Server.ReloadOptions(allow); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no message once the loop's pulls reach the consumer again")
		}
	}
	if err := l.Stalled(); err != nil {
		t.Fatalf("still stalled after messages arrived: %v", err)
	}
}

// A consumer at its ack-pending limit (a skill's max_concurrent, held by another
// worker) holds messages back on purpose: the loop waits, and is not stalled.
func TestConsumeAtTheAckPendingLimitIsNotStalled(t *testing.T) {
	t.Parallel()
	cc := jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxAckPending: 1}
	js, _, c := consumeSetup(t, cc)
	held := make(chan jetstream.Msg, 10)
	l, err := bus.Consume(c, 4, func(_ context.Context, m jetstream.Msg) { held <- m }, slog.New(slog.DiscardHandler),
		bus.Watch{Idle: 50 * time.Millisecond, Every: 10 * time.Millisecond, Stuck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	publishN(t, js, 0, 3)
	first := <-held
	// The monitor looks at the consumer (2 pending, 1 of 1 ack-pending) several
	// times, each past Idle and the last past Stuck.
	seen := l.Infos()
	natstest.Eventually(t, 20*time.Second, func() bool { return l.Infos() >= seen+10 }, "the monitor does not look at the consumer")
	if err := l.Stalled(); err != nil {
		t.Fatalf("a loop throttled by its consumer's MaxAckPending is reported: %v", err)
	}
	if n := l.Renewals(); n != 0 {
		t.Errorf("the loop pulled afresh %d times while its consumer held messages back on purpose", n)
	}
	if err := first.Ack(); err != nil {
		t.Fatal(err)
	}
	_ = (<-held).Ack()
	_ = (<-held).Ack()
}

// A publish that reaches a responder which never answers — a stream leader killed
// with the message in hand — fails after PublishAckTimeout instead of blocking its
// Wait (and the handler, and the job it keeps in progress) for good.
func TestBatchWaitEndsWhenTheAckNeverComes(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{PublishAckTimeout: 300 * time.Millisecond})
	// Something that takes the publish and never answers.
	swallow := srv.Conn(t)
	sub, err := swallow.SubscribeSync("lost.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := swallow.Flush(); err != nil {
		t.Fatal(err)
	}
	bt := b.Batch()
	bt.Publish(&nats.Msg{Subject: "lost.x", Data: []byte("x")})
	done := make(chan error, 1)
	go func() { done <- bt.Wait(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			t.Fatalf("Wait = %v, want ErrAsyncPublishTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait still blocked 20s after a publish whose ack never comes")
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		t.Fatalf("the publish did not reach the subscriber: %v", err)
	}
}

// Waited bounds how long a message may have waited in the client's buffer: a
// message fetched while the only handler was busy is handed out with a bound at
// least as long as the handler was busy, and a context no loop gave has none.
func TestWaitedBoundsTheTimeInTheBuffer(t *testing.T) {
	t.Parallel()
	cc := jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy}
	js, _, c := consumeSetup(t, cc)
	type got struct {
		subj   string
		waited time.Duration
		at     time.Time
	}
	gots := make(chan got, 10)
	release := make(chan struct{})
	l, err := bus.Consume(c, 1, func(ctx context.Context, m jetstream.Msg) {
		w, ok := bus.Waited(ctx)
		if !ok {
			t.Error("a loop's handler has no Waited")
		}
		gots <- got{m.Subject(), w, time.Now()}
		if m.Subject() == "q.0" {
			<-release
		}
		_ = m.Ack()
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	publishN(t, js, 0, 2)
	first := <-gots
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 2
	}, "the client did not fetch the message behind the busy handler")
	open()
	busy := time.Since(first.at)
	for range 1 {
		g := <-gots
		if g.waited < busy {
			t.Errorf("%s: Waited %v, but the handler was busy %v while it was in the buffer", g.subj, g.waited, busy)
		}
	}
	if _, ok := bus.Waited(context.Background()); ok {
		t.Error("Waited of a context no loop gave says ok")
	}
}

// Stop keeps its deadline when the connection goes silent while the loop drains
// (every server of a cluster stopped with the process, or a network that drops
// everything): the drain then waits on a flush that is never answered, and the
// handlers waiting for a message used to wait with it, past Stop's deadline, so
// a router or worker told to stop hung until it was killed. Here the client
// reaches the server through a relay that, at the moment that matters, stops
// passing anything on while keeping both connections open.
func TestStopKeepsItsDeadlineWhenTheConnectionGoesSilent(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	relay := newSilentRelay(t, srv.Server.Addr().String())
	nc, err := nats.Connect("nats://"+relay.addr(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _, c := consumeOn(t, nc, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	got := make(chan struct{}, 1)
	l, err := bus.Consume(c, 2, func(_ context.Context, m jetstream.Msg) {
		_ = m.Ack()
		got <- struct{}{}
	}, slog.New(slog.DiscardHandler), bus.Watch{Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// One message through shows both handlers are past their first pull and
	// waiting in Next for the next message.
	publishN(t, js, 0, 1)
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no message through the relay")
	}

	relay.silence()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stopCancel()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { l.Stop(stopCtx); close(stopped) }()
	select {
	case <-stopped:
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Stop took %v with a deadline of 300ms", d)
		}
	case <-time.After(8 * time.Second):
		// The drain's flush times out after 10 s; before the fix Stop
		// returned only then, or never.
		t.Fatalf("Stop has not returned %v after its 300ms deadline", time.Since(start))
	}
}

// silentRelay passes TCP traffic between clients and a server until silence,
// then passes nothing more, in either direction, and keeps the connections open:
// to the client, a server that stopped answering.
type silentRelay struct {
	ln     net.Listener
	mu     sync.Mutex
	quiet  bool
	conns  []net.Conn
	target string
}

func newSilentRelay(t *testing.T, target string) *silentRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &silentRelay{ln: ln, target: target}
	t.Cleanup(r.close)
	go r.accept()
	return r
}

func (r *silentRelay) addr() string { return r.ln.Addr().String() }

func (r *silentRelay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		go r.pipe(s, c)
		go r.pipe(c, s)
	}
}

// pipe copies from src to dst until silence; after it, what src sends is read
// and dropped, so that the sender's writes do not fail either.
func (r *silentRelay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		quiet := r.quiet
		r.mu.Unlock()
		if quiet {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (r *silentRelay) silence() {
	r.mu.Lock()
	r.quiet = true
	r.mu.Unlock()
}

func (r *silentRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}
