package router

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

const waitedType = "com.example.order.paid"

// waitFixture is a started router with no skills, its KV runs, and a hook
// that holds the router's wait watcher before it indexes a change, until
// release is closed.
type waitFixture struct {
	t       *testing.T
	ctx     context.Context
	b       *bus.Bus
	runs    jetstream.KeyValue
	held    chan string
	release chan struct{}
}

func startWaitRouter(t *testing.T, hold bool) *waitFixture {
	t.Helper()
	f := newWaitFixture(t)
	f.start(hold, nil)
	return f
}

// newWaitFixture is a waitFixture whose router is not started.
func newWaitFixture(t *testing.T) *waitFixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := &waitFixture{t: t, ctx: ctx, b: b, held: make(chan string, 16), release: make(chan struct{})}
	var err error
	if f.runs, err = b.KV(ctx, b.BucketRuns()); err != nil {
		t.Fatal(err)
	}
	return f
}

// newRouter is a router of the fixture's bus, not started.
func (f *waitFixture) newRouter() *Router {
	f.t.Helper()
	r, err := New(Config{Bus: f.b, Catalog: staticCatalog{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// start starts the fixture's router, edited by edit (when not nil) first;
// hold: its wait watcher waits for release before it indexes a change.
func (f *waitFixture) start(hold bool, edit func(*Router)) {
	t, ctx := f.t, f.ctx
	t.Helper()
	r := f.newRouter()
	if edit != nil {
		edit(r)
	}
	if hold {
		r.waitHook = func(e jetstream.KeyValueEntry) {
			f.held <- e.Key()
			<-f.release
		}
	} else {
		close(f.release)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		r.Stop(context.Background())
	})
}

// park writes what a worker writes when a run parks at step pay waiting for
// an order's payment: its paused record and its wait record.
func (f *waitFixture) park(exec, order string) events.Job {
	f.t.Helper()
	job := events.Job{ExecutionID: exec, ActivationID: "act-" + exec,
		Skill: events.SkillRef{Name: "waiter", Pool: "default", ExecutionID: exec}}
	jobData, _ := json.Marshal(job)
	paused, _ := json.Marshal(run.Paused{ExecutionID: exec, Step: "pay", Kind: run.PausedWait, Job: jobData,
		Subject: f.b.Subjects.Exec("default", "waiter", job.ActivationID, events.StagePlan), TimeoutAt: time.Now().Add(time.Hour)})
	if _, err := f.runs.Put(f.ctx, events.RunPausedKey(exec), paused); err != nil {
		f.t.Fatal(err)
	}
	rec, _ := json.Marshal(run.Wait{ExecutionID: exec, Step: "pay", Type: waitedType,
		Match: `event.data.order == inputs.order`, Inputs: json.RawMessage(`{"order":"` + order + `"}`),
		TimeoutAt: time.Now().Add(time.Hour)})
	if _, err := f.runs.Put(f.ctx, events.RunWaitKey(exec), rec); err != nil {
		f.t.Fatal(err)
	}
	return job
}

// routed waits until the router has acked every trigger published.
func (f *waitFixture) routed() {
	f.t.Helper()
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		c, err := f.b.JS.Consumer(f.ctx, f.b.StreamTriggers(), "router")
		if err != nil {
			return false
		}
		info, err := c.Info(f.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0
	}, "triggers not routed")
}

// resumed waits for the job the router publishes when the wait at pay ends,
// and returns the answer it carries.
func (f *waitFixture) resumed(job events.Job) events.Answer {
	f.t.Helper()
	s, err := f.b.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		f.t.Fatal(err)
	}
	subject := f.b.Subjects.Exec(job.Skill.Pool, job.Skill.Name, job.ActivationID, events.StageAnswered("pay"))
	var m *jetstream.RawStreamMsg
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		m, err = s.GetLastMsgForSubject(f.ctx, subject)
		return err == nil
	}, "the waiting run was not resumed")
	var got struct{ Data events.Job }
	if err := json.Unmarshal(m.Data, &got); err != nil {
		f.t.Fatal(err)
	}
	return got.Data.Answers["pay"]
}

// A trigger routed after the worker wrote the wait record but before the
// router's watcher delivered it still ends the wait: the router replays the
// triggers stored since the record was written once it sees the record.
func TestWaitMatchesATriggerRoutedBeforeTheRecordWasSeen(t *testing.T) {
	t.Parallel()
	f := startWaitRouter(t, true)
	job := f.park("ex1", "o-1")
	select {
	case <-f.held:
	case <-f.ctx.Done():
		t.Fatal("the watcher never delivered the wait record")
	}
	publishTrigger(t, f.ctx, f.b, "pay-other", waitedType, `{"order":"o-2","amount":1}`)
	publishTrigger(t, f.ctx, f.b, "pay-1", waitedType, `{"order":"o-1","amount":250}`)
	f.routed()
	if n := count(t, f.ctx, f.b, f.b.StreamEvents(), f.b.Subjects.Event("ex1", events.TypeWaitEnded)); n != 0 {
		t.Fatalf("%d wait.ended while the router did not know the wait, want 0", n)
	}
	close(f.release)
	a := f.resumed(job)
	if !a.Approved || a.By != "event" {
		t.Fatalf("answer %+v, want approved by event", a)
	}
	var data map[string]any
	if err := json.Unmarshal(a.Data, &data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"order": "o-1", "amount": 250.0}, data); diff != "" {
		t.Fatalf("resumed with the data of another event (-want +got):\n%s", diff)
	}
}

// A trigger stored a moment before the wait record was written, and routed
// before the router saw the record, still ends the wait: the replay starts
// before the record's time (waitReplayLookback, here stretched so that a
// loaded machine's delays stay within it).
func TestWaitReplayStartsBeforeTheRecord(t *testing.T) {
	t.Parallel()
	f := newWaitFixture(t)
	f.start(false, func(r *Router) { r.waitLookback = time.Minute })
	publishTrigger(t, f.ctx, f.b, "pay-1", waitedType, `{"order":"o-1","amount":250}`)
	f.routed()
	job := f.park("ex1", "o-1")
	if a := f.resumed(job); !a.Approved || a.By != "event" {
		t.Fatalf("answer %+v, want approved by event", a)
	}
}

// Waits open when a router starts are replayed from their records' time, the
// waits of one type in one pass: triggers that a router routed before it saw
// the records, and that router then died, end the waits when the next router
// starts.
func TestWaitOpenAtStartIsReplayed(t *testing.T) {
	t.Parallel()
	f := newWaitFixture(t)
	jobs := []events.Job{f.park("ex1", "o-1"), f.park("ex2", "o-2")}
	publishTrigger(t, f.ctx, f.b, "pay-1", waitedType, `{"order":"o-1","amount":250}`)
	publishTrigger(t, f.ctx, f.b, "pay-2", waitedType, `{"order":"o-2","amount":90}`)
	// The router that died: it took the triggers from the routers' consumer
	// and acked them, knowing no wait.
	c, err := f.b.EnsureConsumer(f.ctx, f.b.StreamTriggers(), f.newRouter().ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < 2 {
		batch, err := c.Fetch(2-n, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(f.ctx); err != nil {
				t.Fatal(err)
			}
			k++
		}
		if k == 0 {
			t.Fatalf("the dead router took %d triggers, want 2", n)
		}
		n += k
	}
	replays := make(chan int, 8)
	f.start(false, func(r *Router) { r.replayHook = func(n int) { replays <- n } })
	for _, job := range jobs {
		if a := f.resumed(job); !a.Approved || a.By != "event" {
			t.Fatalf("%s: answer %+v, want approved by event", job.ExecutionID, a)
		}
	}
	if got := <-replays; got != 2 {
		t.Errorf("the first replay matched %d waits, want both of the type's in one pass", got)
	}
	select {
	case got := <-replays:
		t.Errorf("a second replay (of %d waits) for one type", got)
	default:
	}
}
