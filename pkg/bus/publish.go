package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Meta holds the extension attributes that tie an event to its activation, execution,
// cause and trace.
type Meta struct {
	CorrelationID string
	CausationID   string
	ExecutionID   string
	TraceParent   string
	TraceState    string
}

// NewEvent builds one of skillbus's own events with JSON data. id doubles as the
// message's Nats-Msg-Id, so it must be deterministic for the publish to be idempotent.
func NewEvent(id, source, typ string, meta Meta, data any) (*event.Event, error) {
	e := event.New()
	e.SetID(id)
	e.SetSource(source)
	e.SetType(typ)
	e.SetTime(time.Now())
	setExt := func(k, v string) {
		if v != "" {
			e.SetExtension(k, v)
		}
	}
	setExt("correlationid", meta.CorrelationID)
	setExt("causationid", meta.CausationID)
	setExt("executionid", meta.ExecutionID)
	setExt("traceparent", meta.TraceParent)
	setExt("tracestate", meta.TraceState)
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("event %s: data: %w", typ, err)
	}
	e.SetDataContentType("application/json")
	e.DataEncoded = b
	return &e, nil
}

// MetaOf reads the extension attributes of e.
func MetaOf(e *event.Event) Meta {
	ext := e.Extensions()
	s := func(k string) string {
		v, _ := ext[k].(string)
		return v
	}
	return Meta{
		CorrelationID: s("correlationid"),
		CausationID:   s("causationid"),
		ExecutionID:   s("executionid"),
		TraceParent:   s("traceparent"),
		TraceState:    s("tracestate"),
	}
}

// Batch publishes messages asynchronously and waits for every acknowledgement. It is
// how a handler persists everything its input causes before acking the input (DESIGN
// §5.1) without a round trip per message. A Batch is used by one goroutine.
type Batch struct {
	js      jetstream.JetStream
	futures []jetstream.PubAckFuture
	err     error
}

// Batch starts a batch of publishes.
func (b *Bus) Batch() *Batch { return &Batch{js: b.JS} }

// Publish queues m. Errors are reported by Wait.
func (bt *Batch) Publish(m *nats.Msg, opts ...jetstream.PublishOpt) {
	if bt.err != nil {
		return
	}
	f, err := bt.js.PublishMsgAsync(m, opts...)
	if err != nil {
		bt.err = fmt.Errorf("publish %s: %w", m.Subject, err)
		return
	}
	bt.futures = append(bt.futures, f)
}

// PublishEvent encodes e in binary mode on subject and queues it, with e's id as the
// message id.
func (bt *Batch) PublishEvent(subject string, e *event.Event, opts ...jetstream.PublishOpt) {
	bt.Publish(Encode(subject, e.ID(), e), opts...)
}

// Len is the number of publishes queued.
func (bt *Batch) Len() int { return len(bt.futures) }

// Wait blocks until every queued publish is acknowledged by JetStream and returns the
// first error. A duplicate (the message id was seen within the window) is a success:
// the message was persisted before.
func (bt *Batch) Wait(ctx context.Context) error {
	if bt.err != nil {
		return bt.err
	}
	for _, f := range bt.futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	bt.futures = bt.futures[:0]
	return nil
}
