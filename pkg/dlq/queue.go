package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// Errors of the queue's operations.
var (
	// ErrNotFound: no entry has that id (entries are kept 30 days by default).
	ErrNotFound = errors.New("no such dead-letter entry")
	// ErrAmbiguous: an id prefix matches more than one entry.
	ErrAmbiguous = errors.New("id prefix matches several entries")
	// ErrNotReplayable: the entry cannot be published again (an unreadable job).
	ErrNotReplayable = errors.New("entry cannot be replayed")
	// ErrSkillNotFound: the skill to replay is not in the catalog (or the pinned
	// version is no longer kept).
	ErrSkillNotFound = errors.New("skill not in the catalog")
	// ErrNoStream: the DLQ stream does not exist on this server.
	ErrNoStream = errors.New("no DLQ stream")
)

// DefaultLimit is how many entries List returns when Filter.Limit is zero.
const DefaultLimit = 100

// Config configures a Queue.
type Config struct {
	// Bus is the connection; required.
	Bus *bus.Bus
	// Source is the CloudEvents source of the events a replay publishes; default
	// "/skillbus/dlq".
	Source string
}

// Queue reads and replays the dead-letter queue.
type Queue struct {
	b      *bus.Bus
	source string
}

// New returns a Queue on cfg.Bus.
func New(cfg Config) (*Queue, error) {
	if cfg.Bus == nil {
		return nil, errors.New("dlq: Config.Bus is required")
	}
	if cfg.Source == "" {
		cfg.Source = "/skillbus/dlq"
	}
	return &Queue{b: cfg.Bus, source: cfg.Source}, nil
}

// Filter selects entries. The zero value selects every entry.
type Filter struct {
	// Skill keeps the entries of one skill; "_trigger" selects rejected triggers and
	// "_job" unreadable jobs. Empty: every entry.
	Skill string
	// Since keeps the entries written at or after it. Zero: no bound.
	Since time.Time
	// ID keeps the entry with that id, DLQ sequence or id prefix (6 characters at
	// least). Empty: no bound.
	ID string
	// After is the paging cursor: only entries with a DLQ sequence above it. Pass the
	// previous Page's Next.
	After uint64
	// Limit is the most entries returned; default DefaultLimit.
	Limit int
}

// Page is a page of entries, oldest first.
type Page struct {
	Entries []*Entry
	// Next is the cursor of the next page (Filter.After), or 0 when this is the last.
	Next uint64
}

// List returns the entries f selects, oldest first, with their replays.
func (q *Queue) List(ctx context.Context, f Filter) (*Page, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("dlq: limit %d is negative", f.Limit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	subject := q.b.Subjects.Dead(">")
	if f.Skill != "" {
		if err := events.CheckToken("skill", f.Skill); err != nil {
			return nil, fmt.Errorf("dlq: %w", err)
		}
		subject = q.b.Subjects.Dead(f.Skill)
	}
	page := &Page{Entries: []*Entry{}}
	err := q.scan(ctx, subject, f.After+1, f.Since, func(e *Entry) bool {
		if f.ID != "" && !e.matches(f.ID) {
			return true
		}
		if len(page.Entries) == f.Limit {
			page.Next = page.Entries[len(page.Entries)-1].Seq
			return false
		}
		page.Entries = append(page.Entries, e)
		return true
	})
	if err != nil {
		return nil, err
	}
	if err := q.attachReplays(ctx, page.Entries); err != nil {
		return nil, err
	}
	return page, nil
}

// Show returns the entry id names (its id, DLQ sequence or an id prefix), with its
// replays and, for a job, the execution log of the delivery that failed.
func (q *Queue) Show(ctx context.Context, id string) (*Entry, error) {
	e, err := q.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := q.attachReplays(ctx, []*Entry{e}); err != nil {
		return nil, err
	}
	if e.Kind == KindJob {
		if rec, err := q.outcome(ctx, nil, e.ID); err == nil && rec != nil {
			e.Log = rec.Log
		}
		e.Data = q.triggerData(ctx, e.Trigger)
	}
	return e, nil
}

// triggerData returns the data of the trigger a job came from while the TRIGGERS
// stream keeps it, else nil.
func (q *Queue) triggerData(ctx context.Context, ref events.TriggerRef) json.RawMessage {
	if ref.Seq == 0 {
		return nil
	}
	st, err := q.b.Stream(ctx, q.b.StreamTriggers())
	if err != nil {
		return nil
	}
	m, err := st.GetMsg(ctx, ref.Seq)
	if err != nil || m.Subject != ref.Subject {
		return nil
	}
	ev, err := bus.Decode(bus.MsgOf(m.Subject, m.Header, m.Data))
	if err != nil || (ref.ID != "" && ev.ID() != ref.ID) {
		return nil
	}
	return jsonOrString(ev.Data())
}

// find returns the one entry id names.
func (q *Queue) find(ctx context.Context, id string) (*Entry, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, fmt.Errorf("dlq: an entry id is required: %w", ErrNotFound)
	}
	// The whole id names its entry, then a sequence number, then a prefix of an id.
	var found []*Entry
	var bySeq *Entry
	err := q.scan(ctx, q.b.Subjects.Dead(">"), 1, time.Time{}, func(e *Entry) bool {
		switch {
		case e.ID == id:
			found, bySeq = []*Entry{e}, nil
			return false
		case e.hasSeq(id):
			bySeq = e
		case e.matches(id):
			found = append(found, e)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if bySeq != nil {
		return bySeq, nil
	}
	switch len(found) {
	case 0:
		if !isDigits(id) && len(id) < minPrefix {
			return nil, fmt.Errorf("dlq: %q: %w (give the whole id, at least %d characters of it, or the sequence number from 'dlq list')", id, ErrNotFound, minPrefix)
		}
		if isDigits(id) && len(id) < minPrefix {
			// Read as a sequence number only: too short to be an id's beginning.
			return nil, fmt.Errorf("dlq: %q: %w: no entry has sequence number %s (SEQ in 'dlq list'), and the beginning of an id needs at least %d characters; entries are kept %s",
				id, ErrNotFound, id, minPrefix, keptFor(q.b.Config().DeadMaxAge))
		}
		return nil, fmt.Errorf("dlq: %q: %w (entries are kept %s)", id, ErrNotFound, keptFor(q.b.Config().DeadMaxAge))
	case 1:
		return found[0], nil
	}
	ids := make([]string, 0, len(found))
	for _, e := range found {
		ids = append(ids, e.ID)
	}
	return nil, fmt.Errorf("dlq: %q: %w: %s", id, ErrAmbiguous, strings.Join(ids, ", "))
}

// scan reads the DLQ's entries on subject from sequence start (and time since, if
// set), oldest first, until fn returns false or the stream's end.
func (q *Queue) scan(ctx context.Context, subject string, start uint64, since time.Time, fn func(*Entry) bool) error {
	prefix := q.b.Config().Prefix
	return q.read(ctx, subject, start, since, func(m jetstream.Msg) bool {
		md, err := m.Metadata()
		if err != nil {
			return true
		}
		if !since.IsZero() && md.Timestamp.Before(since) {
			return true
		}
		e, ok := decode(prefix, m.Subject(), md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data())
		if !ok {
			return true
		}
		return fn(e)
	})
}

// read delivers the DLQ's messages on subject through an ordered consumer.
func (q *Queue) read(ctx context.Context, subject string, start uint64, since time.Time, fn func(jetstream.Msg) bool) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	switch {
	case start > 1:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	case !since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := q.b.OrderedConsumer(ctx, q.b.StreamDead(), cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("dlq: %w %s: is skillbus running on this server (and with this --prefix)?", ErrNoStream, q.b.StreamDead())
	}
	if err != nil {
		return fmt.Errorf("dlq: read %s: %w", q.b.StreamDead(), err)
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return fmt.Errorf("dlq: read %s: %w", q.b.StreamDead(), err)
		}
		n, stop := 0, false
		for m := range batch.Messages() {
			if stop {
				continue // drained, so the fetch's goroutine ends with it
			}
			n++
			stop = !fn(m)
		}
		if stop {
			return nil
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("dlq: read %s: %w", q.b.StreamDead(), err)
		}
		if n == 0 {
			return nil
		}
	}
}

// replays reads every replay record, by entry id.
func (q *Queue) replays(ctx context.Context) (map[string][]Replay, error) {
	out := map[string][]Replay{}
	err := q.read(ctx, q.replayedSubject(">"), 1, time.Time{}, func(m jetstream.Msg) bool {
		r, err := decodeReplayed(m.Headers(), m.Data())
		if err == nil {
			out[r.EntryID] = append(out[r.EntryID], Replay{DLQReplayed: *r})
		}
		return true
	})
	return out, err
}

// attachReplays fills in the entries' replays and their outcomes.
func (q *Queue) attachReplays(ctx context.Context, es []*Entry) error {
	if len(es) == 0 {
		return nil
	}
	all, err := q.replays(ctx)
	if err != nil {
		return err
	}
	var st jetstream.Stream
	for _, e := range es {
		rs := all[e.ID]
		if len(rs) == 0 {
			continue
		}
		e.Status = StatusReplayed
		for i := range rs {
			rs[i].Outcome = OutcomeRouted
			if rs[i].ExecutionID != "" {
				rs[i].Outcome = OutcomePending
				if st == nil {
					if st, err = q.b.Stream(ctx, q.b.StreamEvents()); err != nil {
						return fmt.Errorf("dlq: %s: %w", q.b.StreamEvents(), err)
					}
				}
				if rec, err := q.outcome(ctx, st, rs[i].ExecutionID); err == nil && rec != nil {
					rs[i].Outcome = rec.Status
				}
			}
		}
		e.Replays = rs
	}
	return nil
}

// outcome reads an execution's outcome from the events stream (st, or looked up
// when nil), or nil when it has none.
func (q *Queue) outcome(ctx context.Context, st jetstream.Stream, executionID string) (*run.Record, error) {
	if st == nil {
		var err error
		if st, err = q.b.Stream(ctx, q.b.StreamEvents()); err != nil {
			return nil, err
		}
	}
	return run.Load(ctx, st, q.b.Subjects, executionID)
}

// replayedSubject is where the record of the replay that created id is kept.
func (q *Queue) replayedSubject(id string) string {
	return q.b.Subjects.Dead(tokenReplayed) + "." + id
}

// keptFor says how long entries are kept as a person would: "30 days", not
// "720h0m0s".
func keptFor(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d <= 0:
		return "until the stream's limits remove them"
	case d == day:
		return "1 day"
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
