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
// soloReadTimeout bounds soloWaiting's reads of a pool's consumer and of the
// job: saying a run waits is a courtesy, made in a goroutine of its own, which
// a loaded server may answer slowly.
const soloReadTimeout = 5 * time.Second

// soloJob is what soloWaiting needs of a planned job, copied: the trigger and
// its plan are the router's, reused once it returns.
type soloJob struct {
	pool, subject, name, execution, actID string
	meta                                  bus.Meta
}

func (r *Router) soloWaiting(ctx context.Context, t *trigger, o *routed) {
	solo := skill.SoloPool("")
	var jobs []soloJob
	for i := range o.jobs() {
		pj := &o.jobs()[i]
		sr := pj.job.Skill
		if !strings.HasPrefix(sr.Pool, solo) {
			continue
		}
		meta := pj.meta
		meta.CausationID = t.decidedID
		jobs = append(jobs, soloJob{pool: sr.Pool, subject: pj.subject, name: sr.Name, execution: sr.ExecutionID, actID: t.actID, meta: meta})
	}
	if len(jobs) == 0 {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		for _, j := range jobs {
			r.soloWaits(context.WithoutCancel(ctx), j)
		}
	}()
}

// soloWaits publishes execution.waiting for j if every slot of its pool is taken
// and its job is not yet delivered.
func (r *Router) soloWaits(ctx context.Context, j soloJob) {
	rctx, cancel := context.WithTimeout(ctx, soloReadTimeout)
	c, err := r.cfg.Bus.Consumer(rctx, r.cfg.Bus.StreamJobs(), "worker-"+j.pool)
	cancel()
	if err != nil {
		r.cfg.Log.Debug("router: cannot read the pool of a skill with max_concurrent", "pool", j.pool, "err", err)
		return
	}
	info := c.CachedInfo()
	if info == nil || info.Config.MaxAckPending <= 0 || info.NumAckPending < info.Config.MaxAckPending || info.NumPending == 0 {
		return
	}
	// Every slot taken, jobs undelivered: this run waits only if its job is one
	// of them, past the last the consumer delivered (it may be out already, in
	// the slot that made them all taken).
	rctx, cancel = context.WithTimeout(ctx, soloReadTimeout)
	stored, err := r.jobs.GetLastMsgForSubject(rctx, j.subject)
	cancel()
	if err != nil || stored.Sequence <= info.Delivered.Stream {
		return
	}
	m, err := bus.Event{ID: j.execution + ".waiting.concurrency.planned", Source: r.cfg.Source, Type: events.TypeExecutionWaiting, Meta: j.meta,
		Data: events.ExecutionWaiting{ExecutionID: j.execution, Skill: j.name, For: "concurrency", Detail: fmt.Sprintf("%d at once", info.Config.MaxAckPending)},
	}.Msg(r.cfg.Bus.Subjects.Live(j.actID, j.execution, events.TypeExecutionWaiting))
	if err == nil {
		err = r.cfg.Bus.PublishLive(m)
	}
	if err != nil {
		r.cfg.Log.Debug("router: live event not published", "type", events.TypeExecutionWaiting, "execution", j.execution, "err", err)
	}
}
