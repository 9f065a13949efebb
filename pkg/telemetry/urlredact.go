package telemetry

import (
	"net/http"
	"net/url"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// spanURLRedactor sits under otelhttp's transport and rewrites the url.full of the
// span otelhttp started, which it gets in the request's context: otelhttp records
// the URL with its query (it drops only the user info), and a query often carries
// an API key. None of otelhttp's options formats url.full; an attribute set again
// replaces the one set before.
// RedactURLs returns base wrapped for use under otelhttp's transport:
// otelhttp.NewTransport(telemetry.RedactURLs(base)).
func RedactURLs(base http.RoundTripper) http.RoundTripper { return spanURLRedactor{base} }

type spanURLRedactor struct{ base http.RoundTripper }

func (s spanURLRedactor) RoundTrip(r *http.Request) (*http.Response, error) {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() && r.URL != nil {
		span.SetAttributes(semconv.URLFull(RedactedFullURL(r.URL)))
	}
	return s.base.RoundTrip(r)
}

// RedactedFullURL is u for a span's url.full, redacted as OpenTelemetry's semantic
// conventions advise: user info becomes REDACTED:REDACTED and every query value
// REDACTED, keeping the parameters' names; a parameter without "=" counts as a
// value. The fragment, never sent, is left out.
func RedactedFullURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		r.User = url.UserPassword("REDACTED", "REDACTED")
	}
	r.Fragment, r.RawFragment = "", ""
	if r.RawQuery != "" {
		parts := strings.Split(r.RawQuery, "&")
		for i, p := range parts {
			if name, _, ok := strings.Cut(p, "="); ok {
				parts[i] = name + "=REDACTED"
			} else if p != "" {
				parts[i] = "REDACTED"
			}
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	return r.String()
}
