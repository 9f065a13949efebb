package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/gateway"
)

// serveAnother serves a second gateway on f's bus, as another replica or the same
// one after a restart would, and returns its URL.
func (f *fixture) serveAnother(cfg gateway.Config) string {
	f.t.Helper()
	cfg.Bus = f.b
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := gateway.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	f.t.Cleanup(func() { stop(); <-done })
	return "http://" + ln.Addr().String()
}

// A signed webhook whose body was seen before, within the hook's replay window, is
// the delivery it was the first time, whatever its unsigned headers now say: the
// HMAC covers only the body, so a new X-GitHub-Delivery or X-GitHub-Event must not
// make it a new event. Another gateway on the same bus (a replica, or this one
// restarted) knows it too.
func TestWebhookReplay(t *testing.T) {
	t.Parallel()
	secret := "gh-secret"
	hooks := map[string]gateway.Hook{
		"github": {TypePrefix: "com.github.", TypeHeader: "X-GitHub-Event", IDHeader: "X-GitHub-Delivery", Secret: secret},
		"mirror": {TypePrefix: "com.github.", TypeHeader: "X-GitHub-Event", IDHeader: "X-GitHub-Delivery", Secret: secret},
	}
	f := setup(t, gateway.Config{Hooks: hooks, Tokens: []string{token}})
	other := f.serveAnother(gateway.Config{Hooks: hooks, Tokens: []string{token}})
	body := `{"action":"opened","number":7}`
	gh := func(event, delivery, b string) map[string]string {
		return map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": gateway.Sign([]byte(secret), []byte(b)), "Content-Type": "application/json"}
	}
	code, first, _ := f.post("/hooks/github", gh("pull_request", "d-1", body), body)
	if code != http.StatusAccepted || first["id"] != "d-1" {
		t.Fatalf("first delivery: %d %v", code, first)
	}
	for _, tt := range []struct {
		name, url, event, delivery string
	}{
		{"redelivered as GitHub does (same delivery id)", f.url, "pull_request", "d-1"},
		{"another X-GitHub-Delivery", f.url, "pull_request", "d-2"},
		{"another X-GitHub-Event", f.url, "issues", "d-3"},
		{"to another gateway on the bus", other, "push", "d-4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &fixture{t: t, ctx: f.ctx, b: f.b, url: tt.url}
			code, out, _ := g.post("/hooks/github", gh(tt.event, tt.delivery, body), body)
			if code != http.StatusAccepted || out["activation_id"] != first["activation_id"] || out["id"] != "d-1" ||
				out["type"] != "com.github.pull_request" || out["duplicate"] != true || out["seq"] != first["seq"] {
				t.Fatalf("%d %v\nwant the first delivery's activation %v (id d-1, type com.github.pull_request), a duplicate", code, out, first["activation_id"])
			}
		})
	}
	// Another body, or the same body to another hook, is a new event.
	other2 := `{"action":"opened","number":8}`
	if code, out, _ := f.post("/hooks/github", gh("pull_request", "d-5", other2), other2); code != http.StatusAccepted || out["id"] != "d-5" || out["duplicate"] == true {
		t.Errorf("another body: %d %v", code, out)
	}
	if code, out, _ := f.post("/hooks/mirror", gh("pull_request", "d-6", body), body); code != http.StatusAccepted || out["id"] != "d-6" || out["duplicate"] == true {
		t.Errorf("the same body to another hook: %d %v", code, out)
	}
}

// When a body's replay window has passed, the body is taken as a new delivery.
func TestWebhookReplayWindowEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Hooks: map[string]gateway.Hook{"h": {IDHeader: "X-Id", ReplayWindow: "1s"}}})
	if code, out, _ := f.post("/hooks/h", map[string]string{"X-Id": "first"}, `{"n":1}`); code != http.StatusAccepted || out["id"] != "first" {
		t.Fatalf("first: %d %v", code, out)
	}
	n := 0
	natstest.Eventually(t, 20*time.Second, func() bool {
		n++
		id := fmt.Sprintf("later-%d", n)
		code, out, _ := f.post("/hooks/h", map[string]string{"X-Id": id}, `{"n":1}`)
		if code != http.StatusAccepted || (out["id"] != "first" && out["id"] != id) {
			t.Fatalf("%s: %d %v", id, code, out)
		}
		return out["id"] == id
	}, "the body was still taken as its first delivery long after its 1s window")
}

// A hook's replay window is checked when the gateway starts.
func TestWebhookReplayWindowConfig(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{})
	for window, want := range map[string]string{"soon": "replay_window", "10ms": "at least 1s", "-1h": "at least 1s"} {
		_, err := gateway.New(gateway.Config{Bus: f.b, Hooks: map[string]gateway.Hook{"h": {ReplayWindow: window}}})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "hook h") {
			t.Errorf("replay_window %q: %v, want an error naming hook h and saying %q", window, err, want)
		}
	}
	for _, window := range []string{"", "none", "1h"} {
		if _, err := gateway.New(gateway.Config{Bus: f.b, Hooks: map[string]gateway.Hook{"h": {ReplayWindow: window}}}); err != nil {
			t.Errorf("replay_window %q: %v", window, err)
		}
	}
	// With the window off, the same body with another delivery id is another event.
	g := &fixture{t: t, ctx: f.ctx, b: f.b}
	g.url = f.serveAnother(gateway.Config{Hooks: map[string]gateway.Hook{"h": {IDHeader: "X-Id", ReplayWindow: "none"}}})
	for _, id := range []string{"a", "b"} {
		if code, out, _ := g.post("/hooks/h", map[string]string{"X-Id": id}, `{}`); code != http.StatusAccepted || out["id"] != id || out["duplicate"] == true {
			t.Errorf("window off, delivery %s: %d %v", id, code, out)
		}
	}
}

// The gateway answers a request without credentials before reading its body: a
// sender who cannot authenticate cannot make it read (up to --max-body) first.
func TestAuthBeforeBody(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Tokens: []string{token}, Secret: "events-secret", Hooks: map[string]gateway.Hook{
		"github": {Secret: "gh-secret"},
		"plain":  {},
	}})
	for _, path := range []string{"/events", "/hooks/github", "/hooks/plain"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			// The transport waits for the body's Read to return before giving up.
			stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
			defer stop()
			defer pw.Close()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			// More than net/http discards after a handler, so it closes instead.
			req.ContentLength = 512 << 10
			req.Header.Set("Content-Type", "application/json")
			go func() { _, _ = pw.Write([]byte(`{"a":"` + strings.Repeat("x", 1000))) }() // and then nothing
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer while the body was still coming: %v", err)
			}
			defer resp.Body.Close()
			var out map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%d %v, want 401", resp.StatusCode, out)
			}
		})
	}
}

// A body signed with the gateway's secret covers the event's attributes only in
// structured and batch mode; binary mode keeps them in headers no signature covers,
// so a signed binary-mode event is refused.
func TestSignedEventsCarryTheirAttributes(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Tokens: []string{token}, Secret: "events-secret"})
	h := binary("signed-b", "com.example.signed")
	delete(h, "Authorization")
	h["X-Hub-Signature-256"] = gateway.Sign([]byte("events-secret"), []byte(`{}`))
	if code, out, _ := f.post("/events", h, `{}`); code != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "structured or batch mode") {
		t.Errorf("signed binary mode: %d %v, want 401 saying to use structured or batch mode", code, out)
	}
	// A content type that only starts like structured mode is read in binary mode, with
	// the id in an unsigned header: refused like binary mode.
	h["Content-Type"] = "application/cloudevents+jsonx"
	h["X-Hub-Signature-256"] = gateway.Sign([]byte("events-secret"), []byte(`{}`))
	if code, out, _ := f.post("/events", h, `{}`); code != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "structured or batch mode") {
		t.Errorf("signed, Content-Type application/cloudevents+jsonx: %d %v, want 401 saying to use structured or batch mode", code, out)
	}
	ev := `{"specversion":"1.0","id":"ss-1","source":"/signed","type":"com.example.signed"}`
	signed := map[string]string{"Content-Type": "application/cloudevents+json; charset=utf-8", "X-Hub-Signature-256": gateway.Sign([]byte("events-secret"), []byte(ev))}
	// ?skill is not signed: a captured body sent again naming a skill would start it.
	if code, out, _ := f.post("/events?skill=other", signed, ev); code != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "?skill") {
		t.Errorf("signed with ?skill: %d %v, want 401 saying ?skill is not signed", code, out)
	}
	if code, out, _ := f.post("/events", signed, ev); code != http.StatusAccepted {
		t.Errorf("signed structured mode: %d %v", code, out)
	}
}
