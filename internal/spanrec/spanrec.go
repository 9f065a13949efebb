// Package spanrec records the spans skillbus's telemetry helpers start, in place
// of the OpenTelemetry SDK's span, at a fraction of its cost.
//
// Its Span implements the SDK's sdktrace.ReadOnlySpan, an interface with an
// unexported method only the SDK may implement: Span embeds a nil ReadOnlySpan for
// it, so a method a new SDK release adds to the interface would compile and panic
// when the exporter calls it. TestSDKInterfacesUnchanged pins the interfaces'
// method sets; a test failure there after an SDK upgrade means Span needs the new
// methods. The SDK version is pinned in go.mod alone.
package spanrec

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Recording skillbus's own spans.
//
// At 100% sampling, what the SDK's span allocates is most of what tracing costs a
// skillbus process: the span, its own copy of the attributes, a map to deduplicate
// them when it ends, a snapshot of it all for the batch processor — five or more
// times an execution, and then the garbage collector's work, which in one process
// slows the NATS server too. The spans the helpers start are simpler: their
// attributes are built without duplicates, they are ended once, and nobody reads
// them before they end. So, under Setup's provider, a recorder records them itself:
// it samples with the provider's sampler, takes IDs from its ID generator, applies
// the span limits the SDK reads from the environment, and, at End, hands the span —
// frozen from then on, and so its own snapshot — to the provider's batch processor,
// which exports it with every other span. What is exported is what the SDK's span
// would have exported (TestRecorderExportsWhatTheSDKWould), but for a value of the
// composite kinds (attribute.SLICE, attribute.MAP), which no skillbus span carries:
// it is kept as given, where the SDK would drop keys repeated inside it. Spans
// started through the provider itself (an instrumented HTTP client, a program's
// own) are the SDK's as ever; the two nest either way.

// Config is what a Recorder records for: a provider's sampler, ID generator,
// resource, span limits and its only span processor.
type Config struct {
	Provider  trace.TracerProvider
	Sampler   sdktrace.Sampler
	IDs       sdktrace.IDGenerator
	Resource  *resource.Resource
	Processor sdktrace.SpanProcessor
	Limits    sdktrace.SpanLimits
	// Scope is the instrumentation scope of every span recorded.
	Scope instrumentation.Scope
}

// Recorder records spans for one tracer provider.
type Recorder struct {
	provider trace.TracerProvider
	sampler  sdktrace.Sampler
	ids      sdktrace.IDGenerator
	limits   sdktrace.SpanLimits
	resource *resource.Resource
	proc     sdktrace.SpanProcessor
	scope    instrumentation.Scope
}

// New returns a recorder for c; nil when c.Limits ask for what it does not do (cut
// attribute values to a length), which leaves the spans to the SDK.
func New(c Config) *Recorder {
	if c.Limits.AttributeValueLengthLimit >= 0 {
		return nil
	}
	return &Recorder{provider: c.Provider, sampler: c.Sampler, ids: c.IDs, limits: c.Limits,
		resource: c.Resource, proc: c.Processor, scope: c.Scope}
}

// Start starts a span named name of kind kind with links and the attributes kv,
// which it does not keep, as the provider's tracer would, but with span ID sid
// when valid (a derived one); an invalid sid asks the ID generator for one.
func (r *Recorder) Start(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, kv []attribute.KeyValue, sid trace.SpanID) (context.Context, trace.Span) {
	psc := trace.SpanContextFromContext(ctx)
	tid := psc.TraceID()
	if !tid.IsValid() {
		var gen trace.SpanID
		tid, gen = r.ids.NewIDs(ctx)
		if !sid.IsValid() {
			sid = gen
		}
	} else if !sid.IsValid() {
		sid = r.ids.NewSpanID(ctx, tid)
	}
	sr := r.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: ctx, TraceID: tid, Name: name, Kind: kind, Attributes: kv, Links: links,
	})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if sr.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: sr.Tracestate})
	if sr.Decision == sdktrace.Drop {
		s := &unrecorded{sc: sc, tp: r.provider}
		return trace.ContextWithSpan(ctx, s), s
	}
	room := len(sr.Attributes) + len(kv)
	if kind == trace.SpanKindConsumer {
		// A consumer's handler records how it ended (the router: its outcome and
		// how it routed; a failure: its error type and class), most often two more.
		room += 2
	}
	s := &Span{
		r: r, name: name, kind: trace.ValidateSpanKind(kind), sc: sc, parent: psc, start: time.Now(),
		attrs: make([]attribute.KeyValue, 0, room),
	}
	s.setAttributes(sr.Attributes)
	s.setAttributes(kv)
	for _, l := range links {
		s.addLink(l)
	}
	r.proc.OnStart(ctx, s)
	return trace.ContextWithSpan(ctx, s), s
}

// Span is a recording span, and once ended, the read-only span exported.
type Span struct {
	embedded.Span
	// The unexported method of the interface, which only the SDK may implement;
	// every other method is Span's own (see TestSDKInterfacesUnchanged).
	sdktrace.ReadOnlySpan

	r      *Recorder
	mu     sync.Mutex
	ended  bool
	name   string
	kind   trace.SpanKind
	sc     trace.SpanContext
	parent trace.SpanContext
	start  time.Time
	end    time.Time
	status sdktrace.Status

	attrs         []attribute.KeyValue
	keys          uint64 // keyBit of every key in attrs
	links         []sdktrace.Link
	events        []sdktrace.Event
	droppedAttrs  int
	droppedLinks  int
	droppedEvents int
}

var _ sdktrace.ReadWriteSpan = (*Span)(nil)

// setAttributes adds kv as the SDK's span does: invalid ones dropped, a key set
// again keeping its place and taking the new value, new keys past the count limit
// dropped. The caller holds s.mu or owns s.
func (s *Span) setAttributes(kv []attribute.KeyValue) {
	limit := s.r.limits.AttributeCountLimit
next:
	for _, a := range kv {
		if !a.Valid() {
			s.droppedAttrs++
			continue
		}
		// Keys are rarely set twice: a bit per key's sketch tells most new keys
		// from the ones the span has without comparing them all.
		bit := keyBit(a.Key)
		if s.keys&bit != 0 {
			for i := range s.attrs {
				if s.attrs[i].Key == a.Key {
					s.attrs[i] = a
					continue next
				}
			}
		}
		if limit >= 0 && len(s.attrs) >= limit {
			s.droppedAttrs++
			continue
		}
		s.attrs = append(s.attrs, a)
		s.keys |= bit
	}
}

// keyBit is one of 64 bits for k: keys with different bits differ.
func keyBit(k attribute.Key) uint64 {
	n := len(k)
	h := uint(n) * 0x9e3779b1
	if n > 0 {
		h ^= uint(k[n-1])*31 + uint(k[n/2])*131 + uint(k[0])
	}
	return 1 << (h % 64)
}

// capped returns at most n of kv (n < 0: all), as the SDK keeps the attributes of
// an event or a link, and how many it dropped.
func capped(kv []attribute.KeyValue, n int) ([]attribute.KeyValue, int) {
	if n >= 0 && len(kv) > n {
		return kv[:n:n], len(kv) - n
	}
	return kv, 0
}

func (s *Span) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	attrs, dropped := capped(l.Attributes, s.r.limits.AttributePerLinkCountLimit)
	sl := sdktrace.Link{SpanContext: l.SpanContext, Attributes: attrs, DroppedAttributeCount: dropped}
	s.links, s.droppedLinks = evict(s.links, sl, s.r.limits.LinkCountLimit, s.droppedLinks)
}

func (s *Span) addEvent(name string, opts ...trace.EventOption) {
	c := trace.NewEventConfig(opts...)
	attrs, dropped := capped(c.Attributes(), s.r.limits.AttributePerEventCountLimit)
	e := sdktrace.Event{Name: name, Attributes: attrs, DroppedAttributeCount: dropped, Time: c.Timestamp()}
	s.events, s.droppedEvents = evict(s.events, e, s.r.limits.EventCountLimit, s.droppedEvents)
}

// evict appends v to q, dropping the oldest when q holds n already (n < 0: no limit).
func evict[T any](q []T, v T, n, dropped int) ([]T, int) {
	switch {
	case n == 0:
		return q, dropped + 1
	case n > 0 && len(q) >= n:
		copy(q, q[1:])
		q[len(q)-1] = v
		return q, dropped + 1
	}
	return append(q, v), dropped
}

func (s *Span) End(opts ...trace.SpanEndOption) {
	et := s.start.Add(time.Since(s.start)) // on the monotonic clock, as the SDK
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if p := recover(); p != nil {
		// A span ended by a deferred End while its function panics: record the
		// panic, as the SDK does, and let it go on.
		defer panic(p)
		s.addEvent(semconv.ExceptionEventName, trace.WithAttributes(
			semconv.ExceptionType(typeStr(p)), semconv.ExceptionMessage(fmt.Sprint(p))))
	}
	if c := trace.NewSpanEndConfig(opts...); !c.Timestamp().IsZero() {
		et = c.Timestamp()
	}
	s.end, s.ended = et, true
	s.mu.Unlock()
	s.r.proc.OnEnd(s)
}

func (s *Span) AddEvent(name string, opts ...trace.EventOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(name, opts...)
	}
}

func (s *Span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addLink(l)
	}
}

func (s *Span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	opts = append(opts, trace.WithAttributes(semconv.ExceptionType(typeStr(err)), semconv.ExceptionMessage(err.Error())))
	if c := trace.NewEventConfig(opts...); c.StackTrace() {
		buf := make([]byte, 2048)
		opts = append(opts, trace.WithAttributes(semconv.ExceptionStacktrace(string(buf[:runtime.Stack(buf, false)]))))
	}
	s.AddEvent(semconv.ExceptionEventName, opts...)
}

// typeStr names the type of v as the SDK does in exception.type.
func typeStr(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

func (s *Span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.status.Code > code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

func (s *Span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setAttributes(kv)
	}
}

func (s *Span) TracerProvider() trace.TracerProvider { return s.r.provider }

// The read-only span, read by the processor and the exporter once s has ended
// and nothing changes it any more.

func (s *Span) Name() string                                    { return s.name }
func (s *Span) SpanContext() trace.SpanContext                  { return s.sc }
func (s *Span) Parent() trace.SpanContext                       { return s.parent }
func (s *Span) SpanKind() trace.SpanKind                        { return s.kind }
func (s *Span) StartTime() time.Time                            { return s.start }
func (s *Span) EndTime() time.Time                              { return s.end }
func (s *Span) Attributes() []attribute.KeyValue                { return s.attrs }
func (s *Span) Links() []sdktrace.Link                          { return s.links }
func (s *Span) Events() []sdktrace.Event                        { return s.events }
func (s *Span) Status() sdktrace.Status                         { return s.status }
func (s *Span) InstrumentationScope() instrumentation.Scope     { return s.r.scope }
func (s *Span) Resource() *resource.Resource                    { return s.r.resource }
func (s *Span) DroppedAttributes() int                          { return s.droppedAttrs }
func (s *Span) DroppedLinks() int                               { return s.droppedLinks }
func (s *Span) DroppedEvents() int                              { return s.droppedEvents }
func (s *Span) ChildSpanCount() int                             { return 0 }
func (s *Span) InstrumentationLibrary() instrumentation.Library { return s.r.scope } //nolint:staticcheck // part of ReadOnlySpan

// unrecorded is a span the sampler dropped: it carries its context on, records
// nothing, and names the provider, as the SDK's does.
type unrecorded struct {
	noop.Span
	sc trace.SpanContext
	tp trace.TracerProvider
}

func (u *unrecorded) SpanContext() trace.SpanContext       { return u.sc }
func (u *unrecorded) TracerProvider() trace.TracerProvider { return u.tp }
