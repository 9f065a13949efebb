package telemetry

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Deliveries of a job, and the links between them.
//
// A redelivered job (its worker died, or a retryable failure handed it back) should
// link to the span of the attempt before it. Where would that span's context be
// kept? Not in the job: JetStream redelivers the stored message unchanged. Not in a
// record the first attempt writes: the first delivery of almost every job writes
// nothing before it runs (no claim, no checkpoint — the fast path), and a worker
// killed mid-run writes nothing after. So nothing is kept: each delivery's CONSUMER
// span gets a span ID derived from what every delivery of the job knows — its
// execution id, how many confirmation answers it carries (a resumed job is a new
// message), whether it was published again as recovered, and its delivery count —
// and a later delivery computes the ID of the one before and links to it, in the
// trace the job carries. The link of a retry reaches a span that ended and was
// exported; the link of a delivery after a crash names the span its dead worker
// never got to export, and the spans that worker did export (steps it finished)
// hang under that same ID.
//
// The derived IDs are used only under Setup, whose tracer provider generates them;
// under another provider a delivery's span gets a random ID and no link.

// Delivery identifies one delivery of a job.
type Delivery struct {
	ExecutionID string
	// Resumes is how many confirmation answers the job carries: each resumed job
	// is a message of its own, whose deliveries count from 1 again.
	Resumes int
	// Recovered marks a job published again by whoever found its first publish
	// unfinished (the Skillbus-Recovered header); it replaces the job before it.
	Recovered bool
	// Attempt is the delivery count, 1 for the first delivery.
	Attempt int
	// Template names the destination in the span's name instead of the subject,
	// whose tokens (an activation id) would make span names countless.
	Template string
	// ID, TraceParent and TraceState are the job's CloudEvent id and trace context
	// as its reader decoded them. A job in structured mode carries them in its
	// JSON, not in headers; given here, bustrace.StartDelivery does not look for
	// them in the message.
	ID, TraceParent, TraceState string
}

// SpanID is the span ID of the delivery's CONSUMER span.
func (d Delivery) SpanID() trace.SpanID {
	h := fnv.New64a()
	h.Write([]byte("skillbus.delivery\x00"))
	h.Write([]byte(d.ExecutionID))
	var b [17]byte
	binary.BigEndian.PutUint64(b[0:], uint64(d.Resumes))
	binary.BigEndian.PutUint64(b[8:], uint64(d.Attempt))
	if d.Recovered {
		b[16] = 1
	}
	h.Write(b[:])
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64()|1) // never the invalid zero ID
	return id
}

// Previous returns the delivery this one follows: the one before it of the same
// message, or, for the first delivery of a recovered job, the first delivery of the
// job it replaces (which may never have happened). ok is false for a first delivery.
func (d Delivery) Previous() (prev Delivery, ok bool) {
	switch {
	case d.Attempt > 1:
		d.Attempt--
		return d, true
	case d.Recovered:
		d.Recovered, d.Attempt = false, 1
		return d, true
	}
	return Delivery{}, false
}

type spanIDKey struct{}

// withSpanID asks the ID generator Setup installs for span ID id for the next span
// started with ctx.
func withSpanID(ctx context.Context, id trace.SpanID) context.Context {
	return context.WithValue(ctx, spanIDKey{}, id)
}

// idGenerator generates random IDs, except a span ID that withSpanID asked for.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid := newTraceID()
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

func newTraceID() trace.TraceID {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(spanIDKey{}).(trace.SpanID); ok && id.IsValid() {
		return id
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// derivedIDs reports whether spans are recorded by Setup's provider, the one that
// honours withSpanID.
func derivedIDs() bool {
	a := active.Load()
	return a != nil && !a.off
}

// StartDelivery starts the CONSUMER span of a job's delivery d of message m, with
// the span ID d derives. ctx carries the trace the job carries; links are those
// the message names itself (a Skillbus-Link header, see
// bustrace.StartPublishLinked), to which it adds the delivery before d (see
// Delivery.Previous) with reason LinkRedelivery (LinkRecovered for a recovered
// job's first delivery). d.Template, when set, names the span. Its attributes
// include d.Attempt. Package bustrace's StartDelivery calls it with a message read
// from the bus.
func StartDelivery(ctx context.Context, m Message, d Delivery, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s, ok := OffSpan(ctx); ok {
		return ctx, s
	}
	hasLink := len(links) > 0
	if derivedIDs() {
		parent := trace.SpanContextFromContext(ctx)
		// The first delivery of a released job replaces no delivery in this trace:
		// the header's link names what it replaces.
		if prev, ok := d.Previous(); ok && parent.IsValid() && !(hasLink && d.Attempt == 1) {
			reason := LinkRedelivery
			if d.Attempt == 1 {
				reason = LinkRecovered
			}
			links = append(links[:len(links):len(links)], trace.Link{
				SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
					TraceID: parent.TraceID(), SpanID: prev.SpanID(), TraceFlags: parent.TraceFlags(), Remote: true,
				}),
				Attributes: []attribute.KeyValue{AttrLinkReason.String(reason), AttrAttempt.Int(prev.Attempt)},
			})
		}
	}
	if d.Template != "" {
		m.Template = d.Template
	}
	var span trace.Span
	if a := active.Load(); a != nil && a.rec != nil {
		// The recorder takes the span ID as it is: no context to carry the request.
		b := getAttrs()
		b.kv = m.appendAttrs(b.kv, semconv.MessagingOperationTypeProcess, "process", attrs)
		ctx, span = a.rec.Start(ctx, m.spanName("process"), trace.SpanKindConsumer, links, b.kv, d.SpanID())
		putAttrs(b)
	} else {
		sctx := ctx
		if derivedIDs() {
			sctx = withSpanID(ctx, d.SpanID())
		}
		_, span = StartProcess(sctx, m, links, attrs...)
		// The span's children get random IDs: ctx, not sctx, carries it on.
		ctx = trace.ContextWithSpan(ctx, span)
	}
	if d.Recovered && span.IsRecording() {
		span.SetAttributes(AttrRecovered.Bool(true))
	}
	return ctx, span
}
