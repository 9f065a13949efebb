// Package otlptest is an OTLP/HTTP trace receiver for tests: a local HTTP server
// that decodes the protobuf export requests of real OTLP exporters (in this process
// or in child processes pointed at it with OTEL_EXPORTER_OTLP_ENDPOINT) and lets a
// test wait for spans and assert their parents and links.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: ids in lowercase hex, attributes as Go
// values (string, int64, float64, bool, []any).
type Span struct {
	Service      string // the service.name of its resource
	Scope        string
	TraceID      string
	SpanID       string
	ParentSpanID string // "" for a root span
	Name         string
	Kind         tracepb.Span_SpanKind
	Attrs        map[string]any
	Links        []Link
	Events       []string // event names ("exception" for a recorded error)
	StatusCode   tracepb.Status_StatusCode
	StatusMsg    string
	Start, End   time.Time
}

// Link is a span link.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]any
}

// String is a one-line description, for failure messages.
func (s Span) String() string {
	return fmt.Sprintf("%s %q [%s] trace=%s span=%s parent=%s links=%d", s.Service, s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, len(s.Links))
}

// Receiver receives OTLP/HTTP trace exports.
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
	ch    chan struct{} // closed and replaced on every export
	errs  []error
}

// Start starts a receiver, closed when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{ch: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.errs {
			t.Errorf("otlptest: %v", err)
		}
	})
	return r
}

// Endpoint is the base URL to set as OTEL_EXPORTER_OTLP_ENDPOINT (with the
// http/protobuf protocol); traces go to Endpoint()+"/v1/traces".
func (r *Receiver) Endpoint() string { return r.srv.URL }

// Env returns the environment that points a skillbus process at r, as KEY=VALUE.
func (r *Receiver) Env(service string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_BSP_SCHEDULE_DELAY=50",
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	spans, code, err := Decode(req)
	if err != nil {
		if code != http.StatusNotFound {
			r.fail(err)
		}
		http.Error(w, err.Error(), code)
		return
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	close(r.ch)
	r.ch = make(chan struct{})
	r.mu.Unlock()
	Respond(w)
}

// Decode reads the spans of an OTLP/HTTP protobuf export request (POST
// /v1/traces, gzipped or not); on an error it also returns the HTTP status to
// answer with. `skillbus traces` serves it outside tests.
func Decode(req *http.Request) ([]Span, int, error) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		return nil, http.StatusNotFound, fmt.Errorf("only POST /v1/traces")
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err)
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q, want application/x-protobuf (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)", ct)
	}
	var ex collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decoding an export request: %w", err)
	}
	return flatten(&ex), http.StatusOK, nil
}

// Respond answers an export request that was read.
func Respond(w http.ResponseWriter) {
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Wait waits until cond holds for the spans received, or fails the test after
// timeout with the spans it has. It returns those spans.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans := slices.Clone(r.spans)
		ch := r.ch
		r.mu.Unlock()
		if cond(spans) {
			return spans
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("otlptest: no %s within %v; received:\n%s", what, timeout, Tree(spans))
			return nil
		}
	}
}

// WaitSpans waits until a span named each of names has arrived (one each at
// least) and returns all spans.
func (r *Receiver) WaitSpans(t testing.TB, timeout time.Duration, names ...string) []Span {
	t.Helper()
	return r.Wait(t, timeout, "spans "+strings.Join(names, ", "), func(spans []Span) bool {
		for _, n := range names {
			if _, ok := Find(spans, n); !ok {
				return false
			}
		}
		return true
	})
}

// Find returns the first span named name.
func Find(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}

// Must returns the first span named name or fails the test.
func Must(t testing.TB, spans []Span, name string) Span {
	t.Helper()
	s, ok := Find(spans, name)
	if !ok {
		t.Fatalf("otlptest: no span %q among:\n%s", name, Tree(spans))
	}
	return s
}

// InTrace returns the spans of one trace.
func InTrace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// AssertChild fails the test unless child is a child of parent, in its trace.
func AssertChild(t testing.TB, parent, child Span) {
	t.Helper()
	if child.TraceID != parent.TraceID || child.ParentSpanID != parent.SpanID {
		t.Errorf("otlptest: %s\n  is not a child of %s", child, parent)
	}
}

// AssertLinked fails the test unless span links to target; it returns the link.
func AssertLinked(t testing.TB, span, target Span) Link {
	t.Helper()
	for _, l := range span.Links {
		if l.TraceID == target.TraceID && l.SpanID == target.SpanID {
			return l
		}
	}
	t.Errorf("otlptest: %s\n  has no link to %s (links %v)", span, target, span.Links)
	return Link{}
}

// Tree renders spans as indented trees, one per trace, for failure messages.
func Tree(spans []Span) string {
	byParent := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.TraceID+"/"+s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !ids[s.TraceID+"/"+s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		k := s.TraceID + "/" + s.ParentSpanID
		byParent[k] = append(byParent[k], s)
	}
	sort.SliceStable(roots, func(i, j int) bool { return roots[i].Start.Before(roots[j].Start) })
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s)
		kids := byParent[s.TraceID+"/"+s.SpanID]
		sort.SliceStable(kids, func(i, j int) bool { return kids[i].Start.Before(kids[j].Start) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	if b.Len() == 0 {
		return "(no spans)\n"
	}
	return b.String()
}

func flatten(ex *collectorpb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range ex.GetResourceSpans() {
		service := ""
		if v, ok := attrs(rs.GetResource().GetAttributes())["service.name"].(string); ok {
			service = v
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Service:      service,
					Scope:        ss.GetScope().GetName(),
					TraceID:      hex.EncodeToString(s.GetTraceId()),
					SpanID:       hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Name:         s.GetName(),
					Kind:         s.GetKind(),
					Attrs:        attrs(s.GetAttributes()),
					StatusCode:   s.GetStatus().GetCode(),
					StatusMsg:    s.GetStatus().GetMessage(),
					Start:        time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:          time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId()), Attrs: attrs(l.GetAttributes())})
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrs(x.KvlistValue.GetValues())
	}
	return nil
}
