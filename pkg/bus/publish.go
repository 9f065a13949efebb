package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/skillbus/skillbus/events"
)

// Meta holds the extension attributes that tie an event to its activation, execution,
// cause and trace.
type Meta struct {
	CorrelationID string
	CausationID   string
	ExecutionID   string
	TraceParent   string
	TraceState    string
	// Seq is the event's place in its execution's sequence (events.ExtSeq), set
	// on the events of an execution followed live.
	Seq string
}

// Event is one of skillbus's own events, to be written in structured content mode
// (one compact JSON document) with JSON data. ID doubles as the message's
// Nats-Msg-Id, so it must be deterministic for the publish to be idempotent.
//
// skillbus writes its own events straight to JSON instead of going through the
// CloudEvents SDK's Event: they are valid by construction, and on the hot path the
// SDK's per-attribute validation and boxing cost more than the publish itself.
// Decode reads them back with the SDK like any other event.
type Event struct {
	ID     string
	Source string
	Type   string
	Meta   Meta
	Data   any
	// Time is the event's CloudEvents time when not zero; zero is the moment it is
	// encoded. A message scheduled to be published later (a sleep's wake-up, a
	// wait's or a confirmation's timeout) gives the time it is due, which is when
	// the event happens.
	Time time.Time
}

// Msg encodes the event for subject.
func (e Event) Msg(subject string) (*nats.Msg, error) { return e.msg(subject, false) }

// JobMsg encodes a job (events.TypeJob) for subject, as a structured-mode CloudEvent:
// one JSON document holding the attributes and the data, with Content-Type
// application/cloudevents+json and Nats-Msg-Id as its only headers (and
// Skillbus-Queue-Priority for a run with a queue priority). A job is a
// command to one worker, not a record for watchers, and its worker reads the whole
// of it anyway; each header, on the other hand, is encoded by the publisher's
// client, scanned by the server and parsed into a map by every reader. It carries
// what CloudEvents and the work need: specversion, id, source, type, the causation
// and trace extensions. It leaves out the optional time (the stream's timestamp is
// the job's), the data content type (JSON, the default) and the correlation and
// execution extensions, which repeat the data's activation_id and execution_id.
func (e Event) JobMsg(subject string) (*nats.Msg, error) {
	if j, ok := e.Data.(events.Job); ok {
		return e.JobMsgOf(subject, &j)
	}
	return e.jobMsg(subject, nil, false)
}

// JobMsgOf is JobMsg with job as the data (e.Data is not read). A publisher on the
// hot path hands the job by pointer so that it is not copied to the heap, as making
// it an Event's Data (an interface) would.
func (e Event) JobMsgOf(subject string, job *events.Job) (*nats.Msg, error) {
	return e.jobMsg(subject, job, false)
}

// PooledJobMsgOf is JobMsgOf encoding into a buffer of the bus's pool, for a
// caller that gives the message to a Batch (GiveCreate), which puts the buffer
// back once JetStream has the job (see bufpool.go).
func (e Event) PooledJobMsgOf(subject string, job *events.Job) (*nats.Msg, error) {
	return e.jobMsg(subject, job, true)
}

// PooledMsg is Msg encoding into a buffer of the bus's pool, for a caller that
// gives the message to a Batch (Give), which puts the buffer back once JetStream
// has the event (see bufpool.go).
func (e Event) PooledMsg(subject string) (*nats.Msg, error) { return e.msg(subject, true) }

func (e Event) jobMsg(subject string, job *events.Job, pooled bool) (*nats.Msg, error) {
	m, err := e.structured(subject, time.Time{}, job, pooled,
		[2]string{events.ExtCausationID, e.Meta.CausationID},
		[2]string{events.ExtTraceParent, e.Meta.TraceParent},
		[2]string{events.ExtTraceState, e.Meta.TraceState})
	if err == nil && job != nil && job.Skill.QueuePriority != 0 {
		// Every job of a run with a queue priority says it, whoever publishes it
		// (on job.Skill.LanePool()): the worker orders the jobs it holds by it.
		m.Header.Set(events.HeaderQueuePriority, strconv.Itoa(job.Skill.QueuePriority))
	}
	return m, err
}

// structured encodes e for subject as a structured-mode CloudEvent: its attributes,
// the time at (none when zero), the extensions exts that are set, then its data —
// job when not nil, else e.Data — in one buffer made once, or taken from the
// pool when pooled. Its headers are Content-Type and Nats-Msg-Id (the event's id).
func (e Event) structured(subject string, at time.Time, job *events.Job, pooled bool, exts ...[2]string) (*nats.Msg, error) {
	size := 192 + len(e.ID) + len(e.Source) + len(e.Type)
	for _, kv := range exts {
		size += len(kv[1])
	}
	if job != nil {
		size += job.JSONSize()
	} else {
		size += dataSize(e.Data)
	}
	var b []byte
	if pooled {
		b = getBuf(size)
	} else {
		b = make([]byte, 0, size)
	}
	b = appendStructuredHead(b, e, at, exts...)
	var err error
	if job != nil {
		b, err = job.AppendJSON(b)
	} else {
		b, err = appendData(b, e.Data)
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: data: %w", e.Type, err)
	}
	// Room for one more header (Skillbus-Recovered on a republished job,
	// Skillbus-Link on a replayed one).
	var h nats.Header
	if pooled {
		h = getHeader()
	} else {
		h = make(nats.Header, 3)
	}
	m := &structuredMsg{id: [1]string{e.ID}}
	h[HeaderContentType], h[HeaderMsgID] = structuredType, m.id[:]
	m.Msg = nats.Msg{Subject: subject, Header: h, Data: append(b, '}')}
	return &m.Msg, nil
}

// structuredMsg is a message structured makes and the value of its Nats-Msg-Id
// header: one allocation for the two.
type structuredMsg struct {
	nats.Msg
	id [1]string
}

// structuredType is the Content-Type header's value, shared by every message
// structured writes: capped, so that a Header.Add copies it rather than append to
// it, and never written to (Set replaces it).
var structuredType = []string{structuredJSON}[:1:1]

// DataAppender is event data of another package that encodes itself as
// json.Marshal would (the worker's outcome, which carries its log): appendData
// uses AppendEventData instead of json.Marshal. The method has a name of its own
// so that no type gets it by embedding one of the events types.
type DataAppender interface {
	AppendEventData(b []byte) ([]byte, error)
}

// appendData appends an event's data to b. The jobs and outcomes of the hot path
// encode themselves, into the bytes json.Marshal would write, without its
// reflection (see events.Job.AppendJSON). Only these very types do: a type that
// embeds one inherits its AppendJSON, which knows nothing of the embedding type's
// own fields.
func appendData(b []byte, data any) ([]byte, error) {
	switch d := data.(type) {
	case events.Job:
		return d.AppendJSON(b) // each grows the buffer once, by what it needs
	case events.ExecutionCompleted:
		return d.AppendJSON(b)
	case events.ExecutionFailed:
		return d.AppendJSON(b)
	case events.ExecutionFallback:
		return d.AppendJSON(b)
	case DataAppender:
		return d.AppendEventData(b)
	}
	j, err := json.Marshal(data)
	if err != nil {
		return b, err
	}
	if b == nil {
		return j, nil
	}
	return append(b, j...), nil
}

// msg encodes e for subject as a structured-mode CloudEvent, as JobMsg does a job,
// but with every attribute: specversion, id, source, type, time (e.Time, or now)
// and each extension that is set (correlation, execution, causation, trace
// context), then the data.
// Its headers are Content-Type application/cloudevents+json and Nats-Msg-Id (the
// event's id, for the server's duplicate window). As binary-mode headers, each
// attribute was encoded into the message by this client, scanned by the server and
// parsed into a map by every reader's client; as JSON they cost the writer a few
// appends and a reader nothing it does not read.
func (e Event) msg(subject string, pooled bool) (*nats.Msg, error) {
	at := e.Time
	if at.IsZero() {
		at = time.Now()
	}
	return e.structured(subject, at.UTC(), nil, pooled,
		[2]string{events.ExtCorrelationID, e.Meta.CorrelationID},
		[2]string{events.ExtExecutionID, e.Meta.ExecutionID},
		[2]string{events.ExtCausationID, e.Meta.CausationID},
		[2]string{events.ExtTraceParent, e.Meta.TraceParent},
		[2]string{events.ExtTraceState, e.Meta.TraceState},
		[2]string{events.ExtSeq, e.Meta.Seq})
}

// DataSizer is event data that knows about how long its JSON is (as
// events.Job.JSONSize does), so that the event and its data are written into one
// buffer made once.
type DataSizer interface {
	EventDataSize() int
}

// dataSize is about how many bytes appendData writes for data: exact enough for the
// hot path's own types, a guess for the rest.
func dataSize(data any) int {
	switch d := data.(type) {
	case events.Job:
		return d.JSONSize()
	case events.ExecutionCompleted:
		return d.JSONSize()
	case events.ExecutionFailed:
		return d.JSONSize()
	case events.ExecutionFallback:
		return d.JSONSize()
	case DataSizer:
		return d.EventDataSize()
	}
	return 256
}

// DefaultMaxEventBytes is the largest trigger routers accept, and so the largest
// event the gateway takes, unless both are told otherwise.
const DefaultMaxEventBytes = 256 << 10

// EventSize is what a trigger weighs against the routers' limit (router
// --max-event-bytes): its data and its headers. The gateway weighs an event the
// same way before publishing it, so it refuses exactly what a router would.
func EventSize(m Msg) int {
	n := len(m.Data())
	for k, vs := range m.Headers() {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// TooLargeError is a message bigger than the server accepts (its max_payload).
type TooLargeError struct {
	Subject     string
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("result_too_large: the message for %s would be %d bytes; the NATS server accepts at most %d (max_payload)", e.Subject, e.Size, e.Limit)
}

// Fits returns a *TooLargeError when m is bigger than the connected server's
// max_payload, so a caller can fail clearly instead of having the publish fail on
// every retry.
func (b *Bus) Fits(m *nats.Msg) error {
	limit := int(b.NC.MaxPayload())
	if limit <= 0 {
		return nil
	}
	size := len(m.Data) + len(m.Subject)
	for k, vs := range m.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if size > limit {
		return &TooLargeError{Subject: m.Subject, Size: size, Limit: limit}
	}
	return nil
}

// MetaOf reads the extension attributes of e.
func MetaOf(e *event.Event) Meta {
	ext := e.Extensions()
	s := func(k string) string {
		v, _ := ext[k].(string)
		return v
	}
	return Meta{
		CorrelationID: s(events.ExtCorrelationID),
		CausationID:   s(events.ExtCausationID),
		ExecutionID:   s(events.ExtExecutionID),
		TraceParent:   s(events.ExtTraceParent),
		TraceState:    s(events.ExtTraceState),
	}
}

// Batch publishes messages asynchronously and waits for every acknowledgement. It is
// how a handler persists everything its input causes before acking the input, so a
// crash never loses what an acked input caused, without a round trip per message. A Batch is safe for concurrent use.
type Batch struct {
	js      jetstream.JetStream
	p       *pipeline
	mu      sync.Mutex
	pending []sent // published, not yet waited for
	err     error
	dups    map[string]bool // message ids JetStream acknowledged as duplicates
	unacked []queued        // see Resend
	dropped []queued        // not sent since the last Wait: the batch had failed
	// first holds the first publish pending: most batches have one (a job, an
	// outcome), which then costs no array of its own. Only the first pending
	// list uses it: a Wait may still read it while publishes go on.
	first     [1]sent
	firstUsed bool
	// turn makes Waits take turns: a Wait takes the publishes pending when its
	// turn comes, so one that waited behind another also waited for those the
	// other took, queued before it; waits counts the Waits under way or waiting
	// for their turn, and waitErr is a failed Wait's error for the Waits that
	// were waiting behind it (their publishes may be among those it saw fail).
	turn    sync.Mutex
	waits   int
	waitErr error
}

// sent is a publish awaiting its acknowledgement: in the bus's pipeline (own),
// or, for one with publish options other than create-only, PublishMsgAsync's (f).
type sent struct {
	m      *nats.Msg // for own; f has its own
	own    *inflight
	f      jetstream.PubAckFuture
	opts   []jetstream.PublishOpt
	create bool // a create-only publish (see Create)
	given  bool // the batch owns the message's Data (see Give)
}

// done is called once JetStream has s's message and Wait has read what it reads
// of it: a given message's buffer and headers go back to the pool, and so does
// the record of a publish through the pipeline.
func (s sent) done() {
	m := s.msg()
	if s.own != nil {
		putInflight(s.own)
	}
	if !s.given {
		return
	}
	b, h := m.Data, m.Header
	m.Data, m.Header = nil, nil
	putBuf(b)
	putHeader(h)
}

func (s sent) msg() *nats.Msg {
	if s.own != nil {
		return s.m
	}
	return s.f.Msg()
}

// queued is a message and the options it was published with.
type queued struct {
	m      *nats.Msg
	opts   []jetstream.PublishOpt
	create bool
	given  bool
}

// Batch starts a batch of publishes.
func (b *Bus) Batch() *Batch { return &Batch{js: b.JS, p: b.pipe} }

// Publish queues m. Errors are reported by Wait.
func (bt *Batch) Publish(m *nats.Msg, opts ...jetstream.PublishOpt) {
	bt.publish(queued{m: m, opts: opts})
}

// Create queues m as a create-only publish: JetStream stores it only if its subject
// holds no message yet. A subject that holds one already counts, like a duplicate
// message id, as a success that Duplicate reports (by the message's ce-id): the
// message was there before. The subject is the message's identity, so Create drops
// its Nats-Msg-Id: the server's duplicate window would only repeat, at a cost per
// message, what the subject already guarantees, and for longer than the window.
// A clustered stream still replicating an earlier publish to the subject refuses
// this one without saying whether that one will be stored: Wait returns that
// refusal (InProcess), and the caller publishes again later.
func (bt *Batch) Create(m *nats.Msg) {
	delete(m.Header, HeaderMsgID)
	bt.publish(queued{m: m, opts: createOnly, create: true})
}

// Give queues m as Publish does, and takes m's Data and Header, which the caller
// must not read or change from then on: once JetStream has acknowledged m, Wait
// puts them back in the bus's pool for the next message encoded by PooledMsg or
// PooledJobMsgOf, and sets m.Data and m.Header to nil (see bufpool.go). Once a
// Wait has failed before seeing m acknowledged, m is no longer pooled: Resend
// may send it again, and m keeps its Data and Header. Give is for a message made
// by those two; any other's Data and Header are taken all the same. Never give
// a message delivered by a subscription: whoever read it in place (a job's
// strings, events.DecodeJobInPlace) would see its bytes overwritten.
func (bt *Batch) Give(m *nats.Msg) {
	bt.publish(queued{m: m, given: true})
}

// GiveCreate queues m as Create does, and takes m's Data and Header as Give does.
func (bt *Batch) GiveCreate(m *nats.Msg) {
	delete(m.Header, HeaderMsgID)
	bt.publish(queued{m: m, opts: createOnly, create: true, given: true})
}

var createOnly = []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}

// expectNone is the header value createOnly sets, as jetstream's option writes
// it; capped, so that an Add to the header copies it rather than append to it.
var expectNone = []string{"0"}[:1:1]

func (bt *Batch) publish(q queued) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.err != nil {
		bt.dropped = append(bt.dropped, q)
		return
	}
	s := sent{m: q.m, opts: q.opts, create: q.create, given: q.given}
	var err error
	switch {
	case q.create:
		if q.m.Header == nil {
			q.m.Header = nats.Header{}
		}
		// Resent, a message has it already, and the header may still be read by a
		// publish of it in flight: it is not written again.
		if v := q.m.Header[jetstream.ExpectedLastSubjSeqHeader]; len(v) != 1 || v[0] != expectNone[0] {
			q.m.Header[jetstream.ExpectedLastSubjSeqHeader] = expectNone
		}
		s.own, err = bt.p.send(q.m)
	case len(q.opts) == 0:
		s.own, err = bt.p.send(q.m)
	default:
		s.f, err = bt.js.PublishMsgAsync(q.m, q.opts...)
	}
	if err != nil {
		bt.err = fmt.Errorf("publish %s: %w", q.m.Subject, err)
		bt.dropped = append(bt.dropped, q)
		return
	}
	if bt.pending == nil && !bt.firstUsed {
		bt.pending, bt.firstUsed = bt.first[:0], true
	}
	bt.pending = append(bt.pending, s)
}

// PublishEvent encodes e on subject and queues it.
func (bt *Batch) PublishEvent(subject string, e Event, opts ...jetstream.PublishOpt) {
	m, err := e.Msg(subject)
	if err != nil {
		bt.mu.Lock()
		bt.err = cmp.Or(bt.err, err)
		bt.mu.Unlock()
		return
	}
	bt.Publish(m, opts...)
}

// Put queues a write of a KV key: the publish a KeyValue.Put makes, pipelined with
// the rest of the batch instead of a round trip of its own.
func (bt *Batch) Put(bucket, key string, value []byte) {
	bt.Publish(&nats.Msg{Subject: "$KV." + bucket + "." + key, Data: value})
}

// Duplicate reports whether a publish with message id id (its Nats-Msg-Id, or for a
// message without one its CloudEvent id), waited for by Wait, was dropped by
// JetStream as a repeat of one it had persisted before (or, for Create, found its
// subject taken).
func (bt *Batch) Duplicate(id string) bool {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.dups[id]
}

// Duplicates reports whether any publish acknowledged so far was a duplicate: the
// rare case, checked before building the ids to ask Duplicate about.
func (bt *Batch) Duplicates() bool {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return len(bt.dups) > 0
}

// Len is the number of publishes queued.
func (bt *Batch) Len() int {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return len(bt.pending)
}

// Wait blocks until every queued publish is acknowledged by JetStream and returns the
// first error. A duplicate (the message id was seen within the window) is a success:
// the message was persisted before. Waits of one batch at once take turns: one
// returns once every publish queued before it is acknowledged, those another Wait
// took first included, and fails if that Wait failed. A Wait whose ctx ends
// while another has the turn returns ctx's error, its publishes left queued for
// the next Wait.
func (bt *Batch) Wait(ctx context.Context) error {
	bt.mu.Lock()
	bt.waits++
	bt.mu.Unlock()
	if !bt.turn.TryLock() { // the rare case: another Wait of this batch at once
		if err := bt.awaitTurn(ctx); err != nil {
			bt.mu.Lock()
			if bt.waits--; bt.waits == 0 {
				bt.waitErr = nil
			}
			bt.mu.Unlock()
			return err
		}
	}
	err := bt.wait(ctx)
	bt.mu.Lock()
	if bt.waits--; bt.waits == 0 {
		bt.waitErr = nil
	} else if err != nil && bt.waitErr == nil {
		bt.waitErr = err
	}
	bt.mu.Unlock()
	bt.turn.Unlock()
	return err
}

// awaitTurn takes bt.turn, or returns ctx's error first; a turn taken after that
// is given back at once.
func (bt *Batch) awaitTurn(ctx context.Context) error {
	got, gaveUp := make(chan struct{}), make(chan struct{})
	go func() {
		bt.turn.Lock()
		select {
		case got <- struct{}{}:
		case <-gaveUp:
			bt.turn.Unlock()
		}
	}()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		close(gaveUp)
		return ctx.Err()
	}
}

func (bt *Batch) wait(ctx context.Context) error {
	bt.mu.Lock()
	err, pending := cmp.Or(bt.err, bt.waitErr), bt.pending
	bt.pending = nil
	bt.mu.Unlock()
	if err != nil {
		bt.keep(pending)
		return err
	}
	var wake chan struct{} // this Wait's, for the pipeline to wake it (see await)
	defer func() { putWake(wake) }()
	for i, p := range pending {
		var dup bool
		var stop error // ctx's
		if p.own != nil {
			dup, err, stop = bt.p.await(ctx, p.own, &wake)
		} else {
			dup, err, stop = awaitFuture(ctx, p.f)
		}
		switch {
		case stop != nil:
			bt.keep(pending[i:])
			return stop
		case err == nil:
			if dup {
				bt.duplicate(p.msg())
			}
			p.done()
		case p.create && subjectTaken(err):
			bt.duplicate(p.msg())
			p.done()
		default:
			bt.keep(pending[i:])
			return fmt.Errorf("publish %s: %w", p.msg().Subject, err)
		}
	}
	return nil
}

// awaitFuture waits for the outcome of a publish of PublishMsgAsync's.
func awaitFuture(ctx context.Context, f jetstream.PubAckFuture) (dup bool, err, stop error) {
	select {
	case a := <-f.Ok():
		return a.Duplicate, nil, nil
	case err := <-f.Err():
		return false, err, nil
	case <-ctx.Done():
		return false, nil, ctx.Err()
	}
}

func (bt *Batch) duplicate(m *nats.Msg) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.dups == nil {
		bt.dups = map[string]bool{}
	}
	bt.dups[MsgID(m)] = true
}

// MsgID is m's identity for Duplicate: its Nats-Msg-Id, or its CloudEvent id for a
// message published without one (Create drops it).
func MsgID(m *nats.Msg) string {
	if id := m.Header.Get(HeaderMsgID); id != "" {
		return id
	}
	if id := m.Header.Get(events.HeaderCEID); id != "" {
		return id
	}
	return structuredID(m) // a job: its id is in its JSON
}

// subjectTaken reports whether err says a create-only publish's subject holds a
// stored message: "wrong last sequence: N". A clustered stream answers "wrong last
// sequence" without a number (InProcess) while another publish to the subject is
// still being replicated, which may yet fail: that is no proof the subject is taken.
func subjectTaken(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// InProcess reports whether err is a clustered stream refusing a publish because
// an earlier one with the same message id ("duplicate message id is in process") or,
// for a create-only publish, to the same subject ("wrong last sequence", without a
// number) is still being replicated. Whether that one gets stored is not known yet:
// the publish is to be sent again, and then finds it stored (a duplicate) or not.
func InProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrDuplicateInProcess ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// jsErrDuplicateInProcess is JetStream's "duplicate message id is in process".
const jsErrDuplicateInProcess = 10158

// keep notes publishes whose acknowledgement Wait did not see, then what was
// dropped after them: the order they were queued in. A given message among them
// is no longer the pool's: a publish of it that no one waits for may still be in
// flight, and send it again after a later batch has had it acknowledged, so its
// buffer and headers are left to the garbage collector.
func (bt *Batch) keep(pending []sent) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	for _, p := range pending {
		bt.unacked = append(bt.unacked, queued{p.msg(), p.opts, p.create, false})
	}
	bt.unacked = append(bt.unacked, bt.dropped...)
	bt.dropped = nil
}

// Resend queues on to, in the order they were queued here and with the same
// options, the messages whose acknowledgement no Wait of this batch saw: those
// Publish could not send after the batch failed, the one that failed, and those a
// failed Wait did not wait for. skip leaves out messages (nil: none). Their message
// ids make publishing them again idempotent: it is how a caller finishes a batch a
// lost connection cut short.
func (bt *Batch) Resend(to *Batch, skip func(*nats.Msg) bool) {
	bt.mu.Lock()
	all := append(slices.Clone(bt.unacked), bt.dropped...)
	bt.mu.Unlock()
	for _, q := range all {
		if skip == nil || !skip(q.m) {
			to.publish(q)
		}
	}
}
