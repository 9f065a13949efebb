package router

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A batch is held by the server, not by a router. Each value of a batched
// skill's key has a log in the EVENTS stream (Subjects.BatchItems, under an id
// that hashes the skill and the value), in which every trigger added is one
// message, and each batch is a run of them: a trigger numbered 1 opens a batch,
// the next ones count on (HeaderBatchN), and a batch ends at the trigger that
// fills it (HeaderBatchFull), at a trigger that would not fit in it (it opens
// the next batch, HeaderBatchCloses), or at a marker with no number that its
// timer wrote. Every write to the log is conditional on the last message the
// writer read (the expected last sequence of the subject), so routers taking
// triggers at once append one after another and every trigger lands in exactly
// one batch.
//
// Whoever writes the end of a batch starts its run: the router that adds the
// trigger that fills it (or that opens the next), and, when the timeout comes
// first, whichever router takes the timer's message (durable
// <durable>-debounce): it writes the end marker, if the batch is still open,
// then starts the run. A trigger opening a batch arms the timer: a scheduled
// message on Subjects.BatchTimer, due the timeout after it. The run is an
// explicit invocation of the skill on its TriggerDebounced subject, which only
// routers may publish, from source DebounceSource(skill) with an id naming the
// batch, data {"events": [...]}: published again (a router died before acking
// what caused it, the timer came after the batch filled), it is the same run,
// started once. A router that dies between any two writes leaves its trigger
// unacked; delivered again, the trigger's append is a duplicate of the first
// (Nats-Msg-Id, within the stream's duplicate window; after it, found in the log
// by its Skillbus-Batch-Seq: findBatchItem), and what followed it —
// the timer, the run — is done again from what the log holds.

// batchID names a batched skill's log for one value of its key.
func batchID(name, key string) string {
	sum := sha256.Sum256([]byte("batch\x00" + name + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

type batchSubjects struct{ id, items, timer, fired string }

func (r *Router) batchSubjects(id string) batchSubjects {
	sub := r.cfg.Bus.Subjects
	return batchSubjects{id: id, items: sub.BatchItems(id), timer: sub.BatchTimer(id), fired: sub.BatchFired(id)}
}

// batchHeadroom is what a batch's run needs beside its events, at most: its
// headers, the {"events": [...]} around them and, in its jobs, the plan.
const batchHeadroom = 8 << 10

// batchBytes bounds the events of one batch: a run larger than a trigger may be
// (MaxEventBytes) or than a job may be (the server's max payload) would be
// rejected, so a trigger that would take a batch past it starts the next batch.
func (r *Router) batchBytes() int {
	limit := r.cfg.MaxEventBytes
	if mp := int(r.cfg.Bus.Conn().MaxPayload()); mp > 0 && mp < limit {
		limit = mp
	}
	return limit - min(batchHeadroom, limit/8)
}

// batchItem is a message of a batch's log, as its headers say.
type batchItem struct {
	seq    uint64
	n      int    // place in the batch, from 1; 0 for a timeout's end marker
	first  uint64 // the batch's first trigger's sequence (seq itself when n is 1)
	bytes  int
	full   bool
	closes uint64
}

func itemOf(seq uint64, h nats.Header) batchItem {
	it := batchItem{seq: seq}
	it.n, _ = strconv.Atoi(h.Get(events.HeaderBatchN))
	it.first, _ = strconv.ParseUint(h.Get(events.HeaderBatchFirst), 10, 64)
	if it.n == 1 || it.first == 0 {
		it.first = seq
	}
	it.bytes, _ = strconv.Atoi(h.Get(events.HeaderBatchBytes))
	it.full = h.Get(events.HeaderBatchFull) != ""
	it.closes, _ = strconv.ParseUint(h.Get(events.HeaderBatchCloses), 10, 64)
	return it
}

// batchEvent is one of a batch's events, with its trigger's sequence.
type batchEvent struct {
	seq  uint64
	data []byte
	// digest is the version of the skill the trigger was added for.
	digest string
}

// batchElement is a trigger as one of a batch's events.
func batchElement(t *trigger) ([]byte, error) {
	e := t.e
	el := struct {
		ID      string          `json:"id"`
		Source  string          `json:"source"`
		Type    string          `json:"type"`
		Subject string          `json:"subject,omitempty"`
		Time    string          `json:"time,omitempty"`
		Data    json.RawMessage `json:"data,omitempty"`
	}{ID: e.ID, Source: e.Source, Type: e.Type, Subject: e.Subject, Time: e.Time}
	if len(e.Data) > 0 {
		if s, ok := t.data.(string); ok && !json.Valid(e.Data) {
			b, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			el.Data = b
		} else {
			el.Data = json.RawMessage(e.Data)
		}
	}
	return json.Marshal(el)
}

// appendBatch adds a trigger to its batch, and does what its place there asks:
// arm the timer of a batch it opens, start the run of one it fills or closes.
func (r *Router) appendBatch(ctx context.Context, t *trigger, name string, f folding) error {
	s := r.batchSubjects(batchID(name, f.key))
	el, err := batchElement(t)
	if err != nil {
		return err
	}
	if t.md() != nil && t.md().NumDelivered > 1 {
		// Delivered again, maybe after the duplicate window: an append this
		// trigger made before is not found by its Nats-Msg-Id any more.
		prev, ok, err := r.findBatchItem(ctx, s, t)
		if err != nil {
			return err
		}
		if ok {
			return r.afterAppend(ctx, s, name, f.bt, prev, r.triggerTime(t))
		}
	}
	limit := r.batchBytes()
	var it batchItem
	for i := 0; ; i++ {
		if i == maxRateRaces {
			return fmt.Errorf("lost %d races for the batch in a row", maxRateRaces)
		}
		it = batchItem{n: 1, bytes: len(el)}
		var prev uint64
		m, err := r.events.GetLastMsgForSubject(ctx, s.items)
		switch {
		case err == nil:
			prev = m.Sequence
			p := itemOf(m.Sequence, m.Header)
			switch {
			case p.n == 0 || p.full:
			case p.bytes+1+len(el) > limit:
				it.closes = p.first
			default:
				it.n, it.first, it.bytes = p.n+1, p.first, p.bytes+1+len(el)
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		it.full = it.n >= f.bt.MaxSize
		msg := nats.NewMsg(s.items)
		msg.Header.Set(events.HeaderBatchSkill, name)
		msg.Header.Set(events.HeaderBatchN, strconv.Itoa(it.n))
		msg.Header.Set(events.HeaderBatchBytes, strconv.Itoa(it.bytes))
		if it.n > 1 {
			msg.Header.Set(events.HeaderBatchFirst, strconv.FormatUint(it.first, 10))
		}
		if it.full {
			msg.Header.Set(events.HeaderBatchFull, "true")
		}
		if it.closes != 0 {
			msg.Header.Set(events.HeaderBatchCloses, strconv.FormatUint(it.closes, 10))
		}
		msg.Header.Set(events.HeaderBatchSeq, strconv.FormatUint(t.ref.Seq, 10))
		if f.digest != "" {
			msg.Header.Set(events.HeaderBurstDigest, f.digest)
		}
		msg.Header.Set(bus.HeaderMsgID, "batch."+s.id+"."+t.actID)
		msg.Data = el
		ack, err := r.cfg.Bus.Publish(ctx, msg, jetstream.WithExpectLastSequencePerSubject(prev))
		if lostRace(err) {
			continue
		}
		if err != nil {
			return err
		}
		if ack.Duplicate {
			// Added before by a delivery that died: go on from what it wrote.
			sm, err := r.events.GetMsg(ctx, ack.Sequence)
			if err != nil {
				return fmt.Errorf("reading the trigger added before: %w", err)
			}
			it = itemOf(sm.Sequence, sm.Header)
		} else {
			it.seq = ack.Sequence
			if it.n == 1 {
				it.first = it.seq
			}
		}
		break
	}
	return r.afterAppend(ctx, s, name, f.bt, it, r.triggerTime(t))
}

// findBatchItem looks in the batch's log, from when the trigger was stored on,
// for the item a delivery of the trigger added before.
func (r *Router) findBatchItem(ctx context.Context, s batchSubjects, t *trigger) (batchItem, bool, error) {
	last, err := r.events.GetLastMsgForSubject(ctx, s.items)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return batchItem{}, false, nil
	case err != nil:
		return batchItem{}, false, fmt.Errorf("reading the batch's log: %w", err)
	case last.Time.Before(t.md().Timestamp):
		return batchItem{}, false, nil
	}
	from := t.md().Timestamp
	c, err := r.cfg.Bus.OrderedConsumer(ctx, r.cfg.Bus.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.items}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from, HeadersOnly: true})
	if err != nil {
		return batchItem{}, false, fmt.Errorf("reading the batch's log: %w", err)
	}
	defer func() {
		_ = r.cfg.Bus.DeleteConsumer(context.WithoutCancel(ctx), r.cfg.Bus.StreamEvents(), c.CachedInfo().Name)
	}()
	want := strconv.FormatUint(t.ref.Seq, 10)
	for {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return batchItem{}, false, fmt.Errorf("reading the batch's log: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return batchItem{}, false, fmt.Errorf("reading the batch's log: %w", err)
		}
		if m.Headers().Get(events.HeaderBatchSeq) == want {
			return itemOf(md.Sequence.Stream, m.Headers()), true, nil
		}
		if md.Sequence.Stream >= last.Sequence {
			return batchItem{}, false, nil
		}
	}
}

// afterAppend arms the timer of a batch the item opens and starts the run of a
// batch it fills or closes.
func (r *Router) afterAppend(ctx context.Context, s batchSubjects, name string, bt *skill.Batch, it batchItem, at time.Time) error {
	if it.closes != 0 {
		if err := r.runBatch(ctx, s, name, it.closes, false); err != nil {
			return err
		}
	}
	if it.n == 1 {
		if err := r.fault("batch.opened"); err != nil {
			return err
		}
		if err := r.armBatchTimer(ctx, s, name, bt, it.first, at); err != nil {
			return err
		}
	}
	if it.full {
		if err := r.fault("batch.full"); err != nil {
			return err
		}
		return r.runBatch(ctx, s, name, it.first, false)
	}
	return nil
}

// fault is a failure a test injects at a point between two writes, as if the
// router died there: nil but in tests.
func (r *Router) fault(point string) error {
	if r.faults == nil {
		return nil
	}
	return r.faults(point)
}

func (r *Router) triggerTime(t *trigger) time.Time {
	if t.md() != nil {
		return t.md().Timestamp // the same on every delivery
	}
	return time.Now()
}

// armBatchTimer schedules the end of the batch opened at first. A timer of a
// later batch is left alone: this one's is then past, or its batch is.
func (r *Router) armBatchTimer(ctx context.Context, s batchSubjects, name string, bt *skill.Batch, first uint64, at time.Time) error {
	due := at.Add(time.Duration(bt.Timeout))
	if due != due.Truncate(time.Second) { // the schedule has whole seconds: never early
		due = due.Truncate(time.Second).Add(time.Second)
	}
	for range maxRateRaces {
		var seq uint64
		m, err := r.events.GetLastMsgForSubject(ctx, s.timer)
		switch {
		case err == nil:
			seq = m.Sequence
			if f, _ := strconv.ParseUint(m.Header.Get(events.HeaderBatchFirst), 10, 64); f >= first {
				return nil
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		tm := nats.NewMsg(s.timer)
		tm.Header.Set(events.HeaderBatchSkill, name)
		tm.Header.Set(events.HeaderBatchFirst, strconv.FormatUint(first, 10))
		_, err = r.cfg.Bus.Publish(ctx, tm, jetstream.WithScheduleAt(due), jetstream.WithScheduleTarget(s.fired),
			jetstream.WithExpectLastSequencePerSubject(seq))
		if lostRace(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("lost %d races for the batch's timer in a row", maxRateRaces)
}

// fireBatch handles a batch's timer: it ends the batch if it is still open and
// starts its run.
func (r *Router) fireBatch(ctx context.Context, msg jetstream.Msg) error {
	h := msg.Headers()
	name := h.Get(events.HeaderBatchSkill)
	first, err := strconv.ParseUint(h.Get(events.HeaderBatchFirst), 10, 64)
	if err != nil || name == "" {
		r.cfg.Log.Error("router: a batch's timer is unreadable; dropped", "subject", msg.Subject(), "err", err)
		return nil
	}
	id, ok := idOf(msg.Subject())
	if !ok {
		return nil
	}
	return r.runBatch(ctx, r.batchSubjects(id), name, first, true)
}

// idOf is the id of a subject <prefix>.events.<id>.<kind>.<part>.
func idOf(subject string) (string, bool) {
	end := len(subject)
	for range 2 {
		i := lastDot(subject[:end])
		if i < 0 {
			return "", false
		}
		end = i
	}
	i := lastDot(subject[:end])
	if i < 0 {
		return "", false
	}
	return subject[i+1 : end], true
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// runBatch starts the run of the batch opened at first. A batch still open is
// ended first when end is set (its timeout); otherwise it is left to whoever
// ends it.
func (r *Router) runBatch(ctx context.Context, s batchSubjects, name string, first uint64, end bool) error {
	for range maxRateRaces {
		els, last, open, err := r.readBatch(ctx, s, first)
		if err != nil || els == nil {
			return err
		}
		if open {
			if !end {
				return nil
			}
			mk := nats.NewMsg(s.items)
			mk.Header.Set(events.HeaderBatchSkill, name)
			mk.Header.Set(events.HeaderBatchFirst, strconv.FormatUint(first, 10))
			mk.Header.Set(bus.HeaderMsgID, "batch."+s.id+".end."+strconv.FormatUint(first, 10))
			_, err := r.cfg.Bus.Publish(ctx, mk, jetstream.WithExpectLastSequencePerSubject(last))
			if lostRace(err) {
				continue // a trigger joined meanwhile: read the batch again
			}
			if err != nil {
				return err
			}
			if err := r.fault("batch.ended"); err != nil {
				return err
			}
		}
		return r.publishBatch(ctx, s, name, first, els)
	}
	return fmt.Errorf("lost %d races to end the batch in a row", maxRateRaces)
}

// readBatch reads the events of the batch opened at first, and whether it is
// still open (last is then the log's last message). No events: the batch is
// not in the log any more (the stream's max age).
func (r *Router) readBatch(ctx context.Context, s batchSubjects, first uint64) (els []batchEvent, last uint64, open bool, _ error) {
	seq := first
	for {
		m, err := r.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(s.items))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return els, last, els != nil, nil
		case err != nil:
			return nil, 0, false, fmt.Errorf("reading batch %d: %w", first, err)
		}
		it := itemOf(m.Sequence, m.Header)
		if els == nil && (m.Sequence != first || it.n != 1) {
			return nil, 0, false, nil
		}
		if els != nil && (it.n <= 1 || it.first != first) {
			return els, m.Sequence, false, nil // the end marker, or the next batch
		}
		tseq, _ := strconv.ParseUint(m.Header.Get(events.HeaderBatchSeq), 10, 64)
		els = append(els, batchEvent{tseq, m.Data, m.Header.Get(events.HeaderBurstDigest)})
		last, seq = m.Sequence, m.Sequence+1
		if it.full {
			return els, last, false, nil
		}
	}
}

// publishBatch publishes a batch's run: an explicit invocation of the skill,
// its data the batch's events, named by the batch.
func (r *Router) publishBatch(ctx context.Context, s batchSubjects, name string, first uint64, evs []batchEvent) error {
	// In the order the triggers were stored, not the order routers added them.
	slices.SortStableFunc(evs, func(a, b batchEvent) int { return cmp.Compare(a.seq, b.seq) })
	size := len(`{"events":[]}`) + len(evs)
	for _, e := range evs {
		size += len(e.data)
	}
	data := make([]byte, 0, size)
	data = append(data, `{"events":[`...)
	typ := ""
	for i, e := range evs {
		el := e.data
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, el...)
		if typ == "" {
			var h struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(el, &h) == nil {
				typ = h.Type
			}
		}
	}
	data = append(data, "]}"...)
	ev := event.New()
	ev.SetID(BatchRunID(s.id, first))
	ev.SetSource(DebounceSource(name))
	ev.SetType(typ)
	if err := ev.SetData(event.ApplicationJSON, data); err != nil {
		return err
	}
	m := bus.Encode(r.cfg.Bus.Subjects.TriggerDebounced(name), "batch."+name+"."+ev.ID(), &ev)
	if d := evs[len(evs)-1].digest; d != "" {
		m.Header.Set(events.HeaderBurstDigest, d) // the version it runs on if the skill is deleted
	}
	// Where the run stands for cancel_on: at its last trigger (recordOf).
	m.Header.Set(headerDebounceSeq, strconv.FormatUint(evs[len(evs)-1].seq, 10))
	return r.publishRun(ctx, m, name)
}

// BatchRunID is the id of the run of the batch opened at first in the log id:
// its activation is events.ActivationID(DebounceSource(skill), this).
func BatchRunID(id string, first uint64) string {
	return "batch-" + id + "-" + strconv.FormatUint(first, 10)
}

// String is the verdict on a trigger added to a batch.
func (f folding) batchString() string {
	w := "batch " + f.bt.String()
	if f.key != "" {
		w += fmt.Sprintf(" (key %q)", clip(f.key, 64))
	}
	return w + ": added to a batch that runs as one"
}
