package console

import (
	"strings"

	"github.com/skillbus/skillbus/events"
)

// flowPrefixes begin the parts of a candidate's reason that flow control wrote
// (package router): a filter's verdict, a rate limit's place, a debounce or a
// batch.
var flowPrefixes = []string{"filter ", "rate_limit ", "debounce ", "batch ", "batch run", "cancel_on "}

// flowVerdicts says which flow control applied to a run's decision: how its
// trigger came (the run of a debounced burst or of a batch, which routers
// publish) and, for each skill the plan starts, what its filter, rate limit,
// debounce or batch said. Such a run is told by its trigger's subject, a
// skill's TriggerDebounced, which only routers may publish on; its source any
// publisher could set on an ordinary trigger.
func flowVerdicts(subj events.Subjects, d *events.RouteDecided) []string {
	var out []string
	t := d.Trigger
	if name, ok := subj.SkillFromDebounced(t.Subject); ok {
		if strings.HasPrefix(t.ID, "batch-") {
			out = append(out, "the run of a batch of "+name+"'s triggers (data: their events)")
		} else {
			out = append(out, "the run of a debounced burst of "+name+", with its last trigger's data (activation "+t.ID+")")
		}
	}
	for _, c := range d.Candidates {
		if !c.Selected {
			continue
		}
		for part := range strings.SplitSeq(c.Reason, "; ") {
			for _, p := range flowPrefixes {
				if strings.HasPrefix(part, p) {
					out = append(out, c.Name+": "+part)
					break
				}
			}
		}
	}
	return out
}
