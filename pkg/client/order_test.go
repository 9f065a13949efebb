package client

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/events"
)

// ev is an event of exec named name (its type's kind, for reading the order),
// with seq "job.delivery.n" when not empty.
func ev(exec, name, seq string) *event.Event {
	e := event.New()
	e.SetID(name)
	e.SetType(events.Prefix + name)
	e.SetSource("/t")
	if exec != "" {
		e.SetExtension(events.ExtExecutionID, exec)
	}
	if seq != "" {
		e.SetExtension(events.ExtSeq, seq)
	}
	return &e
}

func names(as []arrival) string {
	var s []string
	for _, a := range as {
		s = append(s, a.e.ID())
	}
	return strings.Join(s, " ")
}

// Events that reach the follower out of their execution's order go on in it: a
// live event that overtook a persisted one waits for it, the next execution's
// live events wait for the follow to get there, and what never comes holds the
// rest no longer than orderHold.
func TestSequencerOrders(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		add    *event.Event
		live   bool
		follow string    // follow this execution instead of adding
		expire time.Time // expire at this time instead of adding
		want   string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a live step.completed before the persisted checkpoint before it", []step{
			{follow: "A", want: ""},
			{add: ev("A", "started", "5.1.1"), live: true, want: "started"},
			{add: ev("A", "count", "5.1.3"), live: true, want: ""},
			{add: ev("A", "parse", "5.1.2"), want: "parse count"},
			{add: ev("A", "completed", "5.1.4"), want: "completed"},
		}},
		{"the next execution's started before the fallback to it", []step{
			{follow: "A", want: ""},
			{add: ev("A", "started", "5.1.1"), live: true, want: "started"},
			{add: ev("B", "B.started", "9.1.1"), live: true, want: ""},
			{add: ev("B", "B.step", "9.1.2"), live: true, want: ""},
			{add: ev("A", "fallback", "5.1.2"), want: "fallback"},
			{follow: "B", want: "B.started B.step"},
			{add: ev("A", "late", "5.1.3"), live: true, want: "late"}, // A is left: nothing to wait for
		}},
		{"the primary's progress before the routing decision", []step{
			{add: ev("A", "started", "5.1.1"), live: true, want: ""},
			{add: ev("", "decided", ""), want: "decided"},
			{follow: "A", want: "started"},
		}},
		{"a redelivery starts its own count", []step{
			{follow: "A", want: ""},
			{add: ev("A", "started", "5.1.1"), live: true, want: "started"},
			{add: ev("A", "again", "5.2.1"), live: true, want: "again"},
			{add: ev("A", "step", "5.2.3"), live: true, want: ""},
			{add: ev("A", "old", "5.1.2"), want: "old"}, // the first delivery's, late
			{add: ev("A", "checkpoint", "5.2.2"), want: "checkpoint step"},
		}},
		{"a lost event holds the rest orderHold", []step{
			{follow: "A", want: ""},
			{add: ev("A", "started", "5.1.1"), live: true, want: "started"},
			{add: ev("A", "four", "5.1.4"), live: true, want: ""},
			{add: ev("A", "three", "5.1.3"), live: true, want: ""},
			{expire: t0.Add(orderHold - time.Millisecond), want: ""},
			{expire: t0.Add(orderHold), want: "three four"},
			{add: ev("A", "five", "5.1.5"), live: true, want: "five"},
		}},
		{"events without a sequence go on at once", []step{
			{follow: "A", want: ""},
			{add: ev("A", "count", "5.1.2"), live: true, want: ""},
			{add: ev("", "repair.proposed", ""), want: "repair.proposed"},
			{add: ev("A", "unsequenced", ""), live: true, want: "unsequenced"},
			{add: ev("A", "started", "5.1.1"), want: "started count"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSequencer()
			for i, st := range tc.steps {
				var got []arrival
				switch {
				case st.follow != "":
					got = s.follow(st.follow, nil)
				case !st.expire.IsZero():
					got = s.expire(st.expire, nil)
				default:
					got = s.add(arrival{e: st.add, live: st.live, at: t0}, nil)
				}
				if diff := cmp.Diff(st.want, names(got)); diff != "" {
					t.Fatalf("step %d (%s): handed on (-want +got):\n%s", i, describe(st.add, st.follow), diff)
				}
			}
			if d := s.deadline(); !d.IsZero() {
				t.Errorf("events still held at the end, until %v", d)
			}
		})
	}
}

func describe(e *event.Event, follow string) string {
	if e == nil {
		return "follow " + follow
	}
	return fmt.Sprintf("add %s", e.ID())
}
