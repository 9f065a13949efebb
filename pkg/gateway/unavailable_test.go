package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/gateway"
)

// A batch posted while the triggers stream cannot take it (here: gone, as while
// its leader is elected, and back a moment later) is published whole once it can
// — 202, every event once — instead of 503 for the whole batch; past the publish
// timeout the answer is 503 with Retry-After, and sending the batch again
// publishes only what was not published.
func TestBatchRidesOutAnUnavailableStream(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &natstest.Buffer{}
	g, err := gateway.New(gateway.Config{Bus: b, Log: slog.New(slog.NewTextHandler(logs, nil)), PublishTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()

	triggersCfg := b.Streams()[0]
	if triggersCfg.Name != b.StreamTriggers() {
		t.Fatalf("the first stream is %s", triggersCfg.Name)
	}
	batch := func(n int) string {
		evs := make([]string, n)
		for i := range evs {
			evs[i] = fmt.Sprintf(`{"specversion":"1.0","id":"e-%d","source":"/batch","type":"com.example.greet","data":{"n":%d}}`, i, i)
		}
		return "[" + strings.Join(evs, ",") + "]"
	}
	post := func(body string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Post("http://"+ln.Addr().String()+"/events", "application/cloudevents-batch+json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, string(out), resp.Header
	}

	if err := b.JS.DeleteStream(ctx, b.StreamTriggers()); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body string
	}
	answered := make(chan answer, 1)
	go func() {
		code, body, _ := post(batch(100))
		answered <- answer{code, body}
	}()
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "sending it again") }, "the gateway did not retry:\n%s", logs)
	if _, err := b.JS.CreateStream(ctx, triggersCfg); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.code != http.StatusAccepted || strings.Count(a.body, `"activation_id"`) != 100 {
		t.Fatalf("answer %d, want 202 with 100 activations: %s\n%s", a.code, a.body, logs)
	}
	st, err := b.JS.Stream(ctx, b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 100 {
		t.Errorf("%d triggers stored, want 100", n)
	}

	// Past the publish timeout: 503, Retry-After, and what to do.
	g2, err := gateway.New(gateway.Config{Bus: b, Log: slog.New(slog.NewTextHandler(logs, nil)), PublishTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.JS.DeleteStream(ctx, b.StreamTriggers()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req, _ := http.NewRequest(http.MethodPost, "/events", strings.NewReader(batch(3)))
	req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	g2.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "0 of 3 published before it; send them all again") {
		t.Errorf("past the publish timeout: %d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
}

// An event posted while NATS is down is kept by the gateway's connection and sent
// when it reconnects, so past the publish timeout the 503 says that it may or may
// not have been stored, not that it was not published; sending it again once NATS
// is back is a duplicate of the one stored meanwhile.
func TestUnacknowledgedPublishMayBeStored(t *testing.T) {
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	logs := &natstest.Buffer{}
	g, err := gateway.New(gateway.Config{Bus: b, Log: slog.New(slog.NewTextHandler(logs, nil)), PublishTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req, _ := http.NewRequest(http.MethodPost, "/events", strings.NewReader(`{"specversion":"1.0","id":"down-1","source":"/ops","type":"com.example.greet","data":{}}`))
		req.Header.Set("Content-Type", "application/cloudevents+json")
		g.ServeHTTP(rec, req)
		return rec
	}
	srv.Stop()
	natstest.Eventually(t, 10*time.Second, func() bool { return !b.NC.IsConnected() }, "still connected")
	rec := post()
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("NATS down: %d %v %s", rec.Code, rec.Header(), body)
	}
	for _, want := range []string{"did not acknowledge it in time", "may or may not have been stored (0 of 1 acknowledged before it)", "same source and id is deduplicated"} {
		if !strings.Contains(body, want) {
			t.Errorf("%s does not say %q", body, want)
		}
	}
	if strings.Contains(body, "published before it") {
		t.Errorf("%s says how many were published", body)
	}

	srv.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	natstest.Eventually(t, 15*time.Second, func() bool {
		st, err := b.JS.Stream(ctx, b.StreamTriggers())
		return err == nil && st.CachedInfo().State.Msgs == 1
	}, "the buffered event was not stored")
	if rec := post(); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"duplicate":true`) {
		t.Errorf("sent again: %d %s, want 202, a duplicate", rec.Code, rec.Body.String())
	}
}
