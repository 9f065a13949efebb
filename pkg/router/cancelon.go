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
// keys. All that happens before the event is acked: a router that dies on the
// way leaves it to be delivered again, and cancelling twice is cancelling once.

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

type cancelTrigger struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Source  string          `json:"source"`
	Subject string          `json:"subject,omitempty"`
	Time    string          `json:"time,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
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

// indexCancels writes the cancel_on keys of the runs a routed trigger starts.
func (r *Router) indexCancels(ctx context.Context, t *trigger, o *routed) error {
	f := r.flows.Load()
	if f == nil {
		return nil
	}
	var rec []byte
	for i := range o.jobs {
		sr := o.jobs[i].job.Skill
		c := (*f)[sr.Name]
		if c == nil || len(c.cancels) == 0 {
			continue
		}
		if rec == nil {
			e := t.e
			ct := cancelTrigger{ID: e.ID, Type: e.Type, Source: e.Source, Subject: e.Subject, Time: e.Time}
			if len(e.Data) > 0 && json.Valid(e.Data) {
				ct.Data = json.RawMessage(e.Data)
			} else if s, ok := t.data.(string); ok {
				ct.Data, _ = json.Marshal(s)
			}
			var err error
			if rec, err = json.Marshal(cancelOnRecord{ExecutionID: sr.ExecutionID, Skill: sr.Name, Trigger: ct}); err != nil {
				return err
			}
		}
		for _, rule := range c.cancels {
			_, err := r.runs.Create(ctx, events.RunCancelOnKey(sr.Name, rule.typ, sr.ExecutionID), rec, jetstream.KeyTTL(rule.timeout))
			if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return fmt.Errorf("indexing %s for cancel_on %s: %w", sr.ExecutionID, rule.typ, err)
			}
		}
		rec = nil
	}
	return nil
}

// cancelMatching cancels the runs a trigger cancels by their skills' cancel_on.
func (r *Router) cancelMatching(ctx context.Context, t *trigger) error {
	idx := r.cancels.Load()
	if idx == nil || t.e == nil || t.burstOf != "" {
		return nil
	}
	rules := (*idx)[t.e.Type]
	for _, rule := range rules {
		if err := r.cancelBy(ctx, t, rule); err != nil {
			return fmt.Errorf("cancel_on %s of %s: %w", rule.typ, rule.skill, err)
		}
	}
	return nil
}

func (r *Router) cancelBy(ctx context.Context, t *trigger, rule *cancelRule) error {
	lister, err := r.runs.ListKeysFiltered(ctx, events.RunsCancelOnFilter(rule.skill, rule.typ))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop() // stopped already when its keys are all read
	for _, key := range keys {
		e, err := r.runs.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired or cancelled meanwhile
		}
		if err != nil {
			return err
		}
		var rec cancelOnRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.ExecutionID == "" {
			r.cfg.Log.Warn("router: an unreadable cancel_on record; dropped", "key", key, "err", err)
			_ = r.runs.Delete(ctx, key)
			continue
		}
		if rule.match != nil {
			ok, err := rule.match.MatchPair(t.event(), rec.Trigger.event())
			if err != nil {
				r.cfg.Log.Debug("router: cancel_on match failed; not cancelled", "skill", rule.skill, "execution", rec.ExecutionID, "err", err)
			}
			if !ok {
				continue
			}
		}
		reason := fmt.Sprintf("cancel_on %s: event %s from %s", rule.typ, t.e.ID, t.e.Source)
		if rule.match != nil {
			reason += " matched " + rule.match.String()
		}
		res, err := r.control.CancelKnown(ctx, rec.ExecutionID, control.Request{By: "cancel_on", Reason: reason, Source: r.cfg.Source})
		if err != nil && !errors.Is(err, control.ErrNoExecution) {
			return err
		}
		r.cfg.Log.Info("router: run cancelled by an event", "skill", rule.skill, "execution", rec.ExecutionID, "state", res.State, "by", t.actID)
		if err := r.runs.Delete(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (ct cancelTrigger) event() *flow.Event {
	var data any
	if len(ct.Data) > 0 {
		_ = events.DecodeValue(ct.Data, &data)
	}
	return &flow.Event{ID: ct.ID, Type: ct.Type, Source: ct.Source, Subject: ct.Subject, Time: ct.Time, Data: data}
}
