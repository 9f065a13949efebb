package router

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// soloWaiting tells whoever follows t live that a job of a skill with a
// concurrency limit without a key (max_concurrent) waits for a slot. Such a
// skill's jobs go to a pool of their own, whose one consumer hands out no more
// than the limit at once (see the worker): a job beyond it waits undelivered,
// where no worker sees it to say so, as a worker does for a keyed limit. So the
// router, having stored the job, reads the pool's consumer, and when every slot
// is taken publishes the same live-only io.skillbus.execution.waiting (for:
// concurrency) a worker would, if its job is past the last the consumer
// delivered. Only when someone follows the activation: a read or two per job of
// such a skill, nothing stored. A slot that frees between the read and
// the job's delivery makes the wait a short one; a read that fails says nothing.
// soloReadTimeout bounds soloWaiting's read of a pool's consumer: saying a run
// waits is a courtesy, not worth holding the router up for.
const soloReadTimeout = time.Second

func (r *Router) soloWaiting(ctx context.Context, t *trigger, o *routed) {
	solo := skill.SoloPool("")
	for i := range o.jobs() {
		pj := &o.jobs()[i]
		sr := pj.job.Skill
		if !strings.HasPrefix(sr.Pool, solo) {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, soloReadTimeout)
		c, err := r.cfg.Bus.Consumer(rctx, r.cfg.Bus.StreamJobs(), "worker-"+sr.Pool)
		cancel()
		if err != nil {
			r.cfg.Log.Debug("router: cannot read the pool of a skill with max_concurrent", "pool", sr.Pool, "err", err)
			continue
		}
		info := c.CachedInfo()
		if info == nil || info.Config.MaxAckPending <= 0 || info.NumAckPending < info.Config.MaxAckPending || info.NumPending == 0 {
			continue
		}
		// Every slot taken, jobs undelivered: this run waits only if its job is
		// one of them, past the last the consumer delivered (it may be out
		// already, in the slot that made them all taken).
		rctx, cancel = context.WithTimeout(ctx, soloReadTimeout)
		stored, err := r.jobs.GetLastMsgForSubject(rctx, pj.subject)
		cancel()
		if err != nil || stored.Sequence <= info.Delivered.Stream {
			continue
		}
		meta := pj.meta
		meta.CausationID = t.decidedID
		m, err := bus.Event{ID: sr.ExecutionID + ".waiting.concurrency.planned", Source: r.cfg.Source, Type: events.TypeExecutionWaiting, Meta: meta,
			Data: events.ExecutionWaiting{ExecutionID: sr.ExecutionID, Skill: sr.Name, For: "concurrency", Detail: fmt.Sprintf("%d at once", info.Config.MaxAckPending)},
		}.Msg(r.cfg.Bus.Subjects.Live(t.actID, sr.ExecutionID, events.TypeExecutionWaiting))
		if err == nil {
			err = r.cfg.Bus.PublishLive(m)
		}
		if err != nil {
			r.cfg.Log.Debug("router: live event not published", "type", events.TypeExecutionWaiting, "execution", sr.ExecutionID, "err", err)
		}
	}
}
