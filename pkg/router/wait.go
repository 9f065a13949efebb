package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/run"
)

// Waits for events: a worker that reaches a wait_for_event step parks the run as
// for a sleep and writes a wait record (run.Wait) to KV runs. Every router
// watches those records and keeps the open waits indexed by event type, so a
// trigger costs one atomic load when no wait is open and one map lookup when
// none waits for its type. When a trigger of a waited-for type arrives, the
// router evaluates each such wait's match and, for each that holds, publishes an
// io.skillbus.wait.ended with the event's data under the fixed message id
// <execution>.wait.matched.<step>: two routers (or two deliveries) matching the
// same wait publish one message, the stream dropping the second as a duplicate.
// The trigger is routed as usual besides. The answers consumer then resumes the
// parked job as it does at a sleep's end (confirm.go); the wait's timeout is a
// scheduled wait.ended, and the first of the two handled resumes the run.
//
// A trigger routed between the worker writing a wait record and this router's
// watcher delivering it finds no wait to match. So a router that sees a record
// replays the triggers stored on the type's subject since the record was
// written, less waitReplayLookback, matching them against that wait alone
// (replayWait): the router that routed such a trigger replays it once its
// watcher catches up, and so does every other router. A router replays the
// waits open when it starts too: the router that routed such a trigger may have
// died before it saw the record, and no other router was running. A repeat
// match is the same message id, which the stream drops, or a wait.ended the
// answer path ignores.

// waitIndex is the open waits, by event type and execution.
type waitIndex struct {
	// open counts the waits indexed: the trigger path reads only this when 0.
	open   atomic.Int64
	mu     sync.RWMutex
	byType map[string]map[string]*openWait
	// typeOf is the type each execution's wait is indexed under.
	typeOf map[string]string
	kw     jetstream.KeyWatcher
	done   chan struct{}
	// triggers is the TRIGGERS stream the replays read; replays the replays in
	// progress, at most cap(replaySlots) at once, ended by stopReplays.
	triggers    jetstream.Stream
	replays     sync.WaitGroup
	replaySlots chan struct{}
	stopReplays context.CancelFunc
	// cancels watches new cancel requests, whose runs' timers go (cancelled.go).
	cancels     jetstream.KeyWatcher
	cancelsDone chan struct{}
	stopCancels context.CancelFunc
}

// maxReplays bounds the replays of triggers a router runs at once.
const maxReplays = 8

// waitReplayLookback is how long before a wait record's write time a replay
// starts. The record's time and the triggers' are stored by the servers of two
// streams (KV runs and TRIGGERS), whose clocks may differ; and a trigger
// stored just before the record, routed after it was written but before the
// router's watcher delivered it, matches no wait when routed.
const waitReplayLookback = 2 * time.Second

// openWait is a wait record ready to match: its match compiled, its run's side
// decoded once.
type openWait struct {
	rec    run.Wait
	match  *flow.WaitMatch // nil: any event of the type
	inputs any
	steps  map[string]any
}

func (r *Router) startWaits(ctx context.Context) error {
	ix := &waitIndex{byType: map[string]map[string]*openWait{}, typeOf: map[string]string{}, done: make(chan struct{}),
		replaySlots: make(chan struct{}, maxReplays)}
	var err error
	if ix.triggers, err = r.cfg.Bus.Stream(ctx, r.cfg.Bus.StreamTriggers()); err != nil {
		return err
	}
	kw, err := r.runs.Watch(context.WithoutCancel(ctx), events.RunsWaitFilter)
	if err != nil {
		return err
	}
	ix.kw = kw
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ix.stopReplays = stop
	loaded := make(chan struct{})
	lookback := cmp.Or(r.waitLookback, waitReplayLookback)
	go func() {
		defer close(ix.done)
		first := true
		// The waits open when the router starts are replayed too (a trigger
		// routed by a router that died before it saw the record is matched by
		// no one else), in one pass per type once all are known.
		atStart := map[string][]replaying{}
		for e := range kw.Updates() {
			if e == nil {
				if first {
					first = false
					close(loaded)
					for _, ws := range atStart {
						r.replay(rctx, ix, ws)
					}
					atStart = nil
				}
				continue
			}
			if !first && r.waitHook != nil {
				r.waitHook(e)
			}
			opened, closed := r.indexWait(ix, e)
			if opened != nil {
				w := replaying{ow: opened, since: e.Created().Add(-lookback)}
				if first {
					atStart[opened.rec.Type] = append(atStart[opened.rec.Type], w)
				} else {
					r.replay(rctx, ix, []replaying{w})
				}
			}
			if closed != nil && e.Operation() == jetstream.KeyValuePurge {
				r.cancelledWait(rctx, closed)
			}
		}
		if first {
			close(loaded)
		}
	}()
	// Route no trigger before the waits already open are known.
	select {
	case <-loaded:
	case <-ctx.Done():
		_ = kw.Stop()
		<-ix.done
		stop()
		return ctx.Err()
	}
	if err := r.watchCancels(ctx, ix); err != nil {
		_ = kw.Stop()
		<-ix.done
		stop()
		ix.replays.Wait()
		return err
	}
	r.waits = ix
	return nil
}

func (r *Router) stopWaits() {
	if ix := r.waits; ix != nil {
		_ = ix.kw.Stop()
		<-ix.done
		ix.stopReplays()
		ix.replays.Wait()
		ix.stopCancels()
		_ = ix.cancels.Stop()
		<-ix.cancelsDone
	}
}

// indexWait applies one change of a wait record to the index, and returns the
// wait a put opened and the one the change replaced or removed.
func (r *Router) indexWait(ix *waitIndex, e jetstream.KeyValueEntry) (opened, closed *openWait) {
	exec, ok := events.WaitingExecution(e.Key())
	if !ok {
		return nil, nil
	}
	var ow *openWait
	if e.Operation() == jetstream.KeyValuePut {
		var err error
		if ow, err = compileWait(e.Value()); err != nil {
			// It cannot match; its timeout ends it.
			r.cfg.Log.Warn("router: wait record unusable; only its timeout will end it", "execution", exec, "err", err)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if typ, had := ix.typeOf[exec]; had {
		closed = ix.byType[typ][exec]
		delete(ix.byType[typ], exec)
		if len(ix.byType[typ]) == 0 {
			delete(ix.byType, typ)
		}
		delete(ix.typeOf, exec)
		ix.open.Add(-1)
	}
	if ow == nil {
		return nil, closed
	}
	m := ix.byType[ow.rec.Type]
	if m == nil {
		m = map[string]*openWait{}
		ix.byType[ow.rec.Type] = m
	}
	m[exec] = ow
	ix.typeOf[exec] = ow.rec.Type
	ix.open.Add(1)
	return ow, closed
}

// cancelledWait purges the scheduled timeout of a wait whose record was
// purged: a cancel purges it (package control), with credentials that may not
// purge EVENTS, where a router resuming the run deletes it. Every router that
// had the wait does this.
func (r *Router) cancelledWait(ctx context.Context, ow *openWait) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.events.Purge(ctx, jetstream.WithPurgeSubject(r.cfg.Bus.Subjects.WaitTimer(ow.rec.ExecutionID, ow.rec.Step))); err != nil && ctx.Err() == nil {
		r.cfg.Log.Warn("router: could not remove a cancelled wait's timeout; it fires and is ignored", "execution", ow.rec.ExecutionID, "err", err)
	}
}

// holds says whether ow is still the execution's open wait.
func (ix *waitIndex) holds(ow *openWait) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.byType[ow.rec.Type][ow.rec.ExecutionID] == ow
}

// replaying is a wait to replay triggers for, from since (its record's write
// time less waitReplayLookback).
type replaying struct {
	ow    *openWait
	since time.Time
}

// replay runs replayWaits for waits of one type in the background, at most
// maxReplays at once; a failure is logged, the other routers replaying the same
// records.
func (r *Router) replay(ctx context.Context, ix *waitIndex, ws []replaying) {
	ix.replays.Add(1)
	go func() {
		defer ix.replays.Done()
		select {
		case ix.replaySlots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-ix.replaySlots }()
		if err := r.replayWaits(ctx, ix, ws); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("router: could not replay the triggers stored since waits began; one routed meanwhile may not end them", "type", ws[0].ow.rec.Type, "waits", len(ws), "err", err)
		}
	}()
}

// replayWaits matches waits of one type against the triggers of that type
// stored since the earliest of their since, each wait against those stored
// since its own, up to the last one stored now: any later one is routed after
// the waits were indexed, and matched then.
func (r *Router) replayWaits(ctx context.Context, ix *waitIndex, ws []replaying) error {
	if r.replayHook != nil {
		r.replayHook(len(ws))
	}
	since := ws[0].since
	for _, w := range ws[1:] {
		if w.since.Before(since) {
			since = w.since
		}
	}
	subject := r.cfg.Bus.Subjects.Trigger(ws[0].ow.rec.Type)
	last, err := ix.triggers.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return err
	case last.Time.Before(since):
		return nil
	}
	c, err := r.cfg.Bus.OrderedConsumer(ctx, r.cfg.Bus.StreamTriggers(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
	if err != nil {
		return err
	}
	defer func() {
		if info := c.CachedInfo(); info != nil {
			_ = r.cfg.Bus.DeleteConsumer(context.WithoutCancel(ctx), r.cfg.Bus.StreamTriggers(), info.Name)
		}
	}()
	open := make([]*openWait, 0, len(ws))
	for {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return err
		}
		var t trigger
		if parse(ctx, m, r.parseConfig, &t) == nil && t.md() != nil {
			open = open[:0]
			for _, w := range ws {
				if !t.md().Timestamp.Before(w.since) && ix.holds(w.ow) {
					open = append(open, w.ow)
				}
			}
			if len(open) > 0 {
				if err := r.endWaits(ctx, &t, open); err != nil {
					return err
				}
			}
		}
		if t.md() == nil || t.md().Sequence.Stream >= last.Sequence || !ix.holdsAny(ws) {
			return nil
		}
	}
}

// holdsAny says whether any of ws is still open.
func (ix *waitIndex) holdsAny(ws []replaying) bool {
	for _, w := range ws {
		if ix.holds(w.ow) {
			return true
		}
	}
	return false
}

func compileWait(raw []byte) (*openWait, error) {
	ow := &openWait{}
	if err := json.Unmarshal(raw, &ow.rec); err != nil {
		return nil, err
	}
	if ow.rec.ExecutionID == "" || ow.rec.Step == "" || ow.rec.Type == "" {
		return nil, errors.New("wait record without execution_id, step or type")
	}
	if ow.rec.Match != "" {
		var err error
		if ow.match, err = flow.CompileWaitMatch(ow.rec.Match); err != nil {
			return nil, err
		}
	}
	if len(ow.rec.Inputs) > 0 {
		if err := json.Unmarshal(ow.rec.Inputs, &ow.inputs); err != nil {
			return nil, err
		}
	}
	if len(ow.rec.Steps) > 0 {
		ow.steps = make(map[string]any, len(ow.rec.Steps))
		for name, raw := range ow.rec.Steps {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, err
			}
			ow.steps[name] = v
		}
	}
	return ow, nil
}

// waitingFor returns the open waits for an event type.
func (ix *waitIndex) waitingFor(typ string) []*openWait {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	m := ix.byType[typ]
	if len(m) == 0 {
		return nil
	}
	out := make([]*openWait, 0, len(m))
	for _, ow := range m {
		out = append(out, ow)
	}
	return out
}

// matchWaits ends the waits a trigger matches: it publishes their wait.ended
// and returns once the stream has them, so a trigger is acked only after the
// waits it ends are recorded. An error retries the trigger; the fixed message
// ids make that harmless. A debounced or batch run (t.burstOf) matches nothing:
// it replays events that came before, with their type and data, and its own
// event was matched when it came.
func (r *Router) matchWaits(ctx context.Context, t *trigger) error {
	ix := r.waits
	if ix == nil || ix.open.Load() == 0 || t.e == nil || t.burstOf != "" {
		return nil
	}
	open := ix.waitingFor(t.e.Type)
	if len(open) == 0 {
		return nil
	}
	return r.endWaits(ctx, t, open)
}

// endWaits publishes the wait.ended of each of the open waits the trigger
// matches, and returns once the stream has them.
func (r *Router) endWaits(ctx context.Context, t *trigger, open []*openWait) error {
	e := t.e
	ev := &flow.WaitEvent{ID: e.ID, Type: e.Type, Source: e.Source, Subject: e.Subject, Time: e.Time, Data: t.data}
	var data json.RawMessage
	var b *bus.Batch
	var ended [][2]string // execution, its wait.ended's message id
	now := time.Now()
	for _, ow := range open {
		if now.After(ow.rec.TimeoutAt) {
			continue // its timeout ends it
		}
		if ow.match != nil {
			ok, err := ow.match.Match(ev, ow.inputs, ow.steps)
			if err != nil {
				r.cfg.Log.Info("router: wait_for_event match failed on an event; not matched", "execution", ow.rec.ExecutionID, "step", ow.rec.Step, "event", e.ID, "err", err)
				continue
			}
			if !ok {
				continue
			}
		}
		if data == nil {
			data = eventData(e.Data)
		}
		exec, step := ow.rec.ExecutionID, ow.rec.Step
		m, err := bus.Event{
			ID: exec + ".wait.matched." + step, Source: r.cfg.Source, Type: events.TypeWaitEnded,
			Meta: bus.Meta{CorrelationID: ow.rec.CorrelationID, ExecutionID: exec, CausationID: e.ID},
			Data: events.WaitEnded{ExecutionID: exec, StepID: step, Answer: events.Answer{
				Approved: true, By: "event", Reason: "matched " + e.Type + " " + e.ID + " from " + e.Source, Data: data}, EventType: e.Type},
		}.Msg(r.cfg.Bus.Subjects.Event(exec, events.TypeWaitEnded))
		if err != nil {
			return err
		}
		if b == nil {
			b = r.cfg.Bus.Batch()
		}
		b.Publish(m)
		ended = append(ended, [2]string{exec, exec + ".wait.matched." + step})
		r.cfg.Log.Info("router: event matched a waiting execution", "execution", exec, "step", step, "event", e.ID)
	}
	if b == nil {
		return nil
	}
	if err := b.Wait(ctx); err != nil {
		return err
	}
	// The waits this trigger ended: not one another event of the type ended just
	// before (its wait.ended stored already, this one dropped as its duplicate) —
	// unless this is a redelivery of the trigger, whose first delivery stored it.
	again := t.fromStream && t.delivery.NumDelivered > 1
	for _, x := range ended {
		if again || !b.Duplicate(x[1]) {
			t.endedWaits = append(t.endedWaits, x[0])
		}
	}
	return nil
}

// eventData is an event's data as a step's result: the JSON as it is, other
// data as a JSON string.
func eventData(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(raw) {
		return raw
	}
	s, _ := json.Marshal(string(raw))
	return s
}

// endWait removes what a resumed wait left: its record, and its timeout when an
// event ended it.
func (r *Router) endWait(ctx context.Context, executionID, step string, timedOut bool) {
	if err := r.runs.Delete(ctx, events.RunWaitKey(executionID)); err != nil {
		r.cfg.Log.Warn("router: could not remove the wait record", "execution", executionID, "err", err)
	}
	if timedOut {
		return
	}
	if err := r.events.Purge(ctx, jetstream.WithPurgeSubject(r.cfg.Bus.Subjects.WaitTimer(executionID, step))); err != nil {
		r.cfg.Log.Warn("router: could not cancel the wait's timeout", "execution", executionID, "err", err)
	}
}

// dropWait removes the wait record an execution no longer paused left at step,
// so that no router keeps matching triggers for it, and its timeout. The record is read first:
// a wait.ended for a run that ended normally finds none, and a record of
// another step is a later wait of the run.
func (r *Router) dropWait(ctx context.Context, executionID, step string) {
	e, err := r.runs.Get(ctx, events.RunWaitKey(executionID))
	if err != nil {
		return
	}
	var w run.Wait
	if json.Unmarshal(e.Value(), &w) == nil && w.Step != step {
		return
	}
	if err := r.runs.Delete(ctx, e.Key(), jetstream.LastRevision(e.Revision())); err != nil {
		r.cfg.Log.Warn("router: could not remove the wait record of a run no longer waiting", "execution", executionID, "err", err)
		return
	}
	// And its timeout, which a cancel that could not remove the record left too.
	if err := r.events.Purge(ctx, jetstream.WithPurgeSubject(r.cfg.Bus.Subjects.WaitTimer(executionID, step))); err != nil {
		r.cfg.Log.Warn("router: could not remove the timeout of a run no longer waiting", "execution", executionID, "err", err)
	}
	r.cfg.Log.Info("router: removed the wait record of a run no longer waiting", "execution", executionID, "step", step)
}
