package events

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Seq is an event's place in its execution's own sequence, as the worker stamps it
// (ExtSeq) on the events of an execution someone follows live: the Nth event of one
// delivery of one job message. A job redelivered, or published again (a resumed
// confirmation, an approved repair), starts a later delivery whose events come
// after every event of the earlier ones. Written "job.delivery.n".
type Seq struct {
	Job      uint64 // the job message's stream sequence
	Delivery uint64 // the delivery of that message, from 1
	N        uint64 // the event's place in the delivery, from 1
}

// String is the extension's value: "412.1.3".
func (s Seq) String() string {
	b := make([]byte, 0, 24)
	b = strconv.AppendUint(b, s.Job, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, s.Delivery, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, s.N, 10)
	return string(b)
}

// ParseSeq reads an ExtSeq value.
func ParseSeq(v string) (Seq, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return Seq{}, fmt.Errorf("%s %q: want job.delivery.n", ExtSeq, v)
	}
	var n [3]uint64
	for i, p := range parts {
		u, err := strconv.ParseUint(p, 10, 64)
		if err != nil || (p[0] == '0' && len(p) > 1) {
			return Seq{}, fmt.Errorf("%s %q: part %d is not a decimal number", ExtSeq, v, i+1)
		}
		n[i] = u
	}
	if n[1] == 0 || n[2] == 0 {
		return Seq{}, fmt.Errorf("%s %q: delivery and n count from 1", ExtSeq, v)
	}
	return Seq{Job: n[0], Delivery: n[1], N: n[2]}, nil
}

// Compare orders s and o in the execution's sequence: -1 when s comes first.
func (s Seq) Compare(o Seq) int {
	return cmp.Or(cmp.Compare(s.Job, o.Job), cmp.Compare(s.Delivery, o.Delivery), cmp.Compare(s.N, o.N))
}

// Follows reports whether s comes right after prev: the next event of prev's
// delivery, or the first of a later one.
func (s Seq) Follows(prev Seq) bool {
	if s.Job == prev.Job && s.Delivery == prev.Delivery {
		return s.N == prev.N+1
	}
	return s.N == 1 && s.Compare(prev) > 0
}
