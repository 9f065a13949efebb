package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/otlptest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// TestOneTrace runs registry, router, two workers and the example tool service as
// separate processes exporting OTLP to a receiver in the test, publishes triggers
// that carry a traceparent, and checks that each becomes one trace: the router's
// span, the worker's, every step's and the tool's, each the child of the one
// before; and that a fallback job stays in its trigger's trace.
func TestOneTrace(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := t.Context()
	url := "--nats-url=" + srv.URL()
	tools := startEnv(t, rcv.Env("example-tools"), "tool-service", url)
	startEnv(t, rcv.Env("skillbus-registry"), "registry", url, "--skills", "testdata/skills", "--skills", "testdata/e2e-trace")
	startEnv(t, rcv.Env("skillbus-router"), "router", url)
	for i := range 2 {
		startEnv(t, rcv.Env("skillbus-worker"), "worker", url, "--backoff-base=50ms", "--backoff-max=200ms", fmt.Sprintf("--name=w%d", i+1))
	}
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, err1 := kv.Get(ctx, "traced")
		_, err2 := b.JS.Consumer(ctx, b.StreamTriggers(), "router")
		_, err3 := b.JS.Consumer(ctx, b.StreamJobs(), "worker-default")
		return err1 == nil && err2 == nil && err3 == nil && strings.Contains(tools.out.String(), "serving")
	}, "the fleet did not come up")

	// The publisher's span: the trace and the parent every trigger continues.
	const (
		traceA   = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceB   = "0af7651916cd43dd8448eb211c80319c"
		producer = "00f067aa0ba902b7"
	)
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(subject, id, typ, traceID, data string) {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", id)
		m.Header.Set("ce-source", "/e2e")
		m.Header.Set("ce-type", typ)
		m.Header.Set("ce-traceparent", "00-"+traceID+"-"+producer+"-01")
		m.Header.Set("Content-Type", "application/json")
		m.Data = []byte(data)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish("skillbus.trigger.skill.traced", "trace-1", "com.example.title", traceA, `{"title":"  Crème Brûlée, for 2! "}`)
	publish("skillbus.trigger.com.example.order.created", "trace-2", "com.example.order.created", traceB, `{"order_id":"ORD-9","quantity":50}`)

	// Trace A: trigger → router → worker → steps → bus tool call → tool service.
	var a []otlptest.Span
	rcv.Wait(t, 20*time.Second, "the traced skill's spans", func(spans []otlptest.Span) bool {
		a = otlptest.InTrace(spans, traceA)
		return count(a, "skillbus-router", "process") >= 1 && count(a, "skillbus-worker", "process") >= 1 &&
			count(a, "", "step tidy") == 1 && count(a, "", "step slug") == 1 && count(a, "example-tools", "") >= 1 &&
			count(a, "skillbus-worker", "publish skillbus.events") >= 1
	})
	defer func() {
		if t.Failed() {
			t.Logf("trace A:\n%s", otlptest.Tree(a))
		}
	}()
	t.Logf("trace A:\n%s", otlptest.Tree(a))
	router := one(t, a, "skillbus-router", "process skillbus.trigger")
	if router.ParentSpanID != producer {
		t.Errorf("the router's span %s\n  does not continue the publisher's span %s", router, producer)
	}
	worker := one(t, a, "skillbus-worker", "process skillbus.exec")
	assertDescends(t, a, router, worker)
	tidy := one(t, a, "skillbus-worker", "step tidy")
	slug := one(t, a, "skillbus-worker", "step slug")
	otlptest.AssertChild(t, worker, tidy)
	otlptest.AssertChild(t, worker, slug)
	// The plan's PRODUCER span (the job carries the plan).
	planned := one(t, a, "skillbus-router", "publish skillbus.exec.{pool}.{skill}.{activation}.{stage}")
	otlptest.AssertChild(t, router, planned)
	if planned.Kind != 4 /* PRODUCER */ || planned.Attrs["messaging.operation.type"] != "send" || planned.Attrs["messaging.message.id"] == nil {
		t.Errorf("the job's publish span: %s %v", planned, planned.Attrs)
	}
	call := one(t, a, "skillbus-worker", "send skillbus.tool.slugify")
	otlptest.AssertChild(t, slug, call)
	served := one(t, a, "example-tools", "process skillbus.tool.slugify")
	otlptest.AssertChild(t, call, served)
	for _, s := range a {
		if s.StatusCode == 2 { // STATUS_CODE_ERROR
			t.Errorf("span failed: %s %s", s, s.StatusMsg)
		}
	}

	// Trace B: reserve-stock fails fatally and falls back to queue-backorder; the
	// fallback job's processing is in the same trace, below the failed execution.
	var bs []otlptest.Span
	rcv.Wait(t, 20*time.Second, "the fallback's spans", func(spans []otlptest.Span) bool {
		bs = otlptest.InTrace(spans, traceB)
		return count(bs, "", "step refuse") == 1 && count(bs, "", "step queue") == 1 && count(bs, "skillbus-worker", "process skillbus.exec") == 2
	})
	defer func() {
		if t.Failed() {
			t.Logf("trace B:\n%s", otlptest.Tree(bs))
		}
	}()
	t.Logf("trace B:\n%s", otlptest.Tree(bs))
	router = one(t, bs, "skillbus-router", "process skillbus.trigger")
	if router.ParentSpanID != producer {
		t.Errorf("the router's span %s\n  does not continue the publisher's span %s", router, producer)
	}
	refuse := one(t, bs, "skillbus-worker", "step refuse")
	queue := one(t, bs, "skillbus-worker", "step queue")
	var primary, fallback otlptest.Span
	for _, s := range bs {
		if s.SpanID == refuse.ParentSpanID {
			primary = s
		}
		if s.SpanID == queue.ParentSpanID {
			fallback = s
		}
	}
	if primary.Attrs["skillbus.skill.name"] != "reserve-stock" || fallback.Attrs["skillbus.skill.name"] != "queue-backorder" {
		t.Fatalf("the steps' parents are not the executions' spans: %s\n  %s", primary, fallback)
	}
	if refuse.StatusCode != 2 {
		t.Errorf("the failed step's span has status %v, want an error", refuse.StatusCode)
	}
	if primary.StatusCode != 2 || primary.Attrs["skillbus.failure.class"] != "fatal" {
		t.Errorf("the failed execution's span has status %v and attributes %v, want an error of class fatal", primary.StatusCode, primary.Attrs)
	}
	assertDescends(t, bs, router, primary)
	// The fallback job's PRODUCER span is the failed execution's child, and the
	// fallback's processing continues from it.
	handoff := one(t, bs, "skillbus-worker", "publish skillbus.exec")
	otlptest.AssertChild(t, primary, handoff)
	otlptest.AssertChild(t, handoff, fallback)
	if handoff.Attrs["skillbus.skill.name"] != "queue-backorder" || handoff.Attrs["messaging.system"] != "nats" {
		t.Errorf("the fallback job's publish span has attributes %v", handoff.Attrs)
	}
}

// count returns how many spans of service (any if "") have a name starting with prefix.
func count(spans []otlptest.Span, service, prefix string) int {
	n := 0
	for _, s := range spans {
		if (service == "" || s.Service == service) && strings.HasPrefix(s.Name, prefix) {
			n++
		}
	}
	return n
}

// one returns the only span of service whose name starts with prefix.
func one(t *testing.T, spans []otlptest.Span, service, prefix string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, s := range spans {
		if s.Service == service && strings.HasPrefix(s.Name, prefix) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans of %s named %q..., want 1", len(found), service, prefix)
	}
	return found[0]
}

// assertDescends fails the test unless desc is below anc in the trace, through
// spans of that trace (a publish span in between is fine).
func assertDescends(t *testing.T, spans []otlptest.Span, anc, desc otlptest.Span) {
	t.Helper()
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for s, ok := desc, true; ok; s, ok = byID[s.ParentSpanID] {
		if s.ParentSpanID == anc.SpanID && s.TraceID == anc.TraceID {
			return
		}
	}
	t.Errorf("%s\n  is not below %s", desc, anc)
}

// TestRedeliveryLink kills a worker with SIGKILL in the middle of a traced job and
// checks that the job's redelivery, run by another worker, stays in the trace and
// links to the attempt that died: to the span its finished step hangs under, the
// span the dead worker never got to export.
func TestRedeliveryLink(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := t.Context()
	url := "--nats-url=" + srv.URL()
	startEnv(t, rcv.Env("skillbus-registry"), "registry", url, "--skills", "testdata/e2e-trace")
	startEnv(t, rcv.Env("skillbus-router"), "router", url)
	// The nap step waits until a file named release appears in the exec steps'
	// directory, which the test writes once the first attempt is dead, so the kill
	// always lands mid-nap and the redelivery's nap returns at once. A root worker
	// gives the directory to nobody, who must reach it: not under t.TempDir(),
	// whose parent is private.
	execDir, err := os.MkdirTemp("", "skillbus-e2e-nap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(execDir) })
	workerArgs := func(name string) []string {
		return []string{url, "--ack-wait=2s", "--backoff-base=50ms", "--backoff-max=200ms", "--name=" + name, "--exec-dir=" + execDir}
	}
	first := startEnv(t, rcv.Env("skillbus-worker"), "worker", workerArgs("w1")...)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, err1 := kv.Get(ctx, "traced-nap")
		_, err2 := b.JS.Consumer(ctx, b.StreamTriggers(), "router")
		_, err3 := b.JS.Consumer(ctx, b.StreamJobs(), "worker-default")
		return err1 == nil && err2 == nil && err3 == nil
	}, "the fleet did not come up")

	const (
		traceC   = "5ce0e9a56015fec5aadfa328ae398115"
		producer = "00f067aa0ba902b7"
	)
	m := nats.NewMsg("skillbus.trigger.skill.traced-nap")
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", "trace-3")
	m.Header.Set("ce-source", "/e2e")
	m.Header.Set("ce-type", "com.example.title")
	m.Header.Set("ce-traceparent", "00-"+traceC+"-"+producer+"-01")
	m.Header.Set("Content-Type", "application/json")
	m.Data = []byte(`{"title":" nap "}`)
	if _, err := b.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}

	// The first attempt has finished its first step (exported) and naps until
	// released: kill it.
	var died otlptest.Span
	rcv.Wait(t, 20*time.Second, "the first attempt's tidy step", func(spans []otlptest.Span) bool {
		for _, s := range otlptest.InTrace(spans, traceC) {
			if s.Name == "step tidy" {
				died = s
				return true
			}
		}
		return false
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(execDir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	startEnv(t, rcv.Env("skillbus-worker"), "worker", workerArgs("w2")...)

	var c []otlptest.Span
	var redelivered otlptest.Span
	rcv.Wait(t, 30*time.Second, "the redelivered attempt's span", func(spans []otlptest.Span) bool {
		c = otlptest.InTrace(spans, traceC)
		for _, s := range c {
			if s.Service == "skillbus-worker" && strings.HasPrefix(s.Name, "process skillbus.exec") {
				redelivered = s
				return true
			}
		}
		return false
	})
	defer func() {
		if t.Failed() {
			t.Logf("trace C:\n%s", otlptest.Tree(c))
		}
	}()
	if redelivered.Attrs["skillbus.attempt"] != int64(2) {
		t.Errorf("the redelivered span's attempt is %v, want 2 (attrs %v)", redelivered.Attrs["skillbus.attempt"], redelivered.Attrs)
	}
	// The dead attempt's span was never exported; its step names it as parent.
	if count(c, "skillbus-worker", "process skillbus.exec") != 1 {
		t.Errorf("%d spans of processing the job, want only the redelivery's", count(c, "skillbus-worker", "process skillbus.exec"))
	}
	l := otlptest.AssertLinked(t, redelivered, otlptest.Span{TraceID: traceC, SpanID: died.ParentSpanID})
	if l.Attrs["skillbus.link.reason"] != "redelivery" || l.Attrs["skillbus.attempt"] != int64(1) {
		t.Errorf("the link's attributes are %v, want reason redelivery, attempt 1", l.Attrs)
	}
	id, _ := redelivered.Attrs["skillbus.execution.id"].(string)
	if want := (telemetry.Delivery{ExecutionID: id, Attempt: 1}).SpanID().String(); died.ParentSpanID != want {
		t.Errorf("the dead attempt's span id is %s, want %s, derived from its execution id", died.ParentSpanID, want)
	}
	// The redelivery continues the router's trace like the first attempt did, and
	// its steps are its own children.
	router := one(t, c, "skillbus-router", "process skillbus.trigger")
	assertDescends(t, c, router, redelivered)
	nap := one(t, c, "skillbus-worker", "step nap")
	otlptest.AssertChild(t, redelivered, nap)
	if redelivered.ParentSpanID == "" || redelivered.ParentSpanID == died.ParentSpanID {
		t.Errorf("the redelivered span's parent is %q", redelivered.ParentSpanID)
	}
	var pub otlptest.Span
	for _, s := range c {
		if s.SpanID == redelivered.ParentSpanID {
			pub = s
		}
	}
	if pub.Service != "skillbus-router" || pub.Kind != 4 /* PRODUCER */ || pub.Attrs["messaging.operation.type"] != "send" ||
		pub.Attrs["skillbus.execution.id"] != id || pub.Attrs["skillbus.route.method"] == nil {
		t.Errorf("the job's parent is not the router's PRODUCER span of publishing it: %s %v", pub, pub.Attrs)
	}
}
