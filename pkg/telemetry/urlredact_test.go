package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/skillbus/skillbus/pkg/telemetry"
)

// A span's url.full keeps no secret: user info and every query value are REDACTED.
func TestRedactedFullURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example/v1/x":                    "https://api.example/v1/x",
		"https://api.example/v1/x?":                   "https://api.example/v1/x?",
		"https://u@api.example/x?a=1&b=&c":            "https://REDACTED:REDACTED@api.example/x?a=REDACTED&b=REDACTED&REDACTED",
		"https://api.example/x?q=a%20b&q=c#frag":      "https://api.example/x?q=REDACTED&q=REDACTED",
		"https://api.example/x?X-Goog-Signature=abc&": "https://api.example/x?X-Goog-Signature=REDACTED&",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := telemetry.RedactedFullURL(u); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// Under otelhttp's transport (the MCP client's, the http tool's), the span of a
// request with a key in its query records the URL without it.
func TestRedactURLsUnderOtelhttp(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := &http.Client{Transport: otelhttp.NewTransport(telemetry.RedactURLs(http.DefaultTransport), otelhttp.WithTracerProvider(tp))}
	resp, err := c.Get(srv.URL + "/mcp?api_key=S3CR3T")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	var full string
	for _, a := range spans[0].Attributes() {
		if strings.Contains(a.Value.Emit(), "S3CR3T") {
			t.Errorf("attribute %s holds the key: %s", a.Key, a.Value.Emit())
		}
		if a.Key == "url.full" {
			full = a.Value.AsString()
		}
	}
	if full != srv.URL+"/mcp?api_key=REDACTED" {
		t.Errorf("url.full %q", full)
	}
}
