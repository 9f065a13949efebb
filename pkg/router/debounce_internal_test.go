package router

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// latestFault is the EVENTS stream with the reads of a burst's latest trigger
// failing with err, or finding stale instead of what is stored: faults the
// server does not make on demand.
type latestFault struct {
	jetstream.Stream
	err   error
	stale *jetstream.RawStreamMsg
}

func (s latestFault) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if strings.HasSuffix(subject, ".debounce.latest") {
		if s.err != nil {
			return nil, s.err
		}
		if s.stale != nil {
			return s.stale, nil
		}
	}
	return s.Stream.GetLastMsgForSubject(ctx, subject)
}

// debounceRouter is a router that is not started (nothing consumes), with its
// EVENTS stream, for calling fold and fire directly.
func debounceRouter(t *testing.T) (*Router, *bus.Bus, jetstream.Stream, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r, err := New(Config{Bus: b, Catalog: staticCatalog{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := b.Stream(ctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	r.events = evs
	return r, b, evs, ctx
}

// A due burst whose latest trigger cannot be read is not acked: a trigger
// folded while the timer fired may be left without a timer, and only the latest
// tells. Delivered again, its run is published again as the same message.
func TestDebounceFireRetriesAFailedRead(t *testing.T) {
	t.Parallel()
	r, b, evs, ctx := debounceRouter(t)
	s := r.debounceSubjects(debounceID("digest", "k"))
	fired := stub(s.fired, ceHeaders("a1", "com.example.change"), `{"n": 1}`)
	fired.header.Set(headerDebounceSkill, "digest")
	fired.header.Set(headerDebounceAct, "act1")
	r.events = latestFault{Stream: evs, err: errors.New("injected read failure")}
	if err := r.fire(ctx, fired); err == nil || !strings.Contains(err.Error(), "injected read failure") {
		t.Fatalf("fire with the latest unreadable = %v; want its error, so that it is delivered again", err)
	}
	r.events = evs
	if err := r.fire(ctx, fired); err != nil {
		t.Fatalf("fire again, with no latest: %v", err)
	}
	trig, err := b.Stream(ctx, b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	info, err := trig.Info(ctx, jetstream.WithSubjectFilter(b.Subjects.TriggerDebounced("digest")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[b.Subjects.TriggerDebounced("digest")]; n != 1 {
		t.Fatalf("%d runs in TRIGGERS; want the one, published twice", n)
	}
}

// A fold that loses the race for the latest trigger every time gives up with
// an error, rather than ack a trigger that is in no burst.
func TestDebounceFoldFailsAfterLosingEveryRace(t *testing.T) {
	t.Parallel()
	r, _, evs, ctx := debounceRouter(t)
	r.events = latestFault{Stream: evs, stale: &jetstream.RawStreamMsg{Sequence: 1 << 40, Header: nats.Header{}}}
	m := stub("skillbus.trigger.com.example.change", ceHeaders("a1", "com.example.change"), `{"doc": "x"}`)
	m.md.Timestamp = time.Now()
	tr := mustParse(t, m)
	err := r.fold(ctx, tr, "digest", folding{db: &skill.Debounce{Period: skill.Duration(time.Second), Timeout: skill.Duration(10 * time.Second)}, key: "x"})
	if err == nil || !strings.Contains(err.Error(), "races") {
		t.Fatalf("fold = %v; want an error after losing every race for the latest", err)
	}
}
