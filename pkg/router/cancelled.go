package router

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
)

// Timers of cancelled runs. A run parked at a confirmation, a sleep or a wait
// has a scheduled message in EVENTS that would resume it (a confirmation's
// timeout, a sleep's wake-up, a wait's timeout). A cancel releases its job at
// once (package control), with credentials that may not purge EVENTS; so every
// router watches the cancel requests and purges the execution's scheduled
// messages. The purges are idempotent, and a timer left anyway (no router was
// running, or a purge failed) fires into an answer for a run no longer paused,
// which the answer path ignores.

// watchCancels starts the watch of new cancel requests; stopWaits ends it.
func (r *Router) watchCancels(ctx context.Context, ix *waitIndex) error {
	kw, err := r.runs.Watch(context.WithoutCancel(ctx), events.RunsCancelFilter, jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	ix.cancels, ix.cancelsDone = kw, make(chan struct{})
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ix.stopCancels = stop
	go func() {
		defer close(ix.cancelsDone)
		for e := range kw.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if exec, ok := events.CancelledExecution(e.Key()); ok && events.CheckToken("execution id", exec) == nil {
				r.dropTimers(rctx, exec)
			}
		}
	}()
	return nil
}

// dropTimers purges the scheduled messages of a cancelled execution.
func (r *Router) dropTimers(ctx context.Context, executionID string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, subject := range r.cfg.Bus.Subjects.Timers(executionID) {
		if err := r.events.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("router: could not remove a cancelled run's scheduled message; it fires and is ignored", "execution", executionID, "subject", subject, "err", err)
		}
	}
}
