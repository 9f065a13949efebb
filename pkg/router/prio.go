package router

import (
	"fmt"
	"strconv"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/flow"
)

// Queue priority. A skill's queue_priority is evaluated when admit takes the
// skill for a trigger, once, and kept on the trigger; plan puts it in the
// skill's entry of the plan and publishes the job on the lane of its pool that
// the priority falls in (events.Lane), with the priority in a header, where the
// pool's workers order it among the jobs they hold (see package worker). A
// skill without queue_priority is published as ever, on its pool's own subject.

// queuePriority is what a skill's queue_priority gave for a trigger.
type queuePriority struct {
	seconds int
	err     string // why it failed; it then counts as 0
}

// prioritize evaluates a skill's queue_priority over t and keeps the verdict
// for plan; it returns the verdict as a reason.
func (t *trigger) prioritize(name string, prg *flow.Program) string {
	if t.prio == nil {
		t.prio = make(map[string]queuePriority, 1)
	}
	p, err := prg.PriorityOf(t.event())
	if err != nil {
		qp := queuePriority{err: fmt.Sprintf("%v (queue_priority: %s)", err, prg)}
		t.prio[name] = qp
		return "queue_priority error, queued at 0: " + qp.err
	}
	t.prio[name] = queuePriority{seconds: p}
	return "queue_priority " + strconv.Itoa(p) + "s"
}

// withPriority puts what queue_priority gave for the trigger in a plan's entry.
func (t *trigger) withPriority(sr events.SkillRef) events.SkillRef {
	sr.QueuePriority = t.prio[sr.Name].seconds
	return sr
}

// lane logs a queue_priority that failed (the decision's candidate reason
// records it too). The job carries its priority in a header already
// (bus.Event.JobMsg puts it there, as on every job of the run).
func (r *Router) lane(sr *events.SkillRef, t *trigger) {
	if t.prio != nil {
		if qp := t.prio[sr.Name]; qp.err != "" {
			r.cfg.Log.Warn("router: queue_priority failed; the run is queued at 0", "skill", sr.Name, "execution", sr.ExecutionID, "err", qp.err)
		}
	}
}
