package router

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Two limiters, on two connections, racing for the places of one window with
// many triggers at once: exactly limit of them get a place, each place once. A
// trigger counted again (a redelivery) keeps its place; the next window starts
// afresh.
func TestRateLimitPlacesAreTakenExactlyOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ls [2]*limiter
	for i := range ls {
		b := srv.Bus(t, bus.Config{})
		l, err := newLimiter(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	const limit, triggers = 7, 40
	rc := rateCheck{rl: &skill.RateLimit{Limit: limit, Period: skill.Duration(time.Minute)}, key: "acme"}
	at := time.Date(2026, 11, 27, 5, 0, 30, 0, time.UTC)
	var mu sync.Mutex
	places := map[int]string{}
	over := 0
	var wg sync.WaitGroup
	for i := range triggers {
		wg.Go(func() {
			act := fmt.Sprintf("act%02d", i)
			p, err := ls[i%2].take(ctx, "orders", rc, at, act)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("take %s: %v", act, err)
			case p.over:
				over++
			case places[p.n] != "":
				t.Errorf("place %d given to %s and %s", p.n, places[p.n], act)
			default:
				places[p.n] = act
			}
		})
	}
	wg.Wait()
	if len(places) != limit || over != triggers-limit {
		t.Fatalf("%d places given (%v), %d over; want %d and %d", len(places), places, over, limit, triggers-limit)
	}
	for n := 1; n <= limit; n++ {
		if places[n] == "" {
			t.Errorf("place %d not given: %v", n, places)
		}
	}

	// Counted again — its router died before publishing, or before acking —
	// a trigger keeps its place, from either router.
	for n, act := range places {
		p, err := ls[1].take(ctx, "orders", rc, at.Add(20*time.Second), act)
		if err != nil || p.over || p.n != n {
			t.Fatalf("%s counted again: %+v, %v; want place %d", act, p, err, n)
		}
	}
	// Read only (route --explain): the window is full.
	if p, err := ls[0].take(ctx, "orders", rc, at, ""); err != nil || !p.over || p.n != limit {
		t.Fatalf("peek = %+v, %v; want over with %d taken", p, err, limit)
	}
	// Another key, and the next window, start at 1.
	other := rc
	other.key = "globex"
	for _, c := range []struct {
		rc rateCheck
		at time.Time
	}{{other, at}, {rc, at.Add(30 * time.Second)}} {
		if p, err := ls[0].take(ctx, "orders", c.rc, c.at, "late"); err != nil || p.over || p.n != 1 {
			t.Fatalf("key %q at %v: %+v, %v; want place 1", c.rc.key, c.at, p, err)
		}
	}
}

func TestRateLimitWindow(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 5, 7, 42, 500, time.UTC)
	for _, c := range []struct {
		period     time.Duration
		start, end string
	}{
		{time.Minute, "05:07:00", "05:08:00"},
		{time.Second, "05:07:42", "05:07:43"},
		{time.Hour, "05:00:00", "06:00:00"},
		{7 * time.Second, "05:07:40", "05:07:47"}, // multiples of 7s since the Unix epoch
	} {
		s, e := window(at, c.period)
		if got := s.Format("15:04:05") + "-" + e.Format("15:04:05"); got != c.start+"-"+c.end {
			t.Errorf("window of %v: %s, want %s-%s", c.period, got, c.start, c.end)
		}
	}
}

// A router that counted a trigger and died before publishing its jobs: the
// trigger, delivered again, runs on the place it took, and does not take a
// second one.
func TestRateLimitRedeliveryIsCountedOnce(t *testing.T) {
	t.Parallel()
	s := &skill.Skill{Name: "orders", Description: "takes orders", Kind: skill.KindWorkflow, Digest: "0rders0123456789",
		Triggers: []string{"com.example.order"}, RateLimit: &skill.RateLimit{Limit: 1, Period: skill.Duration(time.Hour)}}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := New(Config{Bus: b, Catalog: staticCatalog{s}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })

	stored := time.Now().UTC()
	msg := func(id string, delivery uint64) *stubMsg {
		m := stub("skillbus.trigger.com.example.order", ceHeaders(id, "com.example.order"), `{}`)
		m.md.NumDelivered, m.md.Timestamp = delivery, stored
		return m
	}
	// The router that died counted "a" (its place is the only one).
	if p, err := r.limits.take(ctx, "orders", rateCheck{rl: s.RateLimit}, stored, events.ActivationID("/test", "a")); err != nil || p.n != 1 {
		t.Fatalf("first count: %+v, %v", p, err)
	}
	note, err := r.route(ctx, msg("a", 2))
	if err != nil || note.outcome != telemetry.OutcomeRouted {
		t.Fatalf("redelivered trigger: %+v, %v; want routed on the place it took", note, err)
	}
	note, err = r.route(ctx, msg("b", 1))
	if err != nil || note.outcome != telemetry.OutcomeUnmatched {
		t.Fatalf("next trigger: %+v, %v; want unmatched (rate limited)", note, err)
	}
	// Delivered yet again after it ran: still its place, still no second one.
	if note, err = r.route(ctx, msg("a", 3)); err != nil || note.outcome != telemetry.OutcomeRouted {
		t.Fatalf("third delivery: %+v, %v", note, err)
	}
	d, _, err := b.Decision(ctx, events.ActivationID("/test", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Candidates; len(c) != 1 || !strings.Contains(c[0].Reason, "rate_limit 1 per 1h0m0s: 1 of 1 in the window") {
		t.Fatalf("the plan does not show the rate limit's verdict: %+v", c)
	}
}
