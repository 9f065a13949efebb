package bus

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/jsondec"
)

// pipeline is how a Batch publishes: each message goes out with a reply subject
// of the bus's own, and JetStream's acknowledgement comes back to one
// subscription, which hands it to the batch waiting for it.
//
// It does what jetstream.JetStream's PublishMsgAsync does, the same way — a
// bound on publishes awaiting their acknowledgement, PublishAckTimeout,
// publishing again when no stream answered yet, failing every publish in flight
// when the connection is lost — at a fraction of the cost: PublishMsgAsync makes
// a future, a reply token, a timer and, once waited on, two channels for each
// message, and decodes every acknowledgement with encoding/json's reflection;
// here a publish costs one small record and its reply subject, and the
// acknowledgement is read in place. Publishes with options other than
// create-only still go through PublishMsgAsync (Batch.publish).
type pipeline struct {
	nc      *nats.Conn
	timeout time.Duration // Config.PublishAckTimeout
	max     int           // publishes awaiting their acknowledgement, at most

	started atomic.Bool // subscribed to the acknowledgements
	startMu sync.Mutex  // held while subscribing
	prefix  string      // of the reply subjects: "<inbox>."

	mu     sync.Mutex
	next   uint64               // the last reply token given
	flight map[uint64]*inflight // by reply token
	// order holds the tokens in the order sent from head on, for the timeout:
	// all publishes wait as long, so the first in flight is the first due. A
	// publish sent again is there again, with its new deadline; only the one its
	// record holds counts.
	order   []expiry
	head    int
	timer   *time.Timer   // fires at the first of order's deadlines
	armed   bool          // timer is set
	stalled chan struct{} // closed when flight drops below max
	epoch   time.Time     // of the deadlines
}

// expiry is when the acknowledgement of the publish with reply token tok is due.
type expiry struct {
	tok      uint64
	deadline time.Duration // since epoch
}

// inflight is a publish sent through the pipeline. Its outcome (done, dup, err) is
// set once, under the pipeline's lock.
//
// It holds what it publishes (subject, header, data) as they were when it was
// sent, so that publishing it again never reads the caller's message, which may
// have been given to another batch since and emptied there (Batch.Resend): a
// message whose publish failed is never pooled (Batch.keep), so these stay as
// they were for as long as the record is in flight.
type inflight struct {
	subject string
	header  nats.Header
	data    []byte
	reply   string
	retries int
	// deadline is when its acknowledgement is due (since the pipeline's epoch),
	// or 0 while it waits to be sent again: as PublishMsgAsync does, each time it
	// is sent it has PublishAckTimeout again.
	deadline time.Duration
	done     bool
	dup      bool
	err      error
	// wake is the channel of the Wait waiting for this publish, if one does.
	wake chan struct{}
}

const (
	pubRetries   = jetstream.DefaultPubRetryAttempts
	pubRetryWait = jetstream.DefaultPubRetryWait
	stallWait    = 200 * time.Millisecond // as PublishMsgAsync waits for room
)

func newPipeline(nc *nats.Conn, timeout time.Duration, max int) *pipeline {
	return &pipeline{nc: nc, timeout: timeout, max: max}
}

// init subscribes to the acknowledgements, on the first publish: a bus that never
// pipelines one holds no subscription. A publish that could not subscribe (the
// connection was draining, say) fails, and the next one tries again, as
// PublishMsgAsync does.
func (p *pipeline) init() error {
	if p.started.Load() {
		return nil
	}
	p.startMu.Lock()
	defer p.startMu.Unlock()
	if p.started.Load() {
		return nil
	}
	if p.flight == nil {
		p.flight = make(map[uint64]*inflight)
		p.epoch = time.Now()
		p.timer = time.AfterFunc(time.Hour, p.expire)
		p.timer.Stop()
	}
	p.prefix = p.nc.NewInbox() + "."
	// As PublishMsgAsync does: a publish in flight when the connection is lost
	// fails at once rather than waiting out its timeout, since its
	// acknowledgement may have been lost with the connection.
	status := p.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	go p.watch(status)
	if _, err := p.nc.Subscribe(p.prefix+"*", p.acked); err != nil {
		p.nc.RemoveStatusListener(status) // ends watch
		return err
	}
	p.started.Store(true)
	return nil
}

// send publishes m with a reply subject that brings its acknowledgement back to
// acked, and returns the publish in flight.
func (p *pipeline) send(m *nats.Msg) (*inflight, error) {
	if m.Reply != "" {
		return nil, jetstream.ErrAsyncPublishReplySubjectSet
	}
	if err := p.init(); err != nil {
		return nil, err
	}
	f := getInflight()
	f.subject, f.header, f.data = m.Subject, m.Header, m.Data
	p.mu.Lock()
	if len(p.flight) >= p.max {
		if err := p.stall(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
	}
	p.next++
	tok := p.next
	var buf [96]byte
	f.reply = string(strconv.AppendUint(append(buf[:0], p.prefix...), tok, 36))
	p.flight[tok] = f
	p.due(tok, f)
	p.mu.Unlock()
	if err := p.publish(m.Subject, f.reply, m.Header, m.Data); err != nil {
		p.mu.Lock()
		delete(p.flight, tok)
		p.unstall()
		p.mu.Unlock()
		return nil, err
	}
	return f, nil
}

// due sets when the acknowledgement of f, just sent with token tok, is due; p.mu
// held. Every publish waits as long, so order stays sorted.
func (p *pipeline) due(tok uint64, f *inflight) {
	f.deadline = time.Since(p.epoch) + p.timeout
	p.order = append(p.order, expiry{tok, f.deadline})
	if !p.armed {
		p.armed = true
		p.timer.Reset(p.timeout)
	}
}

// publish sends a message with the reply subject of its publish, leaving the
// message as it is.
func (p *pipeline) publish(subject, reply string, h nats.Header, data []byte) error {
	pm := nats.Msg{Subject: subject, Reply: reply, Header: h, Data: data}
	return p.nc.PublishMsg(&pm)
}

// stall waits, with p.mu held, until fewer than max publishes are in flight, for at
// most stallWait in all, as PublishMsgAsync does: a publisher that another takes
// the freed room from waits on, but not for longer.
func (p *pipeline) stall() error {
	t := time.NewTimer(stallWait)
	defer t.Stop()
	for len(p.flight) >= p.max {
		if p.stalled == nil {
			p.stalled = make(chan struct{})
		}
		ch := p.stalled
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			p.mu.Lock()
			return jetstream.ErrTooManyStalledMsgs
		}
		p.mu.Lock()
	}
	return nil
}

// unstall lets stalled publishers on once there is room; p.mu held.
func (p *pipeline) unstall() {
	if p.stalled != nil && len(p.flight) < p.max {
		close(p.stalled)
		p.stalled = nil
	}
}

// acked reads the acknowledgement (or the refusal) of a publish.
func (p *pipeline) acked(m *nats.Msg) {
	if len(m.Subject) <= len(p.prefix) {
		return
	}
	tok, err := strconv.ParseUint(m.Subject[len(p.prefix):], 36, 64)
	if err != nil {
		return
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		p.noResponders(tok)
		return
	}
	dup, err := readPubAck(m.Data)
	p.end(tok, dup, err) // unless it timed out meanwhile, or its connection was lost
}

// noResponders publishes tok's message again after a while, up to pubRetries
// times, when no stream took it (one may be electing its leader), as
// PublishMsgAsync does; then fails it with jetstream.ErrNoStreamResponse.
func (p *pipeline) noResponders(tok uint64) {
	p.mu.Lock()
	f := p.flight[tok]
	if f == nil {
		p.mu.Unlock()
		return
	}
	if f.retries < pubRetries {
		f.retries++
		f.deadline = 0 // not due until sent again (see resend)
		p.mu.Unlock()
		time.AfterFunc(pubRetryWait, func() { p.resend(tok) })
		return
	}
	wake := p.endLocked(tok, f, false, jetstream.ErrNoStreamResponse)
	p.mu.Unlock()
	signal(wake)
}

// resend publishes tok's message again, unless it ended meanwhile, with
// PublishAckTimeout again for its acknowledgement. It publishes without p.mu
// held, which a publish to a full socket could hold for long, from what the
// record held when sent: the record may end, and go back to its pool, meanwhile.
func (p *pipeline) resend(tok uint64) {
	p.mu.Lock()
	f := p.flight[tok]
	if f == nil {
		p.mu.Unlock()
		return
	}
	subject, reply, h, data := f.subject, f.reply, f.header, f.data
	p.due(tok, f)
	p.mu.Unlock()
	if err := p.publish(subject, reply, h, data); err != nil {
		p.fail(tok, err) // unless it ended meanwhile
	}
}

// fail ends the publish of tok with err, unless it ended already.
func (p *pipeline) fail(tok uint64, err error) { p.end(tok, false, err) }

// end ends the publish of tok (a duplicate, or err) and wakes the Wait waiting
// for it, unless it ended already.
func (p *pipeline) end(tok uint64, dup bool, err error) {
	p.mu.Lock()
	f := p.flight[tok]
	if f == nil {
		p.mu.Unlock()
		return
	}
	wake := p.endLocked(tok, f, dup, err)
	p.mu.Unlock()
	signal(wake)
}

// endLocked ends f, the publish of tok, and returns the channel of the Wait to
// wake, if any; p.mu held.
func (p *pipeline) endLocked(tok uint64, f *inflight, dup bool, err error) chan struct{} {
	delete(p.flight, tok)
	p.dropEnded()
	p.unstall()
	return p.resolve(f, dup, err)
}

// resolve sets f's outcome and returns the channel of the Wait to wake, if one
// waits for f; p.mu held.
func (p *pipeline) resolve(f *inflight, dup bool, err error) chan struct{} {
	f.done, f.dup, f.err = true, dup, err
	wake := f.wake
	f.wake = nil
	return wake
}

// await waits for the outcome of f: whether it was a duplicate, or its error;
// stop is ctx's error when ctx ended first. *wake is the calling Wait's channel,
// taken from a pool the first time it has to wait: one per Wait rather than one
// per publish, and one per Wait rather than per batch, so that two Waits of a
// batch wait each for its own publishes. A token left in it from a publish it no
// longer waits for only makes it look again.
func (p *pipeline) await(ctx context.Context, f *inflight, wake *chan struct{}) (dup bool, err, stop error) {
	for {
		p.mu.Lock()
		if f.done {
			p.mu.Unlock()
			return f.dup, f.err, nil
		}
		if *wake == nil {
			*wake = getWake()
		}
		f.wake = *wake
		p.mu.Unlock()
		select {
		case <-*wake:
		case <-ctx.Done():
			p.mu.Lock()
			f.wake = nil
			p.mu.Unlock()
			return false, nil, ctx.Err()
		}
	}
}

// inflights holds the records of publishes that ended and that their Wait has
// read: once a publish is out of the pipeline's map (it ended) the pipeline no
// longer touches its record, and a Wait puts it back after it has read it
// (Batch.Wait, sent.done).
var inflights sync.Pool

func getInflight() *inflight {
	if f, _ := inflights.Get().(*inflight); f != nil {
		return f
	}
	return new(inflight)
}

func putInflight(f *inflight) {
	*f = inflight{}
	inflights.Put(f)
}

// wakes holds the channels of Waits that have returned.
var wakes sync.Pool

func getWake() chan struct{} {
	if ch, _ := wakes.Get().(chan struct{}); ch != nil {
		return ch
	}
	return make(chan struct{}, 1)
}

// putWake keeps ch, emptied, for another Wait. A signal that was on its way when
// its Wait returned may still land in it: the next Wait to use it looks again.
func putWake(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case <-ch:
	default:
	}
	wakes.Put(ch)
}

func signal(ch chan struct{}) {
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// dropEnded forgets, from the front of order, the publishes no longer in flight
// and the deadlines a publish sent again no longer has, so that order holds about
// as many as flight does; p.mu held.
func (p *pipeline) dropEnded() {
	for p.head < len(p.order) && p.stale(p.order[p.head]) {
		p.head++
	}
	p.compact()
}

// stale reports whether e is no longer a deadline of a publish in flight; p.mu
// held.
func (p *pipeline) stale(e expiry) bool {
	f := p.flight[e.tok]
	return f == nil || f.deadline != e.deadline
}

// compact reuses order's array once what is left of it is at its end; p.mu held.
func (p *pipeline) compact() {
	switch {
	case p.head == len(p.order):
		p.order, p.head = p.order[:0], 0
	case p.head > 256 && p.head > len(p.order)/2:
		p.order, p.head = p.order[:copy(p.order, p.order[p.head:])], 0
	}
}

// expire fails the publishes whose acknowledgement is overdue with
// jetstream.ErrAsyncPublishTimeout, as PublishMsgAsync's timeout does: a publish
// that reached a stream leader which then died is never answered.
func (p *pipeline) expire() {
	var wake []chan struct{}
	p.mu.Lock()
	now := time.Since(p.epoch)
	for ; p.head < len(p.order); p.head++ {
		e := p.order[p.head]
		if p.stale(e) {
			continue
		}
		if e.deadline > now {
			break
		}
		f := p.flight[e.tok]
		delete(p.flight, e.tok)
		if ch := p.resolve(f, false, jetstream.ErrAsyncPublishTimeout); ch != nil {
			wake = append(wake, ch)
		}
	}
	p.compact()
	p.unstall()
	p.armed = p.head < len(p.order)
	if p.armed {
		p.timer.Reset(p.order[p.head].deadline - now)
	}
	p.mu.Unlock()
	for _, ch := range wake {
		signal(ch)
	}
}

// watch fails every publish in flight with nats.ErrDisconnected when the
// connection is lost, until it is closed.
func (p *pipeline) watch(status chan nats.Status) {
	for s := range status {
		var wake []chan struct{}
		p.mu.Lock()
		for tok, f := range p.flight {
			delete(p.flight, tok)
			if ch := p.resolve(f, false, nats.ErrDisconnected); ch != nil {
				wake = append(wake, ch)
			}
		}
		p.order, p.head = p.order[:0], 0
		p.armed = false
		p.timer.Stop()
		p.unstall()
		p.mu.Unlock()
		for _, ch := range wake {
			signal(ch)
		}
		if s == nats.CLOSED {
			return
		}
	}
}

// readPubAck reads a publish's acknowledgement: whether JetStream took the message
// as a duplicate, or why it refused it. The usual answer,
// {"stream":"S","seq":N} with "duplicate":true for a duplicate, is read in place;
// anything else (an error, a shape it does not know) is decoded as
// PublishMsgAsync decodes it.
func readPubAck(data []byte) (dup bool, err error) {
	d := jsondec.Over(data)
	stream, ok := false, true
	if d.Object(func(key string) bool {
		switch key {
		case "stream":
			s, ok := d.String()
			stream = s != ""
			return ok
		case "seq":
			var seq uint64
			return jsondec.Uint(&d, &seq)
		case "duplicate":
			return d.Bool(&dup)
		case "domain", "val":
			return d.Skip()
		}
		ok = false // "error", or a member it leaves to encoding/json
		return false
	}) && ok && d.End() {
		if !stream {
			return false, jetstream.ErrInvalidJSAck
		}
		return dup, nil
	}
	var pa struct { // as PublishMsgAsync's
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	switch {
	case json.Unmarshal(data, &pa) != nil:
		return false, jetstream.ErrInvalidJSAck
	case pa.Error != nil:
		return false, pa.Error
	case pa.PubAck == nil || pa.Stream == "":
		return false, jetstream.ErrInvalidJSAck
	}
	return pa.Duplicate, nil
}
