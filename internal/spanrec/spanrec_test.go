package spanrec_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/skillbus/skillbus/internal/spanrec"
)

// The methods of the SDK's span interfaces that Span implements, as of the SDK
// version in go.mod. The unexported ones are the seals Span gets past by embedding
// a nil ReadOnlySpan (private) and the API's embedded.Span (span).
var (
	readOnlySpan = []string{
		"Attributes", "ChildSpanCount", "DroppedAttributes", "DroppedEvents", "DroppedLinks",
		"EndTime", "Events", "InstrumentationLibrary", "InstrumentationScope", "Links", "Name",
		"Parent", "Resource", "SpanContext", "SpanKind", "StartTime", "Status", "private",
	}
	readWriteSpan = []string{
		"AddEvent", "AddLink", "Attributes", "ChildSpanCount", "DroppedAttributes", "DroppedEvents",
		"DroppedLinks", "End", "EndTime", "Events", "InstrumentationLibrary", "InstrumentationScope",
		"IsRecording", "Links", "Name", "Parent", "RecordError", "Resource", "SetAttributes",
		"SetName", "SetStatus", "SpanContext", "SpanKind", "StartTime", "Status", "TracerProvider", "private", "span",
	}
)

func methods(t reflect.Type) []string {
	var names []string
	for i := range t.NumMethod() {
		names = append(names, t.Method(i).Name)
	}
	slices.Sort(names)
	return names
}

// TestSDKInterfacesUnchanged fails when an SDK release changes the interfaces
// Span implements: a method added to ReadOnlySpan would compile (the embedded nil
// interface answers for it) and panic in the exporter. Implement the new method
// on Span, then update the lists above.
func TestSDKInterfacesUnchanged(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  reflect.Type
		want []string
	}{
		{"ReadOnlySpan", reflect.TypeFor[sdktrace.ReadOnlySpan](), readOnlySpan},
		{"ReadWriteSpan", reflect.TypeFor[sdktrace.ReadWriteSpan](), readWriteSpan},
	} {
		if got := methods(c.typ); !slices.Equal(got, c.want) {
			t.Errorf("sdktrace.%s has methods\n%v\nwant\n%v\nSpan must implement every exported one itself", c.name, got, c.want)
		}
	}
}

type ids struct{}

func (ids) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{1}, trace.SpanID{2}
}
func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return trace.SpanID{3} }

func recorder(t *testing.T) (*spanrec.Recorder, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	r := spanrec.New(spanrec.Config{
		Provider: noop.NewTracerProvider(), Sampler: sdktrace.AlwaysSample(), IDs: ids{},
		Processor: sdktrace.NewSimpleSpanProcessor(exp), Limits: sdktrace.NewSpanLimits(),
		Scope: instrumentation.Scope{Name: "test"},
	})
	if r == nil {
		t.Fatal("New returned no recorder for the default limits")
	}
	return r, exp
}

// TestSpanImplementsReadOnlySpan calls every exported method of the SDK's
// ReadOnlySpan on an ended Span: none may reach the nil interface Span embeds.
func TestSpanImplementsReadOnlySpan(t *testing.T) {
	r, exp := recorder(t)
	_, s := r.Start(context.Background(), "x", trace.SpanKindInternal, nil, []attribute.KeyValue{attribute.String("k", "v")}, trace.SpanID{})
	s.End()
	v := reflect.ValueOf(s)
	it := reflect.TypeFor[sdktrace.ReadOnlySpan]()
	for i := range it.NumMethod() {
		m := it.Method(i)
		if !m.IsExported() {
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("ReadOnlySpan.%s is not implemented by Span: %v", m.Name, p)
				}
			}()
			v.MethodByName(m.Name).Call(nil)
		}()
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans exported, want 1", n)
	}
}

// TestStartIDs: a root span takes the generator's trace and span IDs, a child its
// parent's trace ID, and a span ID given is kept.
func TestStartIDs(t *testing.T) {
	r, _ := recorder(t)
	ctx, root := r.Start(context.Background(), "root", trace.SpanKindInternal, nil, nil, trace.SpanID{})
	if sc := root.SpanContext(); sc.TraceID() != (trace.TraceID{1}) || sc.SpanID() != (trace.SpanID{2}) || !sc.IsSampled() {
		t.Errorf("root span context %v", sc)
	}
	_, child := r.Start(ctx, "child", trace.SpanKindInternal, nil, nil, trace.SpanID{})
	if sc := child.SpanContext(); sc.TraceID() != (trace.TraceID{1}) || sc.SpanID() != (trace.SpanID{3}) {
		t.Errorf("child span context %v", sc)
	}
	_, given := r.Start(ctx, "given", trace.SpanKindConsumer, nil, nil, trace.SpanID{9})
	if sc := given.SpanContext(); sc.SpanID() != (trace.SpanID{9}) {
		t.Errorf("span with a given ID has context %v", sc)
	}
	_, rootGiven := r.Start(context.Background(), "root given", trace.SpanKindConsumer, nil, nil, trace.SpanID{8})
	if sc := rootGiven.SpanContext(); sc.TraceID() != (trace.TraceID{1}) || sc.SpanID() != (trace.SpanID{8}) {
		t.Errorf("root span with a given ID has context %v", sc)
	}
}
