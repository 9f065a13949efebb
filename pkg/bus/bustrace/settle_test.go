package bustrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// fetch publishes n messages on a stream of a fresh server and fetches them through
// a durable consumer "worker-default".
func fetch(t *testing.T, n int) []jetstream.Msg {
	t.Helper()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "worker-default", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := nats.NewMsg("jobs.default")
		m.Header.Set("ce-id", "job-"+string(rune('a'+i)))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	if len(out) != n {
		t.Fatalf("fetched %d messages, want %d", len(out), n)
	}
	return out
}

func TestSettlingSpans(t *testing.T) {
	exp := record(t)
	msgs := fetch(t, 3)
	ctx, proc := telemetry.StartProcess(context.Background(), telemetry.Message{Destination: "jobs.default"}, nil)
	if err := bustrace.Settling(ctx, msgs[0], "").Ack(); err != nil {
		t.Fatal(err)
	}
	if err := bustrace.Settling(ctx, msgs[1], "").NakWithDelay(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := bustrace.Settling(ctx, msgs[2], "").TermWithReason("unreadable job"); err != nil {
		t.Fatal(err)
	}
	proc.End()
	telemetrytest.Flush(t)

	spans := exp.GetSpans()
	for _, c := range []struct{ name, op, extraKey, extra, id string }{
		{"nak jobs.default", "nak", "skillbus.settle.delay_ms", "1500", "job-b"},
		{"term jobs.default", "term", "skillbus.settle.reason", "unreadable job", "job-c"},
	} {
		s := telemetrytest.Named(t, spans, c.name)
		a := telemetrytest.Attrs(s)
		if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != proc.SpanContext().SpanID() || s.Status.Code == codes.Error {
			t.Errorf("%s: kind %v, parent %v (want %v), status %v", c.name, s.SpanKind, s.Parent.SpanID(), proc.SpanContext().SpanID(), s.Status)
		}
		want := map[string]string{
			"messaging.system": "nats", "messaging.operation.type": "settle", "messaging.operation.name": c.op,
			"messaging.destination.name": "jobs.default", "messaging.consumer.group.name": "worker-default", "messaging.message.id": c.id,
		}
		if c.extraKey != "" {
			want[c.extraKey] = c.extra
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s: %s = %q, want %q", c.name, k, a[k], v)
			}
		}
	}
}

func TestSettlingOffCostsNothing(t *testing.T) {
	restoreGlobals(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	msgs := fetch(t, 1)
	const in = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx, proc := telemetry.StartProcess(telemetry.Extract(context.Background(), in, ""), telemetry.Message{Destination: "jobs.default"}, nil)
	defer proc.End()
	if got := bustrace.Settling(ctx, msgs[0], ""); got != msgs[0] {
		t.Fatalf("Settling with tracing off wrapped the message: %T", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = bustrace.Settling(ctx, msgs[0], "") }); n != 0 {
		t.Errorf("Settling with tracing off allocates %v times, want 0", n)
	}
	var tp, ts string
	if n := testing.AllocsPerRun(100, func() {
		_, s := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: "skillbus.dead.x", ID: "x.dead"}, &tp, &ts,
			telemetry.AttrExecutionID.String("x"), telemetry.AttrSkillName.String("hello"))
		s.End()
	}); n != 0 {
		t.Errorf("StartPublishMeta with tracing off allocates %v times, want 0", n)
	}
	if tp != "" {
		t.Errorf("StartPublishMeta with tracing off set traceparent %q", tp)
	}
}
