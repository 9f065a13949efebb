package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// How the helpers start a span at little cost. A traced execution records five
// spans or more, and at 100% sampling what they allocate is most of what tracing
// costs: every allocation saved here is saved five times an execution.

// attrBuf is a slice a span's attributes are built in. The API copies the
// attributes given to a span (trace.WithAttributes appends them to the start
// configuration; the SDK's span appends them to its own slice), so the buffer goes
// back to attrPool once the span has started.
type attrBuf struct{ kv []attribute.KeyValue }

var attrPool = sync.Pool{New: func() any { return &attrBuf{kv: make([]attribute.KeyValue, 0, 24)} }}

func getAttrs() *attrBuf { return attrPool.Get().(*attrBuf) }

func putAttrs(b *attrBuf) {
	if cap(b.kv) > 64 {
		return // an outsized one: let it go
	}
	clear(b.kv) // drop the strings it points at
	b.kv = b.kv[:0]
	attrPool.Put(b)
}

// kindOnly holds the start options of a span with no links, one slice per kind:
// shared and never written, they spare every span its own.
var kindOnly = func() (o [trace.SpanKindConsumer + 1][]trace.SpanStartOption) {
	for k := range o {
		o[k] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKind(k))}
	}
	return o
}()

// startSpan starts a span named name of kind kind with links and the attributes
// kv, which it does not keep.
//
// Under Setup's provider the recorder records it (see package spanrec). Where it does not
// (a length limit on attribute values), the SDK does, and the attributes are set
// right after the span starts rather than given to Start: Setup's samplers (those
// OTEL_TRACES_SAMPLER names) decide on the trace id and the parent alone, and the
// span records the same attributes with one copy of them and two allocations fewer.
// Under another provider, whose sampler may read them, they are given to Start.
func startSpan(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, kv []attribute.KeyValue) (context.Context, trace.Span) {
	a := active.Load()
	if a == nil {
		opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(kv...)}
		if len(links) > 0 {
			opts = append(opts, trace.WithLinks(links...))
		}
		return otel.Tracer(ScopeName).Start(ctx, name, opts...)
	}
	if a.rec != nil {
		return a.rec.Start(ctx, name, kind, links, kv, trace.SpanID{})
	}
	var opts []trace.SpanStartOption
	if len(links) > 0 {
		opts = []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithLinks(links...)}
	} else if int(kind) < len(kindOnly) {
		opts = kindOnly[kind]
	} else {
		opts = []trace.SpanStartOption{trace.WithSpanKind(kind)}
	}
	ctx, span := a.tracer.Start(ctx, name, opts...)
	if len(kv) > 0 {
		span.SetAttributes(kv...)
	}
	return ctx, span
}

// spanName returns op+" "+dest (op alone when dest is empty), from a cache: span
// names are made of an operation and a subject template or a step id, few of them
// in a process, and one string each spares every span a concatenation.
func spanName(op, dest string) string {
	if dest == "" {
		return op
	}
	k := nameKey{op, dest}
	m := names.Load()
	if m != nil {
		if n, ok := (*m)[k]; ok {
			return n
		}
	}
	n := op + " " + dest
	if m == nil || len(*m) < maxNames {
		names.add(k, n)
	}
	return n
}

type nameKey struct{ op, dest string }

// nameCache maps (operation, destination) to a span name. Readers load the map
// without a lock; a new name copies it. It stops growing at maxNames, past which
// names are built each time: a process whose subjects are countless (names made
// of them are a mistake the templates are there to avoid) costs no more memory.
type nameCache struct {
	atomic.Pointer[map[nameKey]string]
	mu sync.Mutex
}

const maxNames = 1024

var names nameCache

func (c *nameCache) add(k nameKey, n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.Load()
	if old != nil && len(*old) >= maxNames {
		return
	}
	m := make(map[nameKey]string, 1)
	if old != nil {
		m = make(map[nameKey]string, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = n
	c.Store(&m)
}
