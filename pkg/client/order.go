package client

import (
	"slices"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/skillbus/skillbus/events"
)

// orderHold is how long an event waits for the events that come before it in its
// execution's sequence. A follower gets an execution's live events over plain NATS
// and its persisted ones through a JetStream consumer, each path in order but not
// with the other: a live step.completed can overtake the persisted checkpoint of the
// step before, and the next execution's live started the persisted fallback that
// leads to it. What never comes (a live event lost with a connection) holds the
// events after it this long.
const orderHold = time.Second

// arrival is an event as it reached the follower; live events are progress for
// fn only, persisted ones also decide the result.
type arrival struct {
	e    *event.Event
	live bool
	seq  events.Seq
	at   time.Time
}

// sequencer hands an activation's events on in each execution's own order (the
// worker's events.ExtSeq), and the live events of an execution only once the follow
// has reached it. Other events without a sequence go on as they arrive.
type sequencer struct {
	current string          // the execution followed now
	left    map[string]bool // executions followed before
	execs   map[string]*execOrder
}

// execOrder is one execution's events held back, in sequence order, and the last
// one handed on.
type execOrder struct {
	held []arrival
	last events.Seq
	any  bool // last is set
}

func newSequencer() *sequencer {
	return &sequencer{left: map[string]bool{}, execs: map[string]*execOrder{}}
}

// add takes an arriving event and returns what can go on now, in order.
func (s *sequencer) add(a arrival, out []arrival) []arrival {
	exec, _ := a.e.Extensions()[events.ExtExecutionID].(string)
	v, _ := a.e.Extensions()[events.ExtSeq].(string)
	seq, err := events.ParseSeq(v)
	if exec == "" || s.left[exec] || (err != nil && (!a.live || exec == s.current)) {
		return append(out, a)
	}
	o := s.execs[exec]
	if o == nil {
		o = &execOrder{}
		s.execs[exec] = o
	}
	if err != nil {
		seq = events.Seq{} // held with the execution's others, first
	}
	a.seq = seq
	if exec == s.current && o.any && seq.Compare(o.last) <= 0 {
		return append(out, a) // later than what it follows: nothing to wait for
	}
	i, _ := slices.BinarySearchFunc(o.held, seq, func(h arrival, t events.Seq) int { return h.seq.Compare(t) })
	o.held = slices.Insert(o.held, i, a)
	if exec != s.current {
		return out
	}
	return o.release(out, false)
}

// release hands on o's held events that follow on from the last one, or all of
// them when all is set.
func (o *execOrder) release(out []arrival, all bool) []arrival {
	n := 0
	for _, a := range o.held {
		if !all && o.any && !a.seq.Follows(o.last) && a.seq != (events.Seq{}) {
			break
		}
		if !all && !o.any && a.seq.N != 1 && a.seq != (events.Seq{}) {
			break
		}
		out = append(out, a)
		if a.seq != (events.Seq{}) {
			o.last, o.any = a.seq, true
		}
		n++
	}
	o.held = o.held[n:]
	return out
}

// follow makes exec the execution followed, and returns its events that can go on.
func (s *sequencer) follow(exec string, out []arrival) []arrival {
	if s.current != "" && s.current != exec {
		s.left[s.current] = true
		if o := s.execs[s.current]; o != nil {
			out = o.release(out, true) // what it still held comes before exec's
			delete(s.execs, s.current)
		}
	}
	s.current = exec
	if o := s.execs[exec]; o != nil {
		out = o.release(out, false)
	}
	return out
}

// deadline is when the oldest held event stops waiting; zero when none is held.
func (s *sequencer) deadline() time.Time {
	var d time.Time
	for _, o := range s.execs {
		for _, a := range o.held {
			if t := a.at.Add(orderHold); d.IsZero() || t.Before(d) {
				d = t
			}
		}
	}
	return d
}

// expire hands on every event of each execution whose oldest held event has
// waited orderHold by now, in order: what it waited for is not coming.
func (s *sequencer) expire(now time.Time, out []arrival) []arrival {
	for _, exec := range s.sortedExecs() {
		o := s.execs[exec]
		for _, a := range o.held {
			if !now.Before(a.at.Add(orderHold)) {
				out = o.release(out, true)
				break
			}
		}
	}
	return out
}

// sortedExecs is the executions with held events, in a fixed order.
func (s *sequencer) sortedExecs() []string {
	var ids []string
	for id, o := range s.execs {
		if len(o.held) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
