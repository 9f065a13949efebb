package skill

import (
	"strconv"
	"strings"

	"github.com/skillbus/skillbus/pkg/flow"
)

// Queue priority orders a pool's queued runs: a run whose skill says
// queue_priority: 300 is queued as if it had been enqueued 300 seconds earlier,
// so it starts before the runs of the same pool that have waited less than five
// minutes. It is a CEL expression over the trigger (package flow) giving -600
// to 600 seconds, evaluated by the router when it publishes the run's job.
//
// It is not priority (high, medium, low), which orders a skill among the
// candidates a trigger recalls and has no say in when its run starts.

const queuePriorityHint = "a number of seconds from -600 to 600, or a CEL expression giving one, " +
	`such as queue_priority: 'data.plan == "enterprise" ? 300 : 0'`

func queuePriorityFields() []*field {
	return []*field{{name: "queue_priority", decode: decodeQueuePriority}}
}

func decodeQueuePriority(b *builder, d *decoder, p pair) {
	s, ok := d.str(p.v, "queue_priority")
	if !ok {
		return
	}
	switch strings.TrimSpace(s) {
	case "high", "medium", "low":
		d.errAt(p.v, "queue_priority", queuePriorityHint,
			"queue_priority %s is not a number of seconds: high, medium and low are priority's values, which order routing candidates, not queued runs", s)
		return
	}
	if prg, ok := d.celProgram(p.v, "queue_priority", s, flow.Priority, queuePriorityHint); ok {
		b.s.QueuePriority = strings.TrimSpace(s)
		b.prio = &keyUse{d: d, n: p.v, field: "queue_priority", reads: prg.Reads()}
	}
}

// decodePriority is priority's enum, with a pointer to queue_priority for a
// number, the mistake of someone who meant to order runs.
func decodePriority(b *builder, d *decoder, p pair) {
	if r := d.resolve(p.v); r != nil && (r.ShortTag() == "!!int" || r.ShortTag() == "!!float") {
		d.errAt(p.v, "priority", "to start this skill's runs sooner in a busy pool, write queue_priority: "+r.Value,
			"priority %s is not valid: priority is high, medium or low and orders routing candidates; queue_priority is the number of seconds that orders queued runs", r.Value)
		return
	}
	enumField("priority", priorities, func(s *Skill) *string { return &s.Priority })(b, d, p)
}

// checkQueuePriority refuses queue_priority on a skill with max_concurrent: its
// runs have a pool of their own, limited across the fleet by one consumer, which
// runs queued ahead of their turn would bypass.
func (b *builder) checkQueuePriority() {
	set, ok := b.set["queue_priority"]
	if !ok || b.s.QueuePriority == "" || b.s.MaxConcurrent == 0 {
		return
	}
	set.d.errAt(set.val, "queue_priority", "drop one of them; a keyed concurrency limit (concurrency: [{key: ..., limit: N}]) works with queue_priority",
		"queue_priority does not apply to a skill with max_concurrent %s: its runs queue in a pool of their own", strconv.Itoa(b.s.MaxConcurrent))
	b.s.QueuePriority = ""
}
