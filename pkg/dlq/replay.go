package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// ReplayOptions tune a replay. The zero value replays an entry for the first time,
// on the skill's current catalog version.
type ReplayOptions struct {
	// By names who asks for the replay, for the record; default "unknown".
	By string
	// Pin runs the version of the skill that died instead of the catalog's current
	// one (it must still be kept: see docs/registry.md).
	Pin bool
	// Again replays an entry that was replayed before once more, as its next replay.
	// Without it, replaying an entry that was replayed returns the first replay and
	// publishes nothing.
	Again bool
}

// Replayed is what Replay did.
type Replayed struct {
	events.DLQReplayed
	// Existing is set when the replay had been published before (the same replay
	// asked for again): nothing was published this time.
	Existing bool `json:"existing"`
}

// Replay publishes the entry id names (its id, DLQ sequence or an id prefix) again as
// a new attempt and records that it did. A job entry becomes a new execution of its
// skill with the same inputs, trigger and activation; a trigger entry becomes a new
// trigger (a new CloudEvents id), routed afresh.
func (q *Queue) Replay(ctx context.Context, id string, opt ReplayOptions) (*Replayed, error) {
	if opt.By == "" {
		opt.By = "unknown"
	}
	e, err := q.find(ctx, id)
	if err != nil {
		return nil, err
	}
	var prev []Replay
	if opt.Again {
		all, err := q.replays(ctx)
		if err != nil {
			return nil, err
		}
		prev = all[e.ID]
	}
	return q.replay(ctx, e, len(prev)+1, opt)
}

// Result is the replay of one of the entries ReplayAll selected.
type Result struct {
	EntryID string `json:"entry_id"`
	// Replayed is what was published, or found published before; nil on error.
	Replayed *Replayed `json:"replayed,omitempty"`
	// Error says why the entry was not replayed.
	Error string `json:"error,omitempty"`
}

// ReplayAll replays every entry f selects (f.Limit bounds each page read, not the
// total), oldest first. An entry that cannot be replayed is reported in its Result
// and the rest go on; the error is for the queue as a whole (it could not be read).
//
// Only entries already in the queue when it starts are replayed: a replay that dies
// again while it runs is a new entry, left for the next call, so a skill that is
// still broken cannot keep it going.
func (q *Queue) ReplayAll(ctx context.Context, f Filter, opt ReplayOptions) ([]Result, error) {
	if opt.By == "" {
		opt.By = "unknown"
	}
	st, err := q.b.Stream(ctx, q.b.StreamDead())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("dlq: %w %s: is skillbus running on this server (and with this --prefix)?", ErrNoStream, q.b.StreamDead())
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", q.b.StreamDead(), err)
	}
	last := st.CachedInfo().State.LastSeq
	out := []Result{}
	for {
		page, err := q.List(ctx, f)
		if err != nil {
			return out, err
		}
		for _, e := range page.Entries {
			if e.Seq > last {
				return out, nil
			}
			n := 1
			if opt.Again {
				n = len(e.Replays) + 1
			}
			r, err := q.replay(ctx, e, n, opt)
			res := Result{EntryID: e.ID, Replayed: r}
			if err != nil {
				res.Error = err.Error()
			}
			out = append(out, res)
		}
		if page.Next == 0 {
			return out, nil
		}
		f.After = page.Next
	}
}

// replay publishes replay number n of e.
func (q *Queue) replay(ctx context.Context, e *Entry, n int, opt ReplayOptions) (*Replayed, error) {
	if e.Kind == KindUnreadable {
		return nil, fmt.Errorf("dlq: %s: %w: it is a message no worker could read (%s); fix its publisher and publish it again", e.ID, ErrNotReplayable, e.Reason)
	}
	if e.Kind == KindTrigger {
		return q.replayTrigger(ctx, e, n, opt)
	}
	return q.replayJob(ctx, e, n, opt)
}

// ReplayExecutionID is the execution id of replay number n of the job entry whose id
// is entryID, for skill: deterministic, so the same replay asked for twice names the
// same execution.
func ReplayExecutionID(entryID string, n int, skillName string) string {
	return events.ExecutionID("skillbus:dlq/"+entryID, "replay-"+strconv.Itoa(n), skillName)
}

func (q *Queue) replayJob(ctx context.Context, e *Entry, n int, opt ReplayOptions) (*Replayed, error) {
	dl := e.job
	execID := ReplayExecutionID(e.ID, n, dl.Job.Skill.Name)
	if prev, err := q.existing(ctx, execID); prev != nil || err != nil {
		return prev, err
	}
	ref, err := q.target(ctx, dl.Job.Skill, opt.Pin)
	if err != nil {
		return nil, err
	}
	ref.ExecutionID = execID
	job := dl.Job
	job.ExecutionID, job.Skill = execID, ref
	job.History = append(append([]events.Attempt(nil), dl.Job.History...), events.Attempt{
		Skill: dl.Job.Skill.Name, ExecutionID: dl.Job.ExecutionID, Class: dl.Class, Error: dl.Reason, Deliveries: dl.Deliveries,
	})
	// A new attempt asks its confirmations again, nobody follows it live, and a
	// repair the dead execution waited for is not its: it runs (and may be
	// repaired) afresh.
	job.Answers, job.Live, job.Repair = nil, false, nil
	rec := events.DLQReplayed{
		EntryID: e.ID, EntrySeq: e.Seq, Replay: n, Skill: ref.Name, ExecutionID: execID, ActivationID: job.ActivationID,
		Version: ref.Version, Digest: ref.Digest, Pinned: opt.Pin, Subject: q.b.Subjects.Exec(ref.LanePool(), ref.Name, job.ActivationID, events.StageReplay(execID)),
		By: opt.By, At: time.Now().UTC(),
	}
	recID := execID + "." + events.Kind(events.TypeDLQReplayed)
	meta := bus.Meta{CorrelationID: job.ActivationID, CausationID: recID, ExecutionID: execID}
	b := q.b.Batch()
	// An outcome means the job was published and ran, and only the record is missing
	// (a replay interrupted between the two, retried after the duplicate window).
	if st, err := q.b.Stream(ctx, q.b.StreamEvents()); err == nil {
		if done, _ := q.outcome(ctx, st, execID); done == nil {
			// A new trace, linked to the dead execution's (the dead letter's).
			jm := meta
			jm.TraceParent, jm.TraceState = e.trace.TraceParent, e.trace.TraceState
			_, span, link := telemetry.StartPublishLinkedMeta(ctx, telemetry.Message{Destination: rec.Subject, Template: q.b.Subjects.JobTemplate(), ID: execID + ".job"},
				&jm.TraceParent, &jm.TraceState, telemetry.LinkReplay, telemetry.AttrExecutionID.String(execID), telemetry.AttrSkillName.String(ref.Name))
			defer span.End()
			m, err := bus.Event{ID: execID + ".job", Source: q.source, Type: events.TypeJob, Meta: jm, Data: job}.JobMsg(rec.Subject)
			if err != nil {
				return nil, fmt.Errorf("dlq: replay %s: %w", e.ID, err)
			}
			if link != "" {
				m.Header.Set(events.HeaderLink, link)
			}
			b.Publish(m)
		}
	} else {
		return nil, fmt.Errorf("dlq: %s: %w", q.b.StreamEvents(), err)
	}
	q.record(b, execID, rec, meta)
	return q.finish(ctx, b, e, execID, rec)
}

// finish waits for a replay's publishes. When its record turns out to be a
// duplicate, someone else published the same replay a moment earlier: theirs is
// returned, as Existing. The record is written twice, to the DLQ and to EVENTS,
// under one message id, and two replays racing may each win one of the two: which
// replay was first is what the DLQ's copy says (its time and who asked).
func (q *Queue) finish(ctx context.Context, b *bus.Batch, e *Entry, id string, rec events.DLQReplayed) (*Replayed, error) {
	if err := b.Wait(ctx); err != nil {
		return nil, fmt.Errorf("dlq: replay %s: %w", e.ID, err)
	}
	if b.Duplicate(id + "." + events.Kind(events.TypeDLQReplayed)) {
		prev, err := q.existing(ctx, id)
		if err != nil {
			return nil, err
		}
		if prev != nil && !(prev.At.Equal(rec.At) && prev.By == rec.By) {
			return prev, nil
		}
	}
	return &Replayed{DLQReplayed: rec}, nil
}

// target is the skill version a replayed job runs: the catalog's current one, or
// with pin the dead job's own, which the catalog must still keep.
func (q *Queue) target(ctx context.Context, dead events.SkillRef, pin bool) (events.SkillRef, error) {
	kv, err := q.b.KV(ctx, q.b.BucketSkills())
	if err != nil {
		return events.SkillRef{}, fmt.Errorf("dlq: %w", err)
	}
	key := dead.Name
	if pin && dead.Digest != "" {
		key = catalog.VersionKey(dead.Name, dead.Digest)
	}
	var s skill.Skill
	kve, err := kv.Get(ctx, key)
	if err == nil {
		err = json.Unmarshal(kve.Value(), &s)
	}
	if pin && dead.Digest != "" && errors.Is(err, jetstream.ErrKeyNotFound) {
		// A skill published before versions were kept has only its current key.
		if cur, cerr := kv.Get(ctx, dead.Name); cerr == nil && json.Unmarshal(cur.Value(), &s) == nil && s.Digest == dead.Digest {
			err = nil
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		if pin {
			return events.SkillRef{}, fmt.Errorf("dlq: skill %q version %s: %w: the registry no longer keeps it; replay without --pin to run the current version", dead.Name, dead.Version, ErrSkillNotFound)
		}
		return events.SkillRef{}, fmt.Errorf("dlq: skill %q: %w: publish it again, then replay", dead.Name, ErrSkillNotFound)
	case err != nil:
		return events.SkillRef{}, fmt.Errorf("dlq: read skill %q from the catalog: %w", dead.Name, err)
	}
	// The replay keeps the dead run's queue priority (and so its lane), while
	// the version it runs has a queue_priority.
	if pin {
		return events.SkillRef{Name: dead.Name, Version: dead.Version, Digest: dead.Digest, Pool: dead.Pool, QueuePriority: dead.QueuePriority}, nil
	}
	v := s.Version
	if v == "" && len(s.Digest) > 12 {
		v = s.Digest[:12]
	}
	ref := events.SkillRef{Name: s.Name, Version: v, Digest: s.Digest, Pool: s.PoolName()}
	if s.QueuePriority != "" {
		ref.QueuePriority = dead.QueuePriority
	}
	return ref, nil
}

func (q *Queue) replayTrigger(ctx context.Context, e *Entry, n int, opt ReplayOptions) (*Replayed, error) {
	h, data := e.header, e.payload
	if len(data) == 0 && e.Trigger.Seq > 0 && e.Class == events.UnmatchedTooLarge {
		// Kept out of the DLQ for its size; the trigger is still in TRIGGERS for a while.
		m, err := q.b.Stream(ctx, q.b.StreamTriggers())
		var raw *jetstream.RawStreamMsg
		if err == nil {
			raw, err = m.GetMsg(ctx, e.Trigger.Seq)
		}
		if err != nil {
			return nil, fmt.Errorf("dlq: %s: the trigger was too large to keep in the DLQ, and %s no longer has it (sequence %d): %w", e.ID, q.b.StreamTriggers(), e.Trigger.Seq, err)
		}
		data = raw.Data
	}
	if e.Class == events.UnmatchedReservedSource {
		return nil, fmt.Errorf("dlq: %s: %w: a sender's trigger from one of skillbus's own sources (%s), which routers take only from skillbus itself; published again it would be rejected again", e.ID, ErrNotReplayable, e.Trigger.Source)
	}
	subject := e.Trigger.Subject
	if subject == "" {
		return nil, fmt.Errorf("dlq: %s: %w: the dead letter does not say which subject the trigger came on", e.ID, ErrNotReplayable)
	}
	oldID := e.Trigger.ID
	if oldID == "" {
		oldID = "dlq." + e.ID
	}
	newID := oldID + ".replay-" + strconv.Itoa(n)
	actID := events.ActivationID(e.Trigger.Source, newID)
	if prev, err := q.existing(ctx, actID); prev != nil || err != nil {
		return prev, err
	}
	m := nats.NewMsg(subject)
	for k, v := range h {
		if k == bus.HeaderMsgID || strings.HasPrefix(k, "Skillbus-") || strings.HasPrefix(k, "Nats-") {
			continue
		}
		m.Header[k] = v
	}
	m.Data = data
	if m.Header.Get(events.HeaderCESpecVersion) != "" {
		m.Header.Set(events.HeaderCEID, h.Get(events.HeaderCEID)+".replay-"+strconv.Itoa(n))
		if h.Get(events.HeaderCEID) == "" {
			m.Header.Set(events.HeaderCEID, newID)
		}
	} else if s, err := withID(data, newID); err == nil {
		m.Data = s // structured mode: the id is in the payload
	}
	m.Header.Set(bus.HeaderMsgID, newID)
	// A new trace, linked to the rejected trigger's.
	_, span := bustrace.StartPublishLinked(ctx, m, "", telemetry.LinkReplay, telemetry.AttrActivationID.String(actID))
	defer span.End()
	rec := events.DLQReplayed{
		EntryID: e.ID, EntrySeq: e.Seq, Replay: n, ActivationID: actID, TriggerID: newID, Subject: subject,
		By: opt.By, At: time.Now().UTC(),
	}
	b := q.b.Batch()
	b.Publish(m)
	q.record(b, actID, rec, bus.Meta{CorrelationID: actID, CausationID: newID})
	return q.finish(ctx, b, e, actID, rec)
}

// withID returns a structured-mode event's JSON with its id replaced.
func withID(data []byte, id string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(id)
	obj["id"] = b
	return json.Marshal(obj)
}

// record queues the replay's record: in the DLQ beside the entries, and on the
// events of the execution (or activation) it created.
func (q *Queue) record(b *bus.Batch, id string, rec events.DLQReplayed, meta bus.Meta) {
	ev := bus.Event{ID: id + "." + events.Kind(events.TypeDLQReplayed), Source: q.source, Type: events.TypeDLQReplayed, Meta: meta, Data: rec}
	b.PublishEvent(q.replayedSubject(id), ev)
	b.PublishEvent(q.b.Subjects.Event(id, events.TypeDLQReplayed), ev)
}

// existing returns the replay that created id, if it was recorded.
func (q *Queue) existing(ctx context.Context, id string) (*Replayed, error) {
	st, err := q.b.Stream(ctx, q.b.StreamDead())
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", q.b.StreamDead(), err)
	}
	m, err := st.GetLastMsgForSubject(ctx, q.replayedSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", q.b.StreamDead(), err)
	}
	r, err := decodeReplayed(m.Header, m.Data)
	if err != nil {
		return nil, fmt.Errorf("dlq: replay record %s: %w", id, err)
	}
	return &Replayed{DLQReplayed: *r, Existing: true}, nil
}

// decodeReplayed reads a replay record.
func decodeReplayed(h nats.Header, data []byte) (*events.DLQReplayed, error) {
	ev, err := bus.Decode(bus.MsgOf("", h, data))
	if err != nil {
		return nil, err
	}
	if ev.Type() != events.TypeDLQReplayed {
		return nil, fmt.Errorf("type %s, want %s", ev.Type(), events.TypeDLQReplayed)
	}
	var r events.DLQReplayed
	if err := json.Unmarshal(ev.Data(), &r); err != nil {
		return nil, err
	}
	return &r, nil
}
