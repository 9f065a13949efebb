package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnsureIsIdempotent(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := context.Background()
	if err := b.Ensure(ctx); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	for _, name := range []string{"SKILLBUS_TRIGGERS", "SKILLBUS_JOBS", "SKILLBUS_REPAIR", "SKILLBUS_DLQ", "SKILLBUS_EVENTS"} {
		s, err := b.JS.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if name == "SKILLBUS_JOBS" && s.CachedInfo().Config.Retention != jetstream.LimitsPolicy {
			t.Errorf("JOBS retention = %v, want limits: jobs are kept as their activation's record", s.CachedInfo().Config.Retention)
		}
	}
	for _, name := range []string{"skills", "runs", "stats", "workers", "cache"} {
		if _, err := b.JS.KeyValue(ctx, name); err != nil {
			t.Errorf("bucket %s: %v", name, err)
		}
	}
}

func TestPrefixNamesEverything(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{Prefix: "acme"})
	ctx := context.Background()
	if _, err := b.JS.Stream(ctx, "ACME_JOBS"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.KeyValue(ctx, "acme_skills"); err != nil {
		t.Fatal(err)
	}
	if got := b.Subjects.Exec("default", "x", "a1", "job"); got != "acme.exec.default.x.a1.job" {
		t.Fatalf("Exec = %q", got)
	}
	if _, err := bus.New(srv.Conn(t), bus.Config{Prefix: "a.b"}); err == nil {
		t.Fatal("prefix with a dot accepted")
	}
}

func TestBatchWaitsForEveryAckAndDedupes(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 { // the second round repeats every message id
		bt := b.Batch()
		for i := range 100 {
			bt.PublishEvent(b.Subjects.Event("x", "io.skillbus.test"), bus.Event{ID: "e" + itoa(i), Source: "/t", Type: "io.skillbus.test", Data: i})
		}
		if err := bt.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := b.JS.Stream(ctx, b.StreamEvents())
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 100 {
		t.Fatalf("stream holds %d messages, want 100 (duplicates dropped)", info.State.Msgs)
	}
}

// A create-only publish is identified by its subject: it is stored without a
// Nats-Msg-Id, and publishing it again is a duplicate that Duplicate reports by
// the event's id.
func TestCreateIsIdentifiedByItsSubject(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj := b.Subjects.Exec("default", "x", "a1", events.StagePlan)
	for round := range 2 {
		m, err := bus.Event{ID: "e1.job", Source: "/t", Type: events.TypeJob, Data: round}.JobMsg(subj)
		if err != nil {
			t.Fatal(err)
		}
		bt := b.Batch()
		bt.Create(m)
		if err := bt.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if got := bt.Duplicate("e1.job"); got != (round == 1) || bt.Duplicates() != got {
			t.Fatalf("round %d: Duplicate = %v, Duplicates = %v", round, got, bt.Duplicates())
		}
	}
	s, err := b.JS.Stream(ctx, b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	e, err := bus.DecodeFast(bus.MsgOf(stored.Subject, stored.Header, stored.Data))
	if err != nil || string(e.Data) != "0" || stored.Header.Get(bus.HeaderMsgID) != "" || e.ID != "e1.job" {
		t.Fatalf("stored %s with headers %v (%v), want the first publish, without Nats-Msg-Id", stored.Data, stored.Header, err)
	}
}

func itoa(i int) string {
	return string(rune('a'+i/26)) + string(rune('a'+i%26))
}

// A store created before a stream setting existed is updated in place by Ensure.
func TestEnsureUpdatesOlderStreams(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := b.Streams()[4]
	old.AllowMsgSchedules = false
	if _, err := b.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.JS.Stream(ctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Config.AllowMsgSchedules {
		t.Fatal("EVENTS does not allow message schedules after Ensure")
	}
}

// A JOBS stream made as a work queue by an earlier version is replaced when empty;
// one that still holds jobs is an error that says what to do.
func TestEnsureReplacesAnEmptyWorkQueueJobsStream(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := jetstream.StreamConfig{Name: "SKILLBUS_JOBS", Subjects: []string{"skillbus.exec.>"}, Retention: jetstream.WorkQueuePolicy}
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "skillbus.exec.default.x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	b, err := bus.New(srv.Conn(t), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err == nil || !strings.Contains(err.Error(), "still holds 1 jobs") {
		t.Fatalf("Ensure over a work queue holding a job: %v", err)
	}
	if st, err := js.Stream(ctx, "SKILLBUS_JOBS"); err != nil || st.Purge(ctx) != nil {
		t.Fatalf("purge: %v", err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatalf("Ensure over an empty work queue: %v", err)
	}
	s, err := js.Stream(ctx, "SKILLBUS_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Retention; r != jetstream.LimitsPolicy {
		t.Fatalf("JOBS retention after Ensure = %v, want limits", r)
	}
}

// A server without JetStream answers nothing on its API, which reads like an
// outage: Ensure and LearnRetention say what is wrong and how to fix it.
func TestNoJetStreamSaysSo(t *testing.T) {
	t.Parallel()
	srv := natstest.StartWith(t, func(o *server.Options) { o.JetStream = false })
	b, err := bus.New(srv.Conn(t), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const want = "does not run JetStream: start it with -js"
	if err := b.Ensure(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Ensure: %v", err)
	}
	if err := b.LearnRetention(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("LearnRetention: %v", err)
	}
	// With JetStream, an error of another kind is left as it is.
	if err := natstest.Start(t).Bus(t, bus.Config{}).NoJetStream(context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Errorf("NoJetStream changed %v", err)
	}
}
