package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/gateway"
)

// FuzzParseEvents feeds arbitrary bodies under each content mode: whatever comes
// back must be valid events whose types fit in subjects.
func FuzzParseEvents(f *testing.F) {
	f.Add(uint8(0), "com.example.a", "id-1", []byte(`{"a":1}`))
	f.Add(uint8(1), "", "", []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"x":1}}`))
	f.Add(uint8(2), "", "", []byte(`[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"0.3","id":"2","source":"/s","type":"u"}]`))
	f.Add(uint8(1), "", "", []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"AAEC","datacontenttype":"application/octet-stream"}`))
	f.Add(uint8(3), "x", "y", []byte(`not json`))
	f.Fuzz(func(t *testing.T, mode uint8, typ, id string, body []byte) {
		h := http.Header{}
		switch mode % 4 {
		case 0:
			h.Set("ce-specversion", "1.0")
			h.Set("ce-type", typ)
			h.Set("ce-id", id)
			h.Set("ce-source", "/fuzz")
			h.Set("Content-Type", "application/json")
		case 1:
			h.Set("Content-Type", "application/cloudevents+json")
		case 2:
			h.Set("Content-Type", "application/cloudevents-batch+json")
		case 3:
			h.Set("Content-Type", typ)
		}
		evs, err := gateway.ParseEvents(h, body, 10)
		if err != nil {
			return
		}
		if len(evs) == 0 || len(evs) > 10 {
			t.Fatalf("%d events", len(evs))
		}
		for _, e := range evs {
			if err := e.Validate(); err != nil {
				t.Fatalf("invalid event accepted: %v", err)
			}
			if err := events.CheckType(e.Type()); err != nil {
				t.Fatalf("type accepted that is not a subject: %v", err)
			}
			var v any
			if ct, _, _ := strings.Cut(e.DataContentType(), ";"); len(e.Data()) > 0 && (ct == "" || ct == "application/json") && events.DecodeValue(e.Data(), &v) != nil {
				t.Fatalf("data declared JSON (%q) accepted that is not: %q", e.DataContentType(), e.Data())
			}
		}
	})
}

// FuzzWebhook maps arbitrary webhook requests: an accepted one carries the body as
// JSON data and a valid event.
func FuzzWebhook(f *testing.F) {
	f.Add("pull_request", "72d3162e", []byte(`{"action":"opened"}`))
	f.Add("", "", []byte(`[]`))
	f.Add("bad type!", "x", []byte(`{}`))
	h := gateway.Hook{TypePrefix: "com.github.", TypeHeader: "X-GitHub-Event", IDHeader: "X-GitHub-Delivery"}
	f.Fuzz(func(t *testing.T, typ, id string, body []byte) {
		hdr := http.Header{}
		hdr.Set("X-GitHub-Event", typ)
		hdr.Set("X-GitHub-Delivery", id)
		e, err := h.Event("github", hdr, body)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("invalid event: %v", err)
		}
		if events.CheckType(e.Type()) != nil || !bytes.Equal(bytes.TrimSpace(e.Data()), bytes.TrimSpace(body)) {
			t.Fatalf("event %s from body %q", e, body)
		}
	})
}

// FuzzVerifySignature: only the right signature of the exact body passes.
func FuzzVerifySignature(f *testing.F) {
	f.Add([]byte("secret"), "sha256=00", []byte("body"))
	f.Add([]byte(""), "", []byte(""))
	f.Fuzz(func(t *testing.T, secret []byte, sig string, body []byte) {
		if gateway.VerifySignature(secret, sig, body) == nil && sig != gateway.Sign(secret, body) && !equalFoldHex(sig, gateway.Sign(secret, body)) {
			t.Fatalf("signature %q accepted for %q", sig, body)
		}
		if err := gateway.VerifySignature(secret, gateway.Sign(secret, body), body); err != nil {
			t.Fatalf("own signature refused: %v", err)
		}
	})
}

// equalFoldHex: hex digits may be upper-case.
func equalFoldHex(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }
