package worker

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
)

// A skill's cancel_on rules file each of its runs in KV runs under
// events.RunCancelOnKey (package router), read by every router that routes an
// event of a rule's type that may match it, until the rule's timeout. A run that
// has ended can be cancelled no more, so its worker deletes them when it records
// the outcome: routers do not read them for the rest of the timeout, and the
// bucket does not keep them that long. A fallback is not an end: the run goes on
// in the next skill, and cancelling the first execution cancels it there, so
// the keys of every execution of a fallback chain are deleted at the chain's
// end. A failed delete is logged only: the key expires at its timeout, and a
// router that reads it finds the run ended.
//
// Only skills with cancel_on have keys to look for: listing them is a consumer
// on the bucket's stream, created and deleted. An execution that fell back is
// known by its skill's name only, so its skill's current version says; a run
// of an older version with cancel_on, whose current version has none, keeps
// its keys until their timeout.

// cancelOnListHook, when set (by tests), is called each time a worker lists an
// execution's cancel_on keys.
var cancelOnListHook atomic.Pointer[func(skill, executionID string)]

// dropCancelOn deletes the cancel_on keys of the execution j ends and of the
// executions that fell back to it.
func (w *Worker) dropCancelOn(ctx context.Context, j *job) {
	own := j.skill != nil && len(j.skill.CancelOn) > 0
	if !own && len(j.data.History) == 0 {
		return
	}
	if own {
		w.dropCancelOnOf(ctx, j.data.Skill.Name, j.data.ExecutionID)
	}
	for _, a := range j.data.History {
		if s, err := w.cfg.Catalog.LookupVersion(ctx, a.Skill, ""); err == nil && len(s.CancelOn) == 0 {
			continue
		}
		w.dropCancelOnOf(ctx, a.Skill, a.ExecutionID)
	}
}

func (w *Worker) dropCancelOnOf(ctx context.Context, skill, executionID string) {
	if events.CheckToken("skill", skill) != nil || events.CheckToken("execution id", executionID) != nil {
		return
	}
	if h := cancelOnListHook.Load(); h != nil {
		(*h)(skill, executionID)
	}
	lister, err := w.runs.ListKeysFiltered(ctx, events.RunsCancelOnOfFilter(skill, executionID))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return
	}
	if err != nil {
		w.cfg.Log.Warn("worker: cancel_on keys of an ended run not read; they expire at their timeout", "execution", executionID, "err", err)
		return
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop()
	for _, k := range keys {
		if err := w.runs.Delete(ctx, k); err != nil {
			w.cfg.Log.Warn("worker: a cancel_on key of an ended run not deleted; it expires at its timeout", "key", k, "err", err)
		}
	}
}
