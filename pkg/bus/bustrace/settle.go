package bustrace

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Attributes of a settle span besides messaging.operation.name (ack, nak, term).
const (
	AttrSettleDelay  = attribute.Key("skillbus.settle.delay_ms") // a nak's redelivery delay
	AttrSettleReason = attribute.Key("skillbus.settle.reason")   // a term's reason
)

// Settling returns msg with the settlements that change its fate traced: Nak,
// NakWithDelay, Term and TermWithReason each run inside a CLIENT span of settling
// the message ("nak <subject>", messaging.operation.type settle, the settlement in
// messaging.operation.name), a child of the span in ctx — the span of processing
// msg, which a settlement should end. An ack, the ending of nearly every delivery,
// gets no span of its own: the process span, which ends after it, covers it, and
// two more spans per execution (the router's and the worker's acks) cost a tenth of
// a traced fleet's throughput. InProgress, sent many times a run and waited on by
// nobody, gets none either.
//
// With no recording span in ctx (tracing off, or not sampled) it returns msg
// itself, at no cost.
//
// template, when not empty, names the destination in the spans' names instead of
// the subject (see telemetry.Message.Template).
func Settling(ctx context.Context, msg jetstream.Msg, template string) jetstream.Msg {
	if msg == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return msg
	}
	return &settling{Msg: msg, ctx: ctx, template: template}
}

type settling struct {
	jetstream.Msg
	ctx      context.Context
	template string
}

func (s *settling) settle(op string, settle func() error, attrs ...attribute.KeyValue) error {
	var group string
	if md, err := s.Msg.Metadata(); err == nil {
		group = md.Consumer
	}
	m := messageOf(s.Msg.Subject(), s.Msg.Headers(), 0, group)
	if s.template != "" {
		m.Template = s.template
	}
	_, span := telemetry.StartSettle(s.ctx, m, op, attrs...)
	err := settle()
	telemetry.End(span, err)
	return err
}

func (s *settling) Nak() error { return s.settle("nak", s.Msg.Nak) }

func (s *settling) NakWithDelay(d time.Duration) error {
	return s.settle("nak", func() error { return s.Msg.NakWithDelay(d) }, AttrSettleDelay.Int64(d.Milliseconds()))
}

func (s *settling) Term() error { return s.settle("term", s.Msg.Term) }

func (s *settling) TermWithReason(reason string) error {
	return s.settle("term", func() error { return s.Msg.TermWithReason(reason) }, AttrSettleReason.String(reason))
}
