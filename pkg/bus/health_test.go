package bus_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

func TestConsumerGauges(t *testing.T) {
	restoreGlobals(t)
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
	cons, err := js.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "worker-gpu", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "jobs.gpu", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() { // held, not acked
	}

	tel, err := telemetry.Setup(ctx, telemetry.Config{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if _, err := tel.Metrics.ObserveConsumers(bus.ConsumerInfo(js,
		telemetry.Consumer{Pool: "gpu", Stream: "JOBS", Name: "worker-gpu"},
		telemetry.Consumer{Pool: "gone", Stream: "JOBS", Name: "worker-gone"})); err != nil {
		t.Fatal(err)
	}
	addr, err := tel.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`skillbus_consumer_pending{messaging_consumer_group_name="worker-gpu",otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_pool="gpu",skillbus_stream="JOBS"} 2`,
		`skillbus_consumer_ack_pending{messaging_consumer_group_name="worker-gpu",otel_scope_name="github.com/skillbus/skillbus",otel_scope_schema_url="",otel_scope_version="",skillbus_pool="gpu",skillbus_stream="JOBS"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "worker-gone") {
		t.Error("a consumer that does not exist is reported")
	}
}

// restoreGlobals puts back the global providers telemetry.Setup replaced.
func restoreGlobals(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
