package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/flow"
)

// A skill's cancel_on rules are kept by the runs they may cancel, not by a
// router. When a router publishes a plan that starts such a skill, it writes
// one key per rule in KV runs (events.RunCancelOnKey: the skill, the rule's
// event type, the execution), holding the run's trigger, with the rule's
// timeout as the key's TTL: the server removes it when no event may cancel the
// run any more. A router that routes an event of a type some rule names lists
// the keys of that skill and type only (a filtered listing of the bucket, never
// a scan of the runs), evaluates the rule's match over the event and each run's
// trigger, and cancels the runs it matches as `skillbus runs cancel` does
// (package control: a cancel record the workers act on), then deletes their
// keys; the worker that records a run's outcome deletes them too (package
// worker), so events do not read the runs that ended. All that happens before
// the event is acked: a router that dies on the way leaves it to be delivered
// again, and cancelling twice is cancelling once.
//
// Routers route triggers in parallel, and a trigger may be routed again after
// a write failed, so the event can be routed before the run's key is written
// (order.created, then order.paid a moment later, routed at once by two
// routers). So the event is kept too, before it lists the runs: a key of its
// own (events.RunCancelEventKey) with the same TTL. A router that writes a
// run's key then reads the events kept for its skill and type, and cancels the
// run by one that matches. Of the two routers, each writes before it reads, so
// at least one of them finds the other's write. An event cancels only runs
// whose triggers came before it in the TRIGGERS stream, whichever was routed
// first; the run of a debounced burst or a batch counts as its last trigger
// (recordOf), so an event sent while it is pending cancels it once it is
// planned (the event is kept for the rule's timeout).

// cancelRule is one of a skill's cancel_on rules, compiled.
type cancelRule struct {
	skill, typ string
	match      *flow.Program // nil: every run the event finds
	timeout    time.Duration
}

// cancelOnRecord is the value of a run's cancel_on key.
type cancelOnRecord struct {
	ExecutionID string        `json:"execution_id"`
	Skill       string        `json:"skill"`
	Trigger     cancelTrigger `json:"trigger"`
}

// cancelTrigger is an event as a cancel_on match reads it: a run's trigger, or
// a cancelling event kept (the value of its events.RunCancelEventKey).
type cancelTrigger struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Source  string          `json:"source"`
	Subject string          `json:"subject,omitempty"`
	Time    string          `json:"time,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Seq is its sequence in the TRIGGERS stream; 0 when unknown.
	Seq uint64 `json:"seq,omitempty"`
}

// cancelIndex is the catalog's cancel_on rules by the event type that cancels.
func cancelIndex(flows map[string]*compiledFlow) map[string][]*cancelRule {
	var out map[string][]*cancelRule
	for _, c := range flows {
		for i := range c.cancels {
			if out == nil {
				out = make(map[string][]*cancelRule)
			}
			r := &c.cancels[i]
			out[r.typ] = append(out[r.typ], r)
		}
	}
	return out
}

// recordOf is a routed trigger as a cancel_on match reads it.
func recordOf(t *trigger) cancelTrigger {
	e := t.e
	ct := cancelTrigger{ID: e.ID, Type: e.Type, Source: e.Source, Subject: e.Subject, Time: e.Time, Seq: t.ref.Seq}
	if t.burstOf != "" && t.burstSeq != 0 {
		// The run of a debounced burst or a batch is published when it is due,
		// after the events sent while it was pending: it stands where its last
		// trigger does, so that an event sent after that trigger cancels it. A
		// burst folded by an older router does not say where: it stands where
		// it is published, as every run did then.
		ct.Seq = t.burstSeq
	}
	if len(e.Data) > 0 && json.Valid(e.Data) {
		ct.Data = json.RawMessage(e.Data)
	} else if s, ok := t.data.(string); ok {
		ct.Data, _ = json.Marshal(s)
	}
	return ct
}

// before reports whether trigger came before event in the TRIGGERS stream (true
// when either's place is unknown): an event cancels only the runs of triggers
// published before it.
func (trigger cancelTrigger) before(event cancelTrigger) bool {
	return trigger.Seq == 0 || event.Seq == 0 || trigger.Seq < event.Seq
}

// runToken is the key token a rule files a run under: the token of the value
// its match compares, or flow.UnindexedToken for a match that compares none.
// ok is false when the match cannot be true of the trigger.
func (c *cancelRule) runToken(trigger *flow.Event) (string, bool) {
	if c.match == nil || c.match.Index() == nil {
		return flow.UnindexedToken, true
	}
	return c.match.Index().TriggerToken(trigger)
}

// eventToken is runToken for the event that cancels.
func (c *cancelRule) eventToken(event *flow.Event) (string, bool) {
	if c.match == nil || c.match.Index() == nil {
		return flow.UnindexedToken, true
	}
	return c.match.Index().EventToken(event)
}

// indexCancels writes the cancel_on keys of the runs a routed trigger starts,
// then cancels those that an event kept before finds. It returns the executions
// it wrote keys for: an event routed before their jobs are published may cancel
// them (events.HeaderCheckCancel).
func (r *Router) indexCancels(ctx context.Context, t *trigger, o *routed) (indexed []string, _ error) {
	f := r.flows.Load()
	if f == nil {
		return nil, nil
	}
	if c := r.cancels.Load(); c == nil || len(*c) == 0 {
		return nil, nil // no skill has cancel_on: no lookup per job
	}
	var trig *cancelTrigger
	for i := range o.jobs() {
		sr := o.jobs()[i].job.Skill
		c := (*f)[sr.Name]
		if c == nil || len(c.cancels) == 0 {
			continue
		}
		if trig == nil {
			ct := recordOf(t)
			trig = &ct
		}
		rec := cancelOnRecord{ExecutionID: sr.ExecutionID, Skill: sr.Name, Trigger: *trig}
		val, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		for i := range c.cancels {
			rule := &c.cancels[i]
			tok, ok := rule.runToken(t.event())
			if !ok {
				continue // the match fails on this trigger: no event cancels it
			}
			if err := r.fault("cancelon.index"); err != nil {
				return nil, err
			}
			key := events.RunCancelOnKey(sr.Name, rule.typ, tok, sr.ExecutionID)
			_, err := r.runs.Create(ctx, key, val, jetstream.KeyTTL(rule.timeout))
			if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return nil, fmt.Errorf("indexing %s for cancel_on %s: %w", sr.ExecutionID, rule.typ, err)
			}
			if len(indexed) == 0 || indexed[len(indexed)-1] != sr.ExecutionID {
				indexed = append(indexed, sr.ExecutionID)
			}
			if done, err := r.cancelByKept(ctx, rule, tok, key, &rec); err != nil {
				return nil, fmt.Errorf("cancel_on %s of %s: %w", rule.typ, rule.skill, err)
			} else if done {
				break
			}
		}
	}
	return indexed, nil
}

// cancelByKept cancels a run just indexed under key if an event kept for its
// rule matches it; done says it did.
func (r *Router) cancelByKept(ctx context.Context, rule *cancelRule, tok, key string, rec *cancelOnRecord) (done bool, _ error) {
	kept, err := r.cancelEntries(ctx, events.RunsCancelEventFilter(rule.skill, rule.typ, tok))
	if err != nil {
		return false, err
	}
	for _, e := range kept {
		var ev cancelTrigger
		if err := json.Unmarshal(e.Value(), &ev); err != nil {
			r.cfg.Log.Warn("router: an unreadable cancel_on event; dropped", "key", e.Key(), "err", err)
			_ = r.runs.Delete(ctx, e.Key())
			continue
		}
		if !rec.Trigger.before(ev) || !r.cancelMatches(rule, ev, rec) {
			continue
		}
		_, err := r.cancelRun(ctx, rule, rec, ev, key)
		return true, err
	}
	return false, nil
}

// cancelMatching cancels the runs a trigger cancels by their skills' cancel_on.
func (r *Router) cancelMatching(ctx context.Context, t *trigger) error {
	idx := r.cancels.Load()
	if idx == nil || t.e == nil || t.burstOf != "" {
		return nil
	}
	rules := (*idx)[t.e.Type]
	if len(rules) == 0 {
		return nil
	}
	ev := recordOf(t)
	for _, rule := range rules {
		if err := r.cancelBy(ctx, t, ev, rule); err != nil {
			return fmt.Errorf("cancel_on %s of %s: %w", rule.typ, rule.skill, err)
		}
	}
	return nil
}

func (r *Router) cancelBy(ctx context.Context, t *trigger, ev cancelTrigger, rule *cancelRule) error {
	tok, ok := rule.eventToken(t.event())
	if !ok {
		return nil // the match fails on this event: it cancels nothing
	}
	// Kept first, for the runs whose keys are written after the listing below.
	val, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := r.runs.Create(ctx, events.RunCancelEventKey(rule.skill, rule.typ, tok, t.actID), val, jetstream.KeyTTL(rule.timeout)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("keeping the event: %w", err)
	}
	runs, err := r.cancelEntries(ctx, events.RunsCancelOnFilter(rule.skill, rule.typ, tok))
	if err != nil {
		return err
	}
	for _, e := range runs {
		var rec cancelOnRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.ExecutionID == "" {
			r.cfg.Log.Warn("router: an unreadable cancel_on record; dropped", "key", e.Key(), "err", err)
			_ = r.runs.Delete(ctx, e.Key())
			continue
		}
		if !rec.Trigger.before(ev) || !r.cancelMatches(rule, ev, &rec) {
			continue
		}
		cancelled, err := r.cancelRun(ctx, rule, &rec, ev, e.Key())
		if err != nil {
			return err
		}
		if cancelled {
			t.cancelled = append(t.cancelled, rec.ExecutionID)
		}
	}
	return nil
}

// cancelEntries reads the keys of KV runs that filter matches, with their values.
func (r *Router) cancelEntries(ctx context.Context, filter string) ([]jetstream.KeyValueEntry, error) {
	w, err := r.runs.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, ctx.Err()
			}
			if e == nil { // every key read
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// cancelMatches evaluates a rule's match over an event and a run's trigger.
func (r *Router) cancelMatches(rule *cancelRule, ev cancelTrigger, rec *cancelOnRecord) bool {
	if rule.match == nil {
		return true
	}
	ok, err := rule.match.MatchPair(ev.event(), rec.Trigger.event())
	if err != nil {
		r.cfg.Log.Debug("router: cancel_on match failed; not cancelled", "skill", rule.skill, "execution", rec.ExecutionID, "err", err)
	}
	return ok
}

// cancelRun cancels the run of rec by the event ev, and deletes its key. cancelled
// says the run had not ended (nor been cancelled before): this cancel stops it.
func (r *Router) cancelRun(ctx context.Context, rule *cancelRule, rec *cancelOnRecord, ev cancelTrigger, key string) (cancelled bool, _ error) {
	reason := fmt.Sprintf("cancel_on %s: event %s from %s", rule.typ, ev.ID, ev.Source)
	if rule.match != nil {
		reason += " matched " + rule.match.String()
	}
	res, err := r.control.CancelKnown(ctx, rec.ExecutionID, control.Request{By: "cancel_on", Reason: reason, Source: r.cfg.Source})
	if err != nil && !errors.Is(err, control.ErrNoExecution) {
		return false, err
	}
	r.cfg.Log.Info("router: run cancelled by an event", "skill", rule.skill, "execution", rec.ExecutionID, "state", res.State,
		"by", events.ActivationID(ev.Source, ev.ID))
	cancelled = err == nil && res.State != control.StateEnded && !res.Again
	return cancelled, r.runs.Delete(ctx, key)
}

func (ct cancelTrigger) event() *flow.Event {
	var data any
	if len(ct.Data) > 0 {
		_ = events.DecodeValue(ct.Data, &data)
	}
	return &flow.Event{ID: ct.ID, Type: ct.Type, Source: ct.Source, Subject: ct.Subject, Time: ct.Time, Data: data}
}
