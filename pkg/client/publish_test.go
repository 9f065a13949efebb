package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// A trigger the routers would only reject is refused before it is published, with
// the error that says why; nothing reaches TRIGGERS.
func TestPublishRefuses(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := client.New(b).WithMaxEventBytes(1024)
	for _, tc := range []struct {
		name string
		t    client.Trigger
		want error
		msg  string
	}{
		{"no type or skill", client.Trigger{}, nil, "needs a Type or a Skill"},
		{"type not a subject", client.Trigger{Type: "a b"}, client.ErrInvalidEvent, "type"},
		{"bad skill", client.Trigger{Skill: "a.b"}, client.ErrInvalidEvent, "skill"},
		{"long id", client.Trigger{Skill: "s", ID: strings.Repeat("x", 201)}, client.ErrInvalidEvent, "at most 200"},
		{"a debounced run's source", client.Trigger{Skill: "s", Source: "/skillbus/debounce/s"}, client.ErrInvalidEvent, "only routers publish"},
		{"a reserved type", client.Trigger{Type: "skill.s.debounced"}, client.ErrInvalidEvent, "types beginning skill. are reserved"},
		{"skillbus's own source, no skill", client.Trigger{Type: "io.skillbus.invoke", Source: "/skillbus/scheduler"}, client.ErrInvalidEvent, "must name its skill"},
		{"data not JSON", client.Trigger{Skill: "s", Data: []byte("{nope")}, client.ErrInvalidEvent, "not valid JSON"},
		{"too large", client.Trigger{Skill: "s", ID: "big", Data: []byte(`{"x":"` + strings.Repeat("y", 1024) + `"}`)}, client.ErrTooLarge, "the limit is 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, try := range []func() error{
				func() error { _, err := c.Publish(ctx, tc.t); return err },
				func() error { return c.Check(tc.t) },
			} {
				err := try()
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("got %v, want %v saying %q", err, tc.want, tc.msg)
				}
			}
		})
	}
	st, err := b.Stream(ctx, b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d triggers published", n)
	}
}

// A trigger published while NATS is down is kept by the connection and sent when
// it reconnects: its publish ends unacknowledged, and the error says that it may
// still have been stored (here it is) and that sending it again is deduplicated —
// not that it was not published.
func TestPublishUnacknowledgedMayBeStored(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	c := client.New(b)
	srv.Stop()
	natstest.Eventually(t, 10*time.Second, func() bool { return !b.NC.IsConnected() }, "still connected")
	tr := client.Trigger{Skill: "hello", Source: "/ops", ID: "down-1", Data: []byte(`{}`)}
	pctx, pcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.Publish(pctx, tr)
	pcancel()
	var na *client.NotAcknowledgedError
	if !errors.As(err, &na) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a NotAcknowledgedError", err)
	}
	for _, want := range []string{"did not acknowledge the trigger in time", "may still have been stored", "same source and id (/ops, down-1)", "deduplicated", "/readyz"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}

	srv.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	natstest.Eventually(t, 15*time.Second, func() bool {
		st, err := b.Stream(ctx, b.StreamTriggers())
		return err == nil && st.CachedInfo().State.Msgs == 1
	}, "the buffered trigger was not stored")
	act, err := c.Publish(ctx, tr)
	if err != nil || !act.Duplicate {
		t.Fatalf("sent again: %+v %v, want a duplicate", act, err)
	}
}

// A sender from outside skillbus may not use its own sources, whose ids are
// predictable: as CloudEvents compares sources (percent-decoded) too. Skillbus's
// own publishers (the scheduler, the skill tool) check with CheckEvent, which
// takes them.
func TestCheckOutsideRefusesReservedSources(t *testing.T) {
	t.Parallel()
	ev := func(source string) *event.Event {
		e := event.New()
		e.SetID("x/call")
		e.SetSource(source)
		e.SetType("io.skillbus.invoke")
		return &e
	}
	for _, s := range []string{"/skillbus/skill-tool", "/skillbus/scheduler", "/skillbus%2Fskill-tool", "/skillbus/debounce/s"} {
		if err := client.CheckOutside(ev(s)); !errors.Is(err, client.ErrInvalidEvent) || !strings.Contains(err.Error(), "are skillbus's own") && !strings.Contains(err.Error(), "only routers publish") {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"/shop", "skillbus-cli", "/skillbusx/a", "https://example.com/skillbus/"} {
		if err := client.CheckOutside(ev(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if err := client.CheckEvent(ev("/skillbus/skill-tool")); err != nil {
		t.Errorf("skillbus's own publisher: %v", err)
	}
}

// skillbus's own triggers go where only its roles publish, the one place routers
// take their sources; everyone else's go to the skill's subject.
func TestOwnSourcesPublishOnTheInternalSubject(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	c := client.New(b)
	for source, want := range map[string]string{
		"/skillbus/skill-tool":   "skillbus.trigger.skill.hello.internal",
		"/skillbus%2Fscheduler":  "skillbus.trigger.skill.hello.internal",
		"/shop":                  "skillbus.trigger.skill.hello",
		"https://x.io/skillbus/": "skillbus.trigger.skill.hello",
	} {
		e := event.New()
		e.SetID("parent/step")
		e.SetSource(source)
		e.SetType("io.skillbus.invoke")
		o, err := c.Prepare(context.Background(), &e, "hello")
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		o.Abandon(nil)
		if o.Activation.Subject != want {
			t.Errorf("%s: published on %s, want %s", source, o.Activation.Subject, want)
		}
	}
}

// A sender that publishes past the gateway may set any Nats-Msg-Id: one stored
// first under the id a tick's activation gives its publish would have the tick
// dropped as a repeat. skillbus's own trigger is published again without the id;
// a genuine repeat of it is still a duplicate.
func TestOwnTriggerNotDroppedByAnotherMessagesID(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := client.New(b)
	tick := client.Trigger{Skill: "nightly", Source: "/skillbus/scheduler", ID: "schedule:nightly:2026-01-01T00:00:00Z", Data: []byte(`{}`)}
	squat := nats.NewMsg(b.Subjects.Trigger("com.example.noise"))
	squat.Header.Set(bus.HeaderMsgID, events.ActivationID(tick.Source, tick.ID))
	squat.Data = []byte(`{}`)
	if _, err := b.JS.PublishMsg(ctx, squat); err != nil {
		t.Fatal(err)
	}
	act, err := c.Publish(ctx, tick)
	if err != nil || act.Duplicate {
		t.Fatalf("the tick: %+v, %v; want it stored, not a duplicate", act, err)
	}
	// Another tick, whose id no one took: its repeat is a duplicate, stored once.
	other := tick
	other.Skill, other.ID = "hourly", "schedule:hourly:2026-01-01T00:00:00Z"
	for i, want := range []bool{false, true} {
		if act, err := c.Publish(ctx, other); err != nil || act.Duplicate != want {
			t.Fatalf("publish %d of a tick: %+v, %v; want duplicate %v", i+1, act, err, want)
		}
	}
	st, err := b.Stream(ctx, b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(b.Subjects.Triggers()))
	if err != nil {
		t.Fatal(err)
	}
	if n, m := info.State.Subjects[b.Subjects.TriggerInternal("nightly")], info.State.Subjects[b.Subjects.TriggerInternal("hourly")]; n != 1 || m != 1 {
		t.Fatalf("ticks stored: %v, want one of each", info.State.Subjects)
	}
}
