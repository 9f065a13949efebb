package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/otlptest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

// TestOneTrace follows a trigger across the hops this package and the tools own:
// the client's PRODUCER span, a consumer continuing from the event (as the worker
// does), a bus tool call, the tool service's SERVER span, and the HTTP call that
// tool makes, all in one trace with the right parents.
func TestOneTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: func(k string) string {
		return map[string]string{telemetry.EnvEndpoint: rcv.Endpoint(), telemetry.EnvServiceName: "trace-test"}[k]
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	var mu sync.Mutex
	var gotTraceparent string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotTraceparent = r.Header.Get("traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer api.Close()

	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	httpTool := tool.NewHTTP(tool.HTTPConfig{})
	svcConn := srv.Conn(t)
	svc, err := bustool.Serve(svcConn, bustool.ServerConfig{Name: "fetcher"}, bustool.Def{
		Tool: tool.Func("fetch", func(ctx context.Context, c tool.Call) (any, error) {
			return httpTool.Call(ctx, tool.Call{Args: map[string]any{"url": api.URL}})
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	// The service's subscriptions reach the server before the call, made on
	// another connection, looks for a responder.
	if err := svcConn.Flush(); err != nil {
		t.Fatal(err)
	}

	// A publisher with a trace of its own: the trigger joins it.
	const publisherTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := telemetry.Extract(context.Background(), "00-"+publisherTrace+"-00f067aa0ba902b7-01", "")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	act, err := client.New(b).Publish(ctx, client.Trigger{Skill: "fetcher", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}

	// Read the trigger back from the stream, as the router does, and continue.
	stream, err := b.JS.Stream(ctx, b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(ctx, act.Seq)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
	if tp := m.Header.Get("ce-traceparent"); !strings.Contains(tp, publisherTrace) {
		t.Fatalf("the trigger's ce-traceparent %q is not in the publisher's trace", tp)
	}
	pctx, proc := telemetry.StartProcess(bustrace.ExtractMsg(ctx, bus.FromNATS(m)), telemetry.Message{Destination: m.Subject, ConsumerGroup: "router"}, nil)
	bt, err := bustool.New(b.NC, "fetch", bustool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, step := telemetry.StartStep(pctx, "fetch", "tool")
	if _, err := bt.Call(sctx, tool.Call{ExecutionID: "x1", Step: "fetch"}); err != nil {
		t.Fatal(err)
	}
	step.End()
	proc.End()

	// The service answers before its span ends: let its calls finish first.
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The http tool's requests are measured too.
	mfs, err := tel.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !slices.Contains(names, "http_client_request_duration_seconds") {
		t.Errorf("no http_client_request_duration_seconds among %v", names)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := otlptest.InTrace(rcv.Spans(), publisherTrace)
	pub := otlptest.Must(t, spans, "publish "+act.Subject)
	if pub.ParentSpanID != "00f067aa0ba902b7" {
		t.Errorf("publish span's parent %q, want the publisher's span", pub.ParentSpanID)
	}
	process := otlptest.Must(t, spans, "process "+act.Subject)
	otlptest.AssertChild(t, pub, process)
	st := otlptest.Must(t, spans, "step fetch")
	otlptest.AssertChild(t, process, st)
	send := otlptest.Must(t, spans, "send skillbus.tool.fetch")
	otlptest.AssertChild(t, st, send)
	serve := otlptest.Must(t, spans, "process skillbus.tool.fetch")
	otlptest.AssertChild(t, send, serve)
	var httpSpan otlptest.Span
	for _, s := range spans {
		if s.ParentSpanID == serve.SpanID && s.Attrs["http.request.method"] == "GET" {
			httpSpan = s
		}
	}
	if httpSpan.SpanID == "" {
		t.Fatalf("no HTTP client span under the tool service's span:\n%s", otlptest.Tree(spans))
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(gotTraceparent, publisherTrace+"-"+httpSpan.SpanID) {
		t.Errorf("the API got traceparent %q, want the HTTP span %s of trace %s", gotTraceparent, httpSpan.SpanID, publisherTrace)
	}
	if t.Failed() {
		t.Log(otlptest.Tree(spans))
	}
}
