// Package otlptest is an OTLP/HTTP trace receiver for tests: a local HTTP server
// that decodes the protobuf export requests of real OTLP exporters (in this process
// or in child processes pointed at it with OTEL_EXPORTER_OTLP_ENDPOINT) and lets a
// test wait for spans and assert their parents and links.
package otlptest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/otlp"
)

// Span and Link are internal/otlp's.
type (
	Span = otlp.Span
	Link = otlp.Link
)

// Decode and Respond are internal/otlp's.
var (
	Decode  = otlp.Decode
	Respond = otlp.Respond
)

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

// Must returns the first span named name or fails the test.
func Must(t testing.TB, spans []Span, name string) Span {
	t.Helper()
	s, ok := Find(spans, name)
	if !ok {
		t.Fatalf("otlptest: no span %q among:\n%s", name, Tree(spans))
	}
	return s
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

// Find returns the first span named name.
func Find(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
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
