package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/spanrec"
)

// recording sets up Setup's provider exporting to an in-memory exporter, the
// environment read as limits says.
func recording(t *testing.T, limits map[string]string) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	for k, v := range limits {
		t.Setenv(k, v) // the SDK reads span limits from the process environment
	}
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Config{Getenv: func(string) string { return "" }, SpanExporter: keep{exp}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
	if tel.rec == nil {
		t.Fatal("Setup left the helpers' spans to the SDK")
	}
	return tel, exp
}

// TestSpansSDKLeavesTheHelpersSpansToTheSDK: SKILLBUS_OTEL_SPANS=sdk records every
// span with the SDK; by default the helpers' spans are the recorder's.
func TestSpansSDKLeavesTheHelpersSpansToTheSDK(t *testing.T) {
	for _, v := range []string{"", "skillbus", "SDK"} {
		tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
		exp := tracetest.NewInMemoryExporter()
		tel, err := Setup(context.Background(), Config{SpanExporter: exp,
			Getenv: func(k string) string { return map[string]string{EnvSpans: v}[k] }})
		if err != nil {
			t.Fatal(err)
		}
		_, s := StartPublish(context.Background(), Message{Destination: "x"})
		_, recorded := s.(*spanrec.Span)
		s.End()
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
		if want := v != "SDK"; recorded != want {
			t.Errorf("%s=%q: recorded by skillbus %v, want %v", EnvSpans, v, recorded, want)
		}
	}
}

// keep keeps the spans past Shutdown, which the in-memory exporter forgets.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

// TestRecorderExportsWhatTheSDKWould does the same to a span the SDK records and to
// one the recorder records — duplicate and invalid attributes, links, events, an
// error, statuses, a new name, changes after End — and compares what is exported,
// with the SDK's default span limits and with tight ones from the environment.
func TestRecorderExportsWhatTheSDKWould(t *testing.T) {
	for name, limits := range map[string]map[string]string{
		"default limits": nil,
		"tight limits": {
			"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "4", "OTEL_SPAN_EVENT_COUNT_LIMIT": "2", "OTEL_SPAN_LINK_COUNT_LIMIT": "1",
			"OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "1", "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT": "1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			tel, exp := recording(t, limits)
			parent := Extract(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "congo=t61rcWkgMzE")
			other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
			third := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}})

			type startFunc func(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, kv []attribute.KeyValue) (context.Context, trace.Span)
			do := func(start startFunc) {
				links := []trace.Link{
					{SpanContext: other, Attributes: []attribute.KeyValue{AttrLinkReason.String("a"), AttrLinkReason.String("b"), AttrAttempt.Int(1)}},
					{},                   // invalid, no attributes: ignored
					{SpanContext: third}, // over a link limit of 1: the first goes
				}
				kv := []attribute.KeyValue{MessagingSystem, AttrSkillName.String("one"), {}, AttrSkillName.String("two"), AttrPool.String("p"), AttrAttempt.Int(3)}
				_, s := start(parent, "process skillbus.jobs.{pool}", trace.SpanKindConsumer, links, kv)
				s.SetAttributes(AttrOutcome.String("a"), AttrSkillName.String("three"), AttrOutcome.String("b"), AttrRouteScore.Float64(0.5))
				s.SetStatus(codes.Error, "boom")
				s.SetStatus(codes.Unset, "ignored")
				s.RecordError(errors.New("first"))
				s.AddEvent("retry", trace.WithAttributes(attribute.String("k", "v"), attribute.String("k", "w"), attribute.Int("n", 1)))
				s.RecordError(nil)
				s.AddLink(trace.Link{SpanContext: other})
				s.SetName("process renamed")
				s.End()
				s.SetAttributes(AttrOutcome.String("after end"))
				s.SetStatus(codes.Ok, "")
				s.AddEvent("after end")
				s.End()
			}
			do(func(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, kv []attribute.KeyValue) (context.Context, trace.Span) {
				return tel.Tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithLinks(links...), trace.WithAttributes(kv...))
			})
			do(func(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link, kv []attribute.KeyValue) (context.Context, trace.Span) {
				return tel.rec.Start(ctx, name, kind, links, kv, trace.SpanID{})
			})
			if err := tel.tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			if len(spans) != 2 {
				t.Fatalf("%d spans exported, want 2", len(spans))
			}
			for i := range spans {
				s := &spans[i]
				if !s.SpanContext.IsValid() || s.SpanContext.TraceID() != trace.SpanContextFromContext(parent).TraceID() ||
					s.StartTime.IsZero() || s.EndTime.Before(s.StartTime) || s.Resource == nil {
					t.Errorf("span %d: context %v, start %v, end %v, resource %v", i, s.SpanContext, s.StartTime, s.EndTime, s.Resource)
				}
				// What differs by nature: the span's own ID, the clock, and the
				// children the SDK counts (which OTLP does not carry).
				s.SpanContext = s.SpanContext.WithSpanID(trace.SpanID{})
				s.StartTime, s.EndTime, s.ChildSpanCount = time.Time{}, time.Time{}, 0
				for j := range s.Events {
					s.Events[j].Time = time.Time{}
				}
			}
			opts := cmp.Options{
				cmp.Comparer(func(a, b trace.SpanContext) bool { return a.Equal(b) }),
				cmp.Comparer(func(a, b attribute.Value) bool { return a == b }),
				cmp.Comparer(func(a, b *resource.Resource) bool { return a.Equal(b) }),
				cmp.Comparer(func(a, b attribute.Set) bool { return a.Equals(&b) }),
			}
			if d := cmp.Diff(spans[0], spans[1], opts); d != "" {
				t.Errorf("recorded span differs from the SDK's (-sdk +recorder):\n%s", d)
			}
		})
	}
}

// TestRecorderUnsampled: a span the sampler drops records nothing and reaches no
// exporter, but carries a valid, unsampled context on, as the SDK's does.
func TestRecorderUnsampled(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Config{Getenv: func(k string) string { return map[string]string{EnvSampler: "always_off"}[k] }, SpanExporter: keep{exp}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	}()
	ctx, s := StartStep(context.Background(), "fetch", "tool")
	sc := trace.SpanContextFromContext(ctx)
	if s.IsRecording() || !sc.IsValid() || sc.IsSampled() || s.TracerProvider() != tel.TracerProvider {
		t.Errorf("unsampled span: recording %v, context %v sampled %v, provider %T", s.IsRecording(), sc, sc.IsSampled(), s.TracerProvider())
	}
	s.SetAttributes(AttrOutcome.String("x"))
	End(s, errors.New("boom"))
	if err := tel.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d unsampled spans exported", n)
	}
}

// TestValueLengthLimitLeavesSpansToTheSDK: with attribute values cut to a length,
// which the recorder does not do, the SDK records the helpers' spans, with their
// attributes (set after the span starts) cut as the limit says.
func TestValueLengthLimitLeavesSpansToTheSDK(t *testing.T) {
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5")
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Config{Getenv: func(string) string { return "" }, SpanExporter: keep{exp}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		tel.Shutdown(context.Background())
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	}()
	if tel.rec != nil {
		t.Fatal("the recorder records spans whose attribute values must be cut")
	}
	_, s := StartPublish(context.Background(), Message{Destination: "skillbus.jobs.default", ID: "x1.job"}, AttrSkillName.String("hello-world"))
	s.End()
	// A delivery's span still gets the ID its delivery derives.
	d := Delivery{ExecutionID: "x1", Attempt: 1}
	job := Extract(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "")
	_, ds := StartDelivery(job, Message{Destination: "skillbus.jobs.default", ConsumerGroup: "worker"}, d, nil)
	ds.End()
	if err := tel.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2", len(spans))
	}
	if got := spans[1].SpanContext.SpanID(); got != d.SpanID() {
		t.Errorf("the delivery's span has ID %s, not the derived %s", got, d.SpanID())
	}
	got := map[attribute.Key]string{}
	for _, kv := range spans[0].Attributes {
		got[kv.Key] = kv.Value.Emit()
	}
	if got[AttrSkillName] != "hello" || got["messaging.system"] != "nats" || got["messaging.message.id"] != "x1.jo" {
		t.Errorf("attributes %v", got)
	}
}
