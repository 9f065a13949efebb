package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
)

// EventWait is what a wait_for_event step waits for, with the run's side of its
// match: the worker keeps it where routers find it (package worker), and a
// router evaluates the match on each event of Type (package router).
type EventWait struct {
	Type, Match string
	Timeout     time.Duration
	// Inputs and Steps are what the match reads as inputs and steps: the fields
	// it reads of the run's inputs and of the results of the earlier steps it
	// names, by name (flow.WaitMatch.Keep); nil without a match.
	Inputs any
	Steps  map[string]any
}

// waitingForEvent starts the reason of a step waiting for an event, in its log.
const waitingForEvent = "waiting for event "

// waitRefs are the names a wait's match reads of earlier steps: it sees them as
// steps.<name>. A match that reads steps otherwise sees every earlier step.
func waitRefs(m *flow.WaitMatch, writers map[string][]int) []string {
	names, all := m.Steps()
	if !all {
		return names
	}
	names = names[:0:0]
	for n := range writers {
		names = append(names, n)
	}
	return names
}

// MaxWaitBytes bounds what a wait keeps of its run for its match (the inputs
// and step results the match reads, as JSON): every router holds it in memory
// for as long as the run waits.
const MaxWaitBytes = 64 << 10

// park stops a wait_for_event step that has no answer yet: the run waits, and
// the pause carries what a router needs to match events without it — only
// what the match reads of the run. A run whose match reads more than
// MaxWaitBytes fails the step instead.
func (x *execution) park(i int, cs *cstep, env expr.Env, start time.Time) stepState {
	st := cs.step
	w := &EventWait{Type: st.WaitForEvent.Type, Timeout: time.Duration(st.WaitForEvent.Timeout)}
	if w.Timeout <= 0 {
		w.Timeout = skill.DefaultWaitTimeout
	}
	if cs.match != nil {
		w.Match = cs.match.String()
		names, all := cs.match.Steps()
		if all {
			names = waitRefs(cs.match, x.c.writersOf(i))
		}
		var steps map[string]any
		for _, n := range names {
			if v, ok := env[n]; ok && x.c.writesBefore(n, i) {
				if steps == nil {
					steps = map[string]any{}
				}
				steps[n] = v
			}
		}
		w.Inputs, w.Steps = cs.match.Keep(env["inputs"], steps)
		if n, err := waitSize(w); err != nil || n > MaxWaitBytes {
			if err == nil {
				err = fmt.Errorf("what its match reads of the run (inputs and step results) is %d bytes as JSON; at most %d. Read fewer or smaller fields in match", n, MaxWaitBytes)
			}
			return x.fail(i, failure.Fatalf("wait_for_event: %v", err), start, false)
		}
	}
	x.log.Steps[i].Status = StatusWaiting
	x.log.Steps[i].Reason = waitingForEvent + w.Type + " (at most " + w.Timeout.String() + ")"
	return stepState{status: StatusWaiting, pause: &PausedError{Step: st.ID, Message: x.log.Steps[i].Reason, Wait: w}}
}

// waitSize is the size of what a wait keeps of its run, as JSON.
func waitSize(w *EventWait) (int, error) {
	n := 0
	if w.Inputs != nil {
		b, err := json.Marshal(w.Inputs)
		if err != nil {
			return 0, fmt.Errorf("inputs: %w", err)
		}
		n += len(b)
	}
	for name, v := range w.Steps {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, fmt.Errorf("result of %s: %w", name, err)
		}
		n += len(name) + len(b)
	}
	return n, nil
}

// waited is the result of a wait_for_event step once its wait has ended: the
// matched event's data, or the timeout as the step's error (fatal: waiting again
// would not bring the event back), which its on_error handles.
func (x *execution) waited(st *skill.Step) (any, error) {
	a := x.r.Confirmations[st.ID]
	if !a.Approved {
		why := a.Reason
		if why == "" {
			why = "no " + st.WaitForEvent.Type + " event matched in time"
		}
		return nil, failure.Fatalf("wait_for_event: %s", why)
	}
	if len(a.Data) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(a.Data, &v); err != nil {
		return nil, failure.Fatalf("wait_for_event: the matched event's data is not JSON: %v", err)
	}
	return v, nil
}

// writersOf are the names bound by the steps before step i.
func (c *compiled) writersOf(i int) map[string][]int {
	out := map[string][]int{}
	for j := 0; j < i && j < len(c.steps); j++ {
		st := c.steps[j].step
		out[st.ID] = append(out[st.ID], j)
		if st.Output != "" && st.Output != st.ID {
			out[st.Output] = append(out[st.Output], j)
		}
	}
	return out
}

// writesBefore says whether a step before step i binds name: only step results
// are a wait's steps, not the run's other names (inputs, trigger).
func (c *compiled) writesBefore(name string, i int) bool {
	for j := 0; j < i && j < len(c.steps); j++ {
		if st := c.steps[j].step; st.ID == name || st.Output == name {
			return true
		}
	}
	return false
}
