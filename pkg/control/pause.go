package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// Pause pauses a skill across the fleet: from the moment every worker has seen
// the record (a moment after it is written), its jobs are held instead of run —
// kept whole in KV runs, holding no worker — until Resume. Runs already under way
// go on. It reports whether the skill was running until now (false: it was paused
// already; the first pause's who and why stand).
//
// The hold and the jobs it holds are the only record of them (the jobs were
// acked), so they are written to KV runs exempt from its 7-day expiry (PutKept): a
// pause lasts until Resume, however long that is.
func (c *Controller) Pause(ctx context.Context, skillName string, r Request) (bool, error) {
	if err := r.check(); err != nil {
		return false, err
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return false, err
	}
	key := events.SkillHoldKey(skillName)
	rec, _ := json.Marshal(run.Hold{Skill: skillName, By: r.By, Reason: r.Reason, At: time.Now().UTC()})
	for range 3 { // a write between the read and ours: read again
		last, live, err := lastRevision(ctx, c.runs, key)
		if err != nil {
			return false, fmt.Errorf("pause %s: %w", skillName, err)
		}
		if live {
			return false, nil
		}
		_, err = PutKept(ctx, c.b, key, rec, jetstream.WithExpectLastSequencePerSubject(last))
		if err == nil {
			return true, nil
		}
		if !wrongLastSequence(err) {
			return false, fmt.Errorf("pause %s: %w", skillName, err)
		}
	}
	return false, fmt.Errorf("pause %s: its record keeps changing", skillName)
}

func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// PutKept writes key in KV runs so that the bucket's TTL never expires it: only
// a delete or a purge removes it. It returns the key's new revision. KV runs
// allows per-key TTLs (bus.Buckets); on one an earlier version made, not updated
// yet, the key is written as before, to expire with the bucket's TTL.
func PutKept(ctx context.Context, b *bus.Bus, key string, value []byte, opts ...jetstream.PublishOpt) (uint64, error) {
	m := &nats.Msg{Subject: "$KV." + b.BucketRuns() + "." + key, Data: value, Header: nats.Header{}}
	m.Header.Set(jetstream.MsgTTLHeader, "never")
	ack, err := b.Publish(ctx, m, opts...)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errTTLDisabled {
		m.Header.Del(jetstream.MsgTTLHeader)
		ack, err = b.Publish(ctx, m, opts...)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// errTTLDisabled is JetStream's "per-message TTL is disabled".
const errTTLDisabled jetstream.ErrorCode = 10166

// lastRevision is the revision of key's last write, delete included (0: none),
// and whether that write is a value.
func lastRevision(ctx context.Context, kv jetstream.KeyValue, key string) (uint64, bool, error) {
	h, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	e := h[len(h)-1]
	return e.Revision(), e.Operation() == jetstream.KeyValuePut, nil
}

// Resume resumes a paused skill: its held jobs are published again, oldest first,
// and new ones run. It returns how many held jobs it released (none, and false,
// for a skill that was not paused and holds nothing).
func (c *Controller) Resume(ctx context.Context, skillName string, r Request) (released int, wasPaused bool, err error) {
	if err := r.check(); err != nil {
		return 0, false, err
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return 0, false, err
	}
	key := events.SkillHoldKey(skillName)
	if _, err := c.runs.Get(ctx, key); err == nil {
		wasPaused = true
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, false, err
	}
	// The hold goes first, the held jobs after: a worker that holds a job after
	// this point sees the skill resumed and runs it itself (package worker).
	if err := c.runs.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, wasPaused, fmt.Errorf("resume %s: %w", skillName, err)
	}
	held, err := c.held(ctx, skillName)
	if err != nil {
		return 0, wasPaused, err
	}
	for _, h := range held {
		var job events.Job
		if err := json.Unmarshal(h.rec.Job, &job); err != nil {
			return released, wasPaused, fmt.Errorf("held job %s: %w", h.rec.ExecutionID, err)
		}
		id := h.rec.ExecutionID + ".job.resumed." + strconv.FormatUint(h.rev, 10)
		if err := c.release(ctx, job, h.rec.Meta, events.StageResumed, id, r.Source, ""); err != nil {
			return released, wasPaused, err
		}
		// Gone already: a cancel released it, or another resume did.
		_ = c.runs.Delete(ctx, events.RunHeldKey(h.rec.ExecutionID), jetstream.LastRevision(h.rev))
		released++
	}
	return released, wasPaused || released > 0, nil
}

type heldEntry struct {
	rec run.Held
	rev uint64
}

// held lists the jobs held for a skill because it is paused, oldest first.
func (c *Controller) held(ctx context.Context, skillName string) ([]heldEntry, error) {
	lister, err := c.runs.ListKeysFiltered(ctx, events.RunsHeldFilter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []heldEntry
	for k := range lister.Keys() {
		e, err := c.runs.Get(ctx, k)
		if err != nil {
			continue // released meanwhile
		}
		var h run.Held
		// A run waiting for a concurrency slot (Gate set) or for its throttled
		// start time (Until set) is the workers' to release: resuming it would
		// cost its place in line, or start it early.
		if json.Unmarshal(e.Value(), &h) == nil && h.Skill == skillName && h.Gate == "" && h.Until.IsZero() {
			out = append(out, heldEntry{h, e.Revision()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out, nil
}

// Paused returns every paused skill's hold, by skill name, with how many of its
// jobs are held.
func (c *Controller) Paused(ctx context.Context) (map[string]PausedSkill, error) {
	out := map[string]PausedSkill{}
	lister, err := c.runs.ListKeysFiltered(ctx, events.SkillsHoldFilter, events.RunsHeldFilter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var heldKeys []string
	for k := range lister.Keys() {
		if name, ok := events.HeldSkill(k); ok {
			e, err := c.runs.Get(ctx, k)
			if err != nil {
				continue
			}
			var h run.Hold
			if json.Unmarshal(e.Value(), &h) == nil {
				h.Skill = name
				p := out[name]
				p.Hold = h
				out[name] = p
			}
			continue
		}
		heldKeys = append(heldKeys, k)
	}
	for _, k := range heldKeys {
		e, err := c.runs.Get(ctx, k)
		if err != nil {
			continue
		}
		var h run.Held
		if json.Unmarshal(e.Value(), &h) == nil && h.Gate == "" && h.Until.IsZero() {
			if p, ok := out[h.Skill]; ok {
				p.Held++
				out[h.Skill] = p
			}
		}
	}
	return out, nil
}

// PausedSkill is a paused skill's hold and the number of its jobs held.
type PausedSkill struct {
	run.Hold
	Held int `json:"held"`
}
