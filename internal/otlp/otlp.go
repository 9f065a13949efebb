// Package otlp reads OTLP/HTTP trace export requests (the protobuf that OTLP
// exporters send to /v1/traces) into flat spans, and prints a trace as a tree: what
// `skillbus traces` serves, and what the tests' receiver (internal/otlptest) is
// built on.
package otlp

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// MaxExport is the largest export request Decode reads, unzipped.
const MaxExport = 32 << 20

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

// Decode reads the spans of an OTLP/HTTP protobuf export request (POST
// /v1/traces, gzipped or not, at most MaxExport bytes once unzipped); on an error
// it also returns the HTTP status to answer with.
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
	b, err := io.ReadAll(io.LimitReader(body, MaxExport+1))
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if len(b) > MaxExport {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("an export request of more than %d bytes", MaxExport)
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
