package tool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
)

// HTTPConfig configures the http tool. Zero values select the documented defaults.
type HTTPConfig struct {
	// Client sends the requests; wrap its Transport for tracing (otelhttp) or
	// proxies, or give it a dialer that refuses private addresses: the tool
	// itself reaches any host the worker can. Nil: a client of the tool's own,
	// with a pooled transport cloned from http.DefaultTransport that records
	// http.client.request.duration and, with tracing on, a client span per
	// request with W3C trace headers (as otelhttp would).
	Client *http.Client
	// Timeout bounds one call, from sending the request to reading the whole
	// response; a call's "timeout" argument replaces it. Zero: 30s.
	Timeout time.Duration
	// MaxResponseBytes is the largest response body accepted; a larger one is a
	// Fatal error. Zero: 10 MiB.
	MaxResponseBytes int64
	// Retries is how many times one call retries a retryable failure, with
	// go-retryablehttp's exponential backoff, before reporting it. Zero (and
	// anything below): never, because retries belong to the broker,
	// which redelivers the job with backoff and without holding a worker.
	Retries int
	// UserAgent is sent unless the call's headers name one. Empty: "skillbus".
	UserAgent string
}

// Defaults of HTTPConfig.
const (
	DefaultHTTPTimeout      = 30 * time.Second
	DefaultMaxResponseBytes = 10 << 20
	DefaultUserAgent        = "skillbus"
)

// ErrNoNetwork is wrapped by the http tool's error for a call whose skill has no
// network permission (see Permissions).
var ErrNoNetwork = errors.New("refused: the skill has no network permission")

// StatusError is the error, inside a *failure.Error, for a response whose status
// is a failure: 4xx, 5xx (and 429). Use errors.As to read the status.
type StatusError struct {
	Method string
	URL    string // without credentials or query
	Status int
	Body   string // a short excerpt of the response body
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("http: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// NewHTTP returns the "http" tool, which sends one HTTP request per call.
//
// Arguments:
//
//	url      required; http or https
//	method   default GET, or POST when json or body is given
//	headers  map of strings
//	query    map of strings, numbers, bools or lists of them; added to the URL's query
//	json     any value, sent as a JSON body with Content-Type application/json
//	body     string, sent as is (at most one of json and body)
//	timeout  seconds or a duration string; replaces HTTPConfig.Timeout
//
// The result is {"status": int, "headers": {name: first value}, "body": ...} where
// body is the decoded JSON value if the response says it is JSON (application/json
// or *+json) and parses, and otherwise the body as a string. Calls with a method
// other than GET and HEAD send Call.IdempotencyKey as the Idempotency-Key header
// unless the call's headers set one.
func NewHTTP(cfg HTTPConfig) Tool {
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{CheckRedirect: noReferer}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			t = t.Clone()
			// A worker runs many jobs at once against the same few APIs; the default
			// of 2 idle connections per host would open a new connection for most
			// calls under load.
			t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 64
			// The request duration histogram; with tracing on, W3C trace
			// headers and a client span per request.
			hc.Transport = newClientTransport(t, clientTelemetry{})
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	return &httpTool{
		cfg: cfg,
		client: &retryablehttp.Client{
			HTTPClient:   hc,
			RetryWaitMin: time.Second,
			RetryWaitMax: 30 * time.Second,
			RetryMax:     max(cfg.Retries, 0),
			CheckRetry:   retryablehttp.DefaultRetryPolicy,
			Backoff:      retryablehttp.DefaultBackoff,
			// Hand back the last response or error as it is: classify reads both.
			ErrorHandler: retryablehttp.PassthroughErrorHandler,
		},
	}
}

// noReferer is the client's redirect policy: the default's limit of 10
// redirects, and no Referer header, which Go's client sets to the URL redirected
// from, query and all; a query often carries an API key, which the next host,
// perhaps another's, must not get. To another host (or port) it sends only the
// headers that carry no credential (crossHostHeaders): Go's client drops
// Authorization and Cookie there, but a skill's X-Api-Key would go along.
func noReferer(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	req.Header.Del("Referer")
	if len(via) > 0 && !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
		for k := range req.Header {
			if !crossHostHeaders[http.CanonicalHeaderKey(k)] {
				req.Header.Del(k)
			}
		}
	}
	return nil
}

// crossHostHeaders are the headers a redirect to another host keeps: what says
// how to talk, not who is asking.
var crossHostHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Content-Type": true,
	"User-Agent": true, "Traceparent": true, "Tracestate": true, "Idempotency-Key": true,
}

type httpTool struct {
	cfg    HTTPConfig
	client *retryablehttp.Client
}

func (*httpTool) Name() string { return "http" }

type httpRequest struct {
	method  string
	url     *url.URL
	headers map[string]string
	body    []byte
	json    bool
	timeout time.Duration
}

// ReadOnly reports whether c is a GET, HEAD or OPTIONS request (a call with no
// method and no json or body is a GET): the methods HTTP defines as safe, which
// change nothing on the server.
func (h *httpTool) ReadOnly(c Call) bool {
	m, _ := c.Args["method"].(string)
	if m == "" {
		_, j := c.Args["json"]
		_, b := c.Args["body"]
		if j || b {
			return false
		}
		m = http.MethodGet
	}
	switch strings.ToUpper(m) {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

func (h *httpTool) Call(ctx context.Context, c Call) (any, error) {
	if err := cancelled(ctx, "http"); err != nil {
		return nil, err
	}
	r, err := h.parse(c)
	if err != nil {
		return nil, err
	}
	safeURL := redactURL(r.url)
	fail := func(class failure.Class, format string, args ...any) error {
		return failure.New(class, "http: %s %s: "+format, append([]any{r.method, safeURL}, args...)...)
	}
	if !PermissionsFrom(ctx).Network {
		return nil, failure.Wrap(failure.Fatal, fmt.Errorf("http: %s %s: %w; grant it with permissions: {network: {outbound: true}}", r.method, safeURL, ErrNoNetwork))
	}

	callCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var body any // nil, not a nil []byte: retryablehttp treats them differently
	if r.body != nil {
		body = r.body
	}
	req, err := retryablehttp.NewRequestWithContext(callCtx, r.method, r.url.String(), body)
	if err != nil {
		return nil, fail(failure.Repairable, "%v", unwrapURLError(err))
	}
	for k, v := range r.headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	setDefault(req.Header, "User-Agent", h.cfg.UserAgent)
	if r.json {
		setDefault(req.Header, "Content-Type", "application/json")
	}
	if c.IdempotencyKey != "" && r.method != http.MethodGet && r.method != http.MethodHead {
		setDefault(req.Header, events.HeaderIdempotencyKey, c.IdempotencyKey)
	}

	resp, err := h.client.Do(req)
	if resp == nil || err != nil {
		// A redirect refused (a loop) comes with the last response, its body
		// closed: the error is the outcome.
		if resp != nil {
			resp.Body.Close()
		}
		if err == nil {
			err = errors.New("no response")
		}
		return nil, h.transportError(ctx, callCtx, r, safeURL, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 400 || resp.StatusCode < 100 {
		// Only an excerpt goes into the message; don't read a large error page.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		se := &StatusError{
			Method: r.method,
			URL:    safeURL,
			Status: resp.StatusCode,
			Body:   excerpt(b, 200, false, false),
		}
		class := classify(resp, nil)
		if class == failure.Repairable {
			return nil, parameterFault(r, b, se).Repairable()
		}
		return nil, failure.Wrap(class, se)
	}

	limit := h.cfg.MaxResponseBytes
	if resp.ContentLength > limit {
		return nil, fail(failure.Fatal, "response body of %d bytes exceeds the limit of %d bytes", resp.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, h.transportError(ctx, callCtx, r, safeURL, fmt.Errorf("reading response body: %w", err))
	}
	if int64(len(b)) > limit {
		return nil, fail(failure.Fatal, "response body exceeds the limit of %d bytes", limit)
	}

	headers := make(map[string]any, len(resp.Header))
	for k, v := range resp.Header {
		if len(v) > 0 {
			headers[k] = text([]byte(v[0]))
		}
	}
	return map[string]any{
		"status":  int64(resp.StatusCode),
		"headers": headers,
		"body":    responseBody(resp.Header.Get("Content-Type"), b),
	}, nil
}

// classify gives the class of a response or transport error. go-retryablehttp's
// retry policy decides what is retryable: connection errors, timeouts, 429 and 5xx
// except 501. Of the rest, 400 and 422 say the request's parameters were wrong, so a
// repair may fix them; everything else (401, 403, 404, 405, 410, 501, other 4xx,
// redirect loops, untrusted certificates) will fail again.
//
// The call's context is not consulted: the caller deals with its expiry first.
func classify(resp *http.Response, err error) failure.Class {
	if retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), resp, err); retry {
		return failure.Retryable
	}
	if err == nil && resp != nil {
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return failure.Repairable
		}
	}
	return failure.Fatal
}

func (h *httpTool) transportError(parent, callCtx context.Context, r *httpRequest, safeURL string, err error) error {
	switch {
	case parent.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("http: %s %s: %w", r.method, safeURL, parent.Err()))
	case callCtx.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("http: %s %s: timed out after %s: %w",
			r.method, safeURL, r.timeout, callCtx.Err()))
	}
	// The *url.Error carries the full URL, query and all; report its cause only.
	return failure.Wrap(classify(nil, err), fmt.Errorf("http: %s %s: %w", r.method, safeURL, unwrapURLError(err)))
}

func (h *httpTool) parse(c Call) (*httpRequest, error) {
	a := NewArgs("http", c.Args)
	if err := a.Only(skill.BuiltinToolArgs["http"]...); err != nil {
		return nil, err
	}
	r := &httpRequest{}
	raw, err := a.String("url")
	if err != nil {
		return nil, err
	}
	if r.url, err = url.Parse(raw); err != nil {
		// The parse error quotes the URL, which may hold credentials.
		return nil, a.Errorf("url", "is not a valid URL: %v", unwrapURLError(err))
	}
	if r.url.Scheme != "http" && r.url.Scheme != "https" {
		return nil, a.Errorf("url", "must be an http or https URL, got scheme %q", r.url.Scheme)
	}
	if r.url.Host == "" {
		return nil, a.Errorf("url", "has no host")
	}
	if err := addQuery(a, r.url); err != nil {
		return nil, err
	}

	if a.Has("json") && a.Has("body") {
		return nil, failure.Repair("http: arguments \"json\" and \"body\" exclude each other; give one")
	}
	if a.Has("json") {
		v := c.Args["json"]
		if err := CheckValue(v); err != nil {
			return nil, a.Errorf("json", "is not a JSON value: %v", err)
		}
		if r.body, err = json.Marshal(v); err != nil {
			return nil, a.Errorf("json", "cannot be encoded: %v", err)
		}
		r.json = true
	}
	if a.Has("body") {
		s, err := a.String("body")
		if err != nil {
			return nil, err
		}
		r.body = []byte(s)
	}

	def := http.MethodGet
	if r.body != nil {
		def = http.MethodPost
	}
	m, err := a.OptString("method", def)
	if err != nil {
		return nil, err
	}
	r.method = strings.ToUpper(m)
	if !methodRe.MatchString(r.method) {
		return nil, a.Errorf("method", "must be an HTTP method such as GET or POST, got %q", m)
	}

	if r.headers, err = a.OptStringMap("headers"); err != nil {
		return nil, err
	}
	for k, v := range r.headers {
		if !headerNameRe.MatchString(k) {
			return nil, a.Errorf("headers", "has an invalid header name %q", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, a.Errorf("headers", "has a line break or NUL in the value of %q", k)
		}
	}

	if r.timeout, err = a.OptDuration("timeout", h.cfg.Timeout); err != nil {
		return nil, err
	}
	return r, nil
}

var (
	methodRe     = regexp.MustCompile(`^[A-Z]+$`)
	headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") // RFC 9110 token
)

func addQuery(a Args, u *url.URL) error {
	m, err := a.OptMap("query")
	if err != nil || len(m) == 0 {
		return err
	}
	q := u.Query()
	for _, k := range sortedKeys(m) {
		vals, ok := m[k].([]any)
		if !ok {
			vals = []any{m[k]}
		}
		for _, v := range vals {
			s, ok := queryValue(v)
			if !ok {
				return a.Errorf("query", "must map names to strings, numbers, bools or lists of them, got %s at %q", typeName(v), k)
			}
			q.Add(k, s)
		}
	}
	u.RawQuery = q.Encode()
	return nil
}

func queryValue(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	if i, ok := toInt(v); ok {
		return strconv.FormatInt(i, 10), true
	}
	return "", false
}

func setDefault(h http.Header, key, value string) {
	if h.Get(key) == "" {
		h.Set(key, value)
	}
}

func responseBody(contentType string, b []byte) any {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		if len(bytes.TrimSpace(b)) > 0 {
			if v, err := DecodeJSON(b); err == nil {
				return v
			}
		}
	}
	return text(b)
}

// redactURL returns u without credentials, query or fragment, for error messages.
// An elided query shows as "?…".
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	r.RawQuery, r.ForceQuery = "", false
	r.Fragment, r.RawFragment = "", ""
	s := r.String()
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parameterFault describes a 400 or 422: the request's parameters were wrong. Have
// are the fields of the JSON body sent; Name is the field the response names, when
// it names one the way common APIs do ({"field": "x"}, {"errors": [{"field": "x"}]},
// {"param": "x"}, or "missing field x" in the text).
func parameterFault(r *httpRequest, body []byte, se *StatusError) *failure.Fault {
	f := &failure.Fault{Kind: failure.FaultParameter, Err: se}
	if r.json {
		var sent map[string]any
		if json.Unmarshal(r.body, &sent) == nil {
			for k := range sent {
				f.Have = append(f.Have, k)
			}
			slices.Sort(f.Have)
		}
	}
	var named struct {
		Field  string `json:"field"`
		Param  string `json:"param"`
		Errors []struct {
			Field string `json:"field"`
			Param string `json:"param"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &named) == nil {
		f.Name = cmp.Or(named.Field, named.Param)
		for _, e := range named.Errors {
			if f.Name == "" {
				f.Name = cmp.Or(e.Field, e.Param)
			}
		}
	}
	if f.Name == "" {
		if m := missingFieldText.FindSubmatch(body); m != nil {
			f.Name = string(m[1])
		}
	}
	return f
}

var missingFieldText = regexp.MustCompile(`(?i)(?:missing|required|unknown|invalid)\s+(?:field|parameter|param|property)\s*:?\s*["'\x60]?([A-Za-z_][A-Za-z0-9_.-]*)`)
