package telemetry

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/skillbus/skillbus/internal/spanrec"
	"github.com/skillbus/skillbus/pkg/failure"
)

// ScopeName is the instrumentation scope of skillbus's spans and metrics.
const ScopeName = "github.com/skillbus/skillbus"

// Skillbus span and metric attributes.
const (
	AttrSkillName    = attribute.Key("skillbus.skill.name")
	AttrSkillVersion = attribute.Key("skillbus.skill.version")
	AttrActivationID = attribute.Key("skillbus.activation.id")
	AttrExecutionID  = attribute.Key("skillbus.execution.id")
	AttrAttempt      = attribute.Key("skillbus.attempt")
	AttrPool         = attribute.Key("skillbus.pool")
	AttrStepID       = attribute.Key("skillbus.step.id")
	AttrStepKind     = attribute.Key("skillbus.step.kind")
	AttrTool         = attribute.Key("skillbus.tool.name")
	AttrFailureClass = attribute.Key("skillbus.failure.class")
	AttrOutcome      = attribute.Key("skillbus.outcome")
	AttrRouteMethod  = attribute.Key("skillbus.route.method")
	AttrRouteScore   = attribute.Key("skillbus.route.score")
	AttrLinkReason   = attribute.Key("skillbus.link.reason")
	AttrRecovered    = attribute.Key("skillbus.recovered")
	AttrResumes      = attribute.Key("skillbus.resumes")
)

// Reasons a span links another, in the link's skillbus.link.reason attribute.
const (
	LinkRedelivery = "redelivery" // an earlier attempt of the same job
	LinkRecovered  = "recovered"  // the job a job published again as recovered replaces
	LinkResumed    = "resumed"    // the step that asked for a confirmation answered later
	LinkFallback   = "fallback"   // the execution whose failure started this one
	LinkRepair     = "repair"     // the execution whose failure this repair job fixes, or a job released after it
	LinkReplay     = "replay"     // the dead execution (or rejected trigger) a DLQ replay runs again
	LinkCause      = "causation"  // any other earlier span this one follows from
)

// MessagingSystem is the messaging.system of every skillbus messaging span.
var MessagingSystem = semconv.MessagingSystemKey.String("nats")

// opSend is the messaging.operation.type of a publish (whose
// messaging.operation.name is "publish"): the messaging conventions call it "send"
// since semconv 1.28, where the "publish" type was deprecated in its favour.
// Receive, process and settle keep their names.
var opSend = semconv.MessagingOperationTypeSend

// Job holds the skillbus attributes of a job's spans; empty fields are left out.
type Job struct {
	Skill, Version string
	ActivationID   string
	ExecutionID    string
	Attempt        int // 1 for the first delivery; 0 leaves it out
	Pool           string
}

// Attributes returns j as span attributes; nil when Setup turned tracing off, as
// no span would record them (building them is most of what a job's spans cost then).
// Small enough to be inlined, so that the slice, with room for two more attributes,
// stays on the caller's stack when it is passed straight to a Start function.
func (j Job) Attributes() []attribute.KeyValue {
	return appendJob(make([]attribute.KeyValue, 0, 8), j)
}

// appendJob appends j's attributes to kv; nil when Setup turned tracing off.
func appendJob(kv []attribute.KeyValue, j Job) []attribute.KeyValue {
	if a := active.Load(); a != nil && a.off {
		return nil
	}
	if j.Skill != "" {
		kv = append(kv, AttrSkillName.String(j.Skill))
	}
	if j.Version != "" {
		kv = append(kv, AttrSkillVersion.String(j.Version))
	}
	if j.ActivationID != "" {
		kv = append(kv, AttrActivationID.String(j.ActivationID))
	}
	if j.ExecutionID != "" {
		kv = append(kv, AttrExecutionID.String(j.ExecutionID))
	}
	if j.Pool != "" {
		kv = append(kv, AttrPool.String(j.Pool))
	}
	if j.Attempt > 0 {
		kv = append(kv, AttrAttempt.Int(j.Attempt))
	}
	return kv
}

// Message describes the message a messaging span is about.
type Message struct {
	// Destination is the NATS subject; Template, when set, is its low-cardinality
	// form (e.g. "skillbus.jobs.{pool}") and names the span instead.
	Destination, Template string
	// ID is the message id: the CloudEvent id, or Nats-Msg-Id.
	ID string
	// ConsumerGroup is the JetStream durable consumer the message is read by.
	ConsumerGroup string
	// BodySize is the payload size in bytes; 0 leaves it out.
	BodySize int
}

// appendAttrs appends m's messaging attributes for operation op (its
// messaging.operation.type) named opName, then extra.
func (m Message) appendAttrs(kv []attribute.KeyValue, op attribute.KeyValue, opName string, extra []attribute.KeyValue) []attribute.KeyValue {
	kv = append(kv, MessagingSystem, op, semconv.MessagingOperationName(opName))
	if m.Destination != "" {
		kv = append(kv, semconv.MessagingDestinationName(m.Destination))
	}
	if m.Template != "" {
		kv = append(kv, semconv.MessagingDestinationTemplate(m.Template))
	}
	if m.ID != "" {
		kv = append(kv, semconv.MessagingMessageID(m.ID))
	}
	if m.ConsumerGroup != "" {
		kv = append(kv, semconv.MessagingConsumerGroupName(m.ConsumerGroup))
	}
	if m.BodySize > 0 {
		kv = append(kv, semconv.MessagingMessageBodySize(m.BodySize))
	}
	return append(kv, extra...)
}

func (m Message) spanName(op string) string {
	d := m.Template
	if d == "" {
		d = m.Destination
	}
	return spanName(op, d)
}

// startMessage starts the span of operation op (messaging.operation.type) named
// opName on m, of kind kind, with links and attrs after m's own attributes.
func startMessage(ctx context.Context, m Message, kind trace.SpanKind, op attribute.KeyValue, opName string, links []trace.Link, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	b := getAttrs()
	b.kv = m.appendAttrs(b.kv, op, opName, attrs)
	ctx, span := startSpan(ctx, m.spanName(opName), kind, links, b.kv)
	putAttrs(b)
	return ctx, span
}

// active is the tracer Setup installed: nil before Setup (and after Shutdown), when
// the helpers use the global provider, so that a program with its own SDK gets its
// spans; a disabled tracer when Setup turned tracing off, when the helpers return at
// once.
var active atomic.Pointer[activeTracer]

type activeTracer struct {
	off    bool
	tracer trace.Tracer
	// rec records the helpers' spans for Setup's provider; nil leaves them to the
	// SDK (see package spanrec).
	rec *spanrec.Recorder
}

// Off reports whether Setup turned tracing off: no span is recorded, so what only
// names or describes spans need not be built.
func Off() bool {
	a := active.Load()
	return a != nil && a.off
}

// OffSpan reports whether Setup turned tracing off, and then returns the span a
// helper returns instead of starting one: the span already in ctx, which, not
// recording, ends as a no-op, and whose span context (an incoming traceparent)
// Inject still passes on. Helpers built on these (package bustrace) return ctx and
// it at once.
func OffSpan(ctx context.Context) (trace.Span, bool) {
	a := active.Load()
	if a == nil || !a.off {
		return nil, false
	}
	s := trace.SpanFromContext(ctx)
	if s.IsRecording() {
		// A span of some other provider: do not hand it out to be ended twice.
		return noop.Span{}, true
	}
	return s, true
}

// StartPublish starts the PRODUCER span of publishing m ("publish <subject>"), a
// child of the span in ctx. Inject the returned context into the event (Inject
// into bus.Meta, or bustrace's InjectEvent or InjectCE) so consumers continue from it.
func StartPublish(ctx context.Context, m Message, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startMessage(ctx, m, trace.SpanKindProducer, opSend, "publish", nil, attrs)
}

// StartProcess starts the CONSUMER span of processing m ("process <subject>"). ctx
// should carry the message's remote span context (Extract, or bustrace's ExtractMsg), which becomes the parent; links name earlier spans this one follows
// from without being their child (see Link).
func StartProcess(ctx context.Context, m Message, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startMessage(ctx, m, trace.SpanKindConsumer, semconv.MessagingOperationTypeProcess, "process", links, attrs)
}

// StartSettle starts the CLIENT span of settling m: op names how ("ack", "nak",
// "term", "in_progress"), and names the span ("ack <subject>").
func StartSettle(ctx context.Context, m Message, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startMessage(ctx, m, trace.SpanKindClient, semconv.MessagingOperationTypeSettle, op, nil, attrs)
}

// StartRequest starts the CLIENT span of a NATS request that waits for its reply,
// such as a bus tool call ("send <subject>"). Put its context on the request with
// bustrace.InjectHeader.
func StartRequest(ctx context.Context, m Message, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startMessage(ctx, m, trace.SpanKindClient, opSend, "send", nil, attrs)
}

// StartServe starts the SERVER span of answering a NATS request ("process
// <subject>"); ctx should carry the request's context (bustrace.ExtractHeader).
func StartServe(ctx context.Context, m Message, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startMessage(ctx, m, trace.SpanKindServer, semconv.MessagingOperationTypeProcess, "process", nil, attrs)
}

// StartClient starts a CLIENT span named name, for a call to another service over
// a protocol that is not NATS (an MCP tools/call).
func StartClient(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startSpan(ctx, name, trace.SpanKindClient, nil, attrs)
}

// StartStep starts the INTERNAL span of one step of a skill ("step <id>").
func StartStep(ctx context.Context, id, kind string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	b := getAttrs()
	b.kv = append(b.kv, AttrStepID.String(id))
	if kind != "" {
		b.kv = append(b.kv, AttrStepKind.String(kind))
	}
	b.kv = append(b.kv, attrs...)
	ctx, span := startSpan(ctx, spanName("step", id), trace.SpanKindInternal, nil, b.kv)
	putAttrs(b)
	return ctx, span
}

// Start starts an INTERNAL span named name, for work that is not a message or a step
// (routing a trigger, executing a skill).
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	return startSpan(ctx, name, trace.SpanKindInternal, nil, attrs)
}

// Link returns a link to the span traceparent names, with reason in its
// skillbus.link.reason attribute: for a span that follows from another without
// being its child (a redelivered job's earlier attempt; a confirmation answered
// hours after the step that asked ended). ok is false when traceparent is not a
// valid W3C traceparent.
func Link(traceparent, tracestate, reason string, attrs ...attribute.KeyValue) (trace.Link, bool) {
	sc := trace.SpanContextFromContext(Extract(context.Background(), traceparent, tracestate))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	kv := attrs
	if reason != "" {
		kv = append([]attribute.KeyValue{AttrLinkReason.String(reason)}, attrs...)
	}
	return trace.Link{SpanContext: sc, Attributes: kv}, true
}

// LinkSpan returns a link to the span in ctx, with reason; ok is false when ctx
// carries no valid span context.
func LinkSpan(ctx context.Context, reason string, attrs ...attribute.KeyValue) (trace.Link, bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	if reason != "" {
		attrs = append([]attribute.KeyValue{AttrLinkReason.String(reason)}, attrs...)
	}
	return trace.Link{SpanContext: sc, Attributes: attrs}, true
}

// End ends span, first recording err when not nil: the error event, status Error,
// error.type and skillbus.failure.class set to its failure class (retryable, fatal,
// repairable). A cancelled context is recorded as such but is not an error status.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		RecordError(span, err)
	}
	span.End()
}

// RecordError records err on span as End does, without ending it.
func RecordError(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	if errors.Is(err, context.Canceled) {
		span.SetAttributes(semconv.ErrorTypeKey.String("canceled"))
		return
	}
	class := failure.ClassOf(err)
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(string(class)), AttrFailureClass.String(string(class)))
}

// StartPublishMeta starts the PRODUCER span of publishing an event whose trace
// context is *traceparent and *tracestate (the TraceParent and TraceState of the
// bus.Meta it is published with), a child of the span in ctx, and sets them to the
// span, so whoever consumes the event continues from it. They are left alone when
// the span is not recorded. End the span when the publish is acknowledged (or
// failed), or once it is queued on a batch someone else waits for.
func StartPublishMeta(ctx context.Context, m Message, traceparent, tracestate *string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	ctx, span := StartPublish(ctx, m, attrs...)
	if span.IsRecording() {
		*traceparent, *tracestate = Inject(ctx)
	}
	return ctx, span
}

// EndAll ends every span of spans as End does, with the same err.
func EndAll(spans []trace.Span, err error) {
	for _, s := range spans {
		End(s, err)
	}
}
