package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

// httpServer is a test server speaking real HTTP on the loopback interface.
type httpServer struct {
	*httptest.Server
	started chan struct{} // receives when /block is entered
	flaky   atomic.Int32  // /flaky fails with 503 while this is positive
}

func newHTTPServer(t *testing.T) *httpServer {
	t.Helper()
	s := &httpServer{started: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	// /echo answers with what it received.
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var decoded any
		if len(body) > 0 && r.Header.Get("Content-Type") == "application/json" {
			_ = json.Unmarshal(body, &decoded)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Echo", "yes")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method":          r.Method,
			"query":           r.URL.RawQuery,
			"idempotency_key": r.Header.Values("Idempotency-Key"),
			"content_type":    r.Header.Get("Content-Type"),
			"user_agent":      r.Header.Get("User-Agent"),
			"x_custom":        r.Header.Get("X-Custom"),
			"host":            r.Host,
			"body":            string(body),
			"json":            decoded,
		})
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(code)
		fmt.Fprintf(w, "the server says\n  %d", code)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, `{"not":"decoded"}`)
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"broken":`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Has("chunked") {
			// Flushing first sends no Content-Length, so the limit is found by reading.
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, strings.Repeat("x", n))
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.started <- struct{}{}
		<-r.Context().Done()
	})
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if s.flaky.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "recovered")
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *httpServer) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the server")
	}
}

func httpCall(args map[string]any) tool.Call {
	return tool.Call{Args: args, ExecutionID: "ex1", Step: "step1", IdempotencyKey: "ex1/step1"}
}

func TestHTTPConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		srv := newHTTPServer(t)
		return tooltest.Fixture{
			// The default client: the suite must also pass without one given.
			Tool: granted(tool.NewHTTP(tool.HTTPConfig{})),
			OK:   httpCall(map[string]any{"url": srv.URL + "/echo", "json": map[string]any{"a": []any{int64(1), 2.5}}}),
			CheckOK: func(t *testing.T, res any) {
				body := res.(map[string]any)["body"].(map[string]any)
				if diff := cmp.Diff(map[string]any{"a": []any{int64(1), 2.5}}, body["json"]); diff != "" {
					t.Errorf("echoed JSON (-want +got):\n%s", diff)
				}
			},
			Retryable: ptr(httpCall(map[string]any{"url": srv.URL + "/status/503"})),
			Fatal:     ptr(httpCall(map[string]any{"url": srv.URL + "/status/404"})),
			BadArg:    ptr(httpCall(map[string]any{"url": "ftp://example.com/file"})),
			Blocking:  ptr(httpCall(map[string]any{"url": srv.URL + "/block"})),
			Started:   srv.waitStarted,
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestHTTPStatusClasses(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})
	for _, tc := range []struct {
		status int
		class  failure.Class // "" for success
	}{
		{200, ""}, {201, ""}, {204, ""}, {304, ""},
		{400, failure.Repairable}, {422, failure.Repairable},
		{401, failure.Fatal}, {403, failure.Fatal}, {404, failure.Fatal}, {405, failure.Fatal},
		{408, failure.Fatal}, {409, failure.Fatal}, {410, failure.Fatal}, {418, failure.Fatal},
		{501, failure.Fatal},
		{429, failure.Retryable}, {500, failure.Retryable}, {502, failure.Retryable},
		{503, failure.Retryable}, {504, failure.Retryable}, {599, failure.Retryable},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			res, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/status/" + strconv.Itoa(tc.status)}))
			if tc.class == "" {
				if err != nil {
					t.Fatalf("status %d failed: %v", tc.status, err)
				}
				if got := res.(map[string]any)["status"]; got != int64(tc.status) {
					t.Errorf("status = %v, want %d", got, tc.status)
				}
				return
			}
			if got := classOf(t, err); got != tc.class {
				t.Errorf("status %d: class %q, want %q (error %v)", tc.status, got, tc.class, err)
			}
			var se *tool.StatusError
			if !errors.As(err, &se) || se.Status != tc.status {
				t.Fatalf("error %v is not a StatusError with status %d", err, tc.status)
			}
			want := fmt.Sprintf("http: GET %s/status/%d: %d %s: the server says %d",
				srv.URL, tc.status, tc.status, http.StatusText(tc.status), tc.status)
			if err.Error() != want {
				t.Errorf("message\n got %q\nwant %q", err.Error(), want)
			}
		})
	}
}

// classOf returns the explicit class of err, failing if it has none.
func classOf(t *testing.T, err error) failure.Class {
	t.Helper()
	var fe *failure.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) has no explicit failure class", err, err)
	}
	return fe.Class
}

func TestHTTPIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})
	for _, tc := range []struct {
		name string
		call tool.Call
		want any // what /echo saw: a list, or nil when the header was absent
	}{
		{"POST sends it", httpCall(map[string]any{"url": srv.URL + "/echo", "method": "POST"}), []any{"ex1/step1"}},
		{"PUT sends it", httpCall(map[string]any{"url": srv.URL + "/echo", "method": "put"}), []any{"ex1/step1"}},
		{"DELETE sends it", httpCall(map[string]any{"url": srv.URL + "/echo", "method": "DELETE"}), []any{"ex1/step1"}},
		{"json body means POST", httpCall(map[string]any{"url": srv.URL + "/echo", "json": "x"}), []any{"ex1/step1"}},
		{"GET does not", httpCall(map[string]any{"url": srv.URL + "/echo"}), nil},
		{"no key, no header", tool.Call{Args: map[string]any{"url": srv.URL + "/echo", "method": "POST"}}, nil},
		{"the call's own header wins", httpCall(map[string]any{
			"url": srv.URL + "/echo", "method": "POST", "headers": map[string]any{"idempotency-key": "mine"},
		}), []any{"mine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := echoed(t, h, tc.call)["idempotency_key"]
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Idempotency-Key values (-want +got):\n%s", diff)
			}
		})
	}
	// HEAD has no body to echo, so look at the request on the server side.
	var seen atomic.Value
	head := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Values("Idempotency-Key"))
	}))
	defer head.Close()
	if _, err := h.Call(netCtx(t), httpCall(map[string]any{"url": head.URL, "method": "HEAD"})); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load().([]string); len(got) != 0 {
		t.Errorf("HEAD sent Idempotency-Key %v", got)
	}
}

// echoed calls /echo and returns what the server saw.
func echoed(t *testing.T, h tool.Tool, c tool.Call) map[string]any {
	t.Helper()
	res, err := h.Call(netCtx(t), c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	return res.(map[string]any)["body"].(map[string]any)
}

func TestHTTPRequestAndResult(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})

	res, err := h.Call(netCtx(t), httpCall(map[string]any{
		"url":     srv.URL + "/echo?keep=1",
		"json":    map[string]any{"n": int64(1), "f": 0.5, "l": []any{"x", nil, true}},
		"query":   map[string]any{"q": "a b", "n": int64(2), "many": []any{"x", "y"}, "b": false},
		"headers": map[string]any{"X-Custom": "custom", "Host": "virtual.example"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := res.(map[string]any)
	if r["status"] != int64(200) {
		t.Errorf("status = %v", r["status"])
	}
	headers := r["headers"].(map[string]any)
	if headers["X-Echo"] != "yes" || headers["Content-Type"] != "application/json; charset=utf-8" {
		t.Errorf("headers = %v", headers)
	}
	saw := r["body"].(map[string]any)
	want := map[string]any{
		"method":          "POST",
		"query":           "b=false&keep=1&many=x&many=y&n=2&q=a+b",
		"idempotency_key": []any{"ex1/step1"},
		"content_type":    "application/json",
		"user_agent":      "skillbus",
		"x_custom":        "custom",
		"host":            "virtual.example",
		"body":            `{"f":0.5,"l":["x",null,true],"n":1}`,
		"json":            map[string]any{"n": int64(1), "f": 0.5, "l": []any{"x", nil, true}},
	}
	if diff := cmp.Diff(want, saw); diff != "" {
		t.Errorf("what the server saw (-want +got):\n%s", diff)
	}

	saw = echoed(t, tool.NewHTTP(tool.HTTPConfig{Client: srv.Client(), UserAgent: "agent/2"}), httpCall(map[string]any{
		"url": srv.URL + "/echo", "body": "plain", "method": "PATCH",
		"headers": map[string]any{"Content-Type": "text/plain"},
	}))
	for k, v := range map[string]any{"method": "PATCH", "body": "plain", "content_type": "text/plain", "user_agent": "agent/2"} {
		if saw[k] != v {
			t.Errorf("server saw %s = %v, want %v", k, saw[k], v)
		}
	}

	for path, want := range map[string]any{
		"/text":    `{"not":"decoded"}`, // not declared JSON: a string
		"/badjson": `{"broken":`,        // declared JSON but invalid: a string
	} {
		res, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + path}))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.(map[string]any)["body"]; got != want {
			t.Errorf("%s: body = %#v, want %#v", path, got, want)
		}
	}
}

func TestHTTPBadArguments(t *testing.T) {
	t.Parallel()
	h := tool.NewHTTP(tool.HTTPConfig{})
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"no url", map[string]any{}, `http: argument "url" is required`},
		{"url not a string", map[string]any{"url": int64(1)}, `http: argument "url" must be a string, got number`},
		{"bad scheme", map[string]any{"url": "file:///etc/passwd"}, `http: argument "url" must be an http or https URL, got scheme "file"`},
		{"no scheme", map[string]any{"url": "example.com/x"}, `http: argument "url" must be an http or https URL, got scheme ""`},
		{"no host", map[string]any{"url": "http:///x"}, `http: argument "url" has no host`},
		{"unparsable", map[string]any{"url": "http://user:s3cret@host:port/"}, `http: argument "url" is not a valid URL: invalid port ":port" after host`},
		{"bad method", map[string]any{"url": "http://h/", "method": "GET /"}, `http: argument "method" must be an HTTP method such as GET or POST, got "GET /"`},
		{"headers not strings", map[string]any{"url": "http://h/", "headers": map[string]any{"X-N": int64(1)}}, `http: argument "headers" must be a map of strings, got number at "X-N"`},
		{"bad header name", map[string]any{"url": "http://h/", "headers": map[string]any{"X Y": "v"}}, `http: argument "headers" has an invalid header name "X Y"`},
		{"header injection", map[string]any{"url": "http://h/", "headers": map[string]any{"X-Y": "v\r\nEvil: 1"}}, `http: argument "headers" has a line break or NUL in the value of "X-Y"`},
		{"bad query", map[string]any{"url": "http://h/", "query": map[string]any{"q": map[string]any{}}}, `http: argument "query" must map names to strings, numbers, bools or lists of them, got map at "q"`},
		{"json and body", map[string]any{"url": "http://h/", "json": "a", "body": "b"}, `http: arguments "json" and "body" exclude each other; give one`},
		{"json not JSON", map[string]any{"url": "http://h/", "json": map[string]any{"c": make(chan int)}}, `http: argument "json" is not a JSON value: c: chan int is not a JSON-like value`},
		{"bad timeout", map[string]any{"url": "http://h/", "timeout": "soon"}, `http: argument "timeout" must be a positive number of seconds or a duration string such as "1m30s", got "soon"`},
		{"unknown argument", map[string]any{"url": "http://h/", "header": map[string]any{}}, `http: unknown argument "header" (known: body, headers, json, method, query, timeout, url)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := h.Call(netCtx(t), httpCall(tc.args))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant %q", err, tc.want)
			}
			if got := classOf(t, err); got != failure.Repairable {
				t.Errorf("class = %q, want repairable", got)
			}
		})
	}
}

func TestHTTPResponseLimit(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client(), MaxResponseBytes: 100})
	for _, tc := range []struct {
		query string
		want  string // "" for success
	}{
		{"n=100", ""},
		{"n=100&chunked", ""},
		{"n=101", "response body of 101 bytes exceeds the limit of 100 bytes"},
		{"n=101&chunked", "response body exceeds the limit of 100 bytes"},
	} {
		_, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/big?" + tc.query}))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.query, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to say %q", tc.query, err, tc.want)
			continue
		}
		if got := classOf(t, err); got != failure.Fatal {
			t.Errorf("%s: class %q, want fatal", tc.query, got)
		}
	}
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client(), Timeout: time.Hour})
	_, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/block", "timeout": "100ms"}))
	if got := classOf(t, err); got != failure.Retryable {
		t.Errorf("class %q, want retryable", got)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap DeadlineExceeded", err)
	}
	if want := fmt.Sprintf("http: GET %s/block: timed out after 100ms: context deadline exceeded", srv.URL); err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}

	// The config's timeout applies when the call names none.
	h = tool.NewHTTP(tool.HTTPConfig{Client: srv.Client(), Timeout: 100 * time.Millisecond})
	_, err = h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/block"}))
	if !errors.Is(err, context.DeadlineExceeded) || classOf(t, err) != failure.Retryable {
		t.Errorf("error %v, want a retryable deadline error", err)
	}
}

func TestHTTPConnectionErrorIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	_, err = tool.NewHTTP(tool.HTTPConfig{}).Call(netCtx(t),
		httpCall(map[string]any{"url": "http://admin:s3cret@" + addr + "/x?token=t0ken"}))
	if got := classOf(t, err); got != failure.Retryable {
		t.Errorf("class %q, want retryable (error %v)", got, err)
	}
	if !strings.HasPrefix(err.Error(), "http: GET http://"+addr+"/x?…: ") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("message %q", err)
	}
	checkNoSecrets(t, err)
}

func TestHTTPErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})
	base := strings.Replace(srv.URL, "http://", "http://admin:s3cret@", 1)
	for _, args := range []map[string]any{
		{"url": base + "/status/403?token=t0ken"},
		{"url": base + "/status/500", "query": map[string]any{"api_key": "t0ken"}},
		{"url": base + "/block?token=t0ken", "timeout": "50ms"},
		{"url": "http://admin:s3cret@[::1/?token=t0ken"},
	} {
		_, err := h.Call(netCtx(t), httpCall(args))
		if err == nil {
			t.Fatalf("%v succeeded", args)
		}
		checkNoSecrets(t, err)
	}
}

// A redirect does not tell the next host the URL it came from: Go's client would
// send it as the Referer, query and all, and a query often carries an API key;
// nor does it pass another host a skill's own credential header. Redirects stop
// after 10.
func TestHTTPRedirectSendsNoReferer(t *testing.T) {
	t.Parallel()
	referer, apiKey, agent := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		referer <- r.Header.Get("Referer")
		apiKey <- r.Header.Get("X-Api-Key")
		agent <- r.Header.Get("User-Agent")
		fmt.Fprint(w, "ok")
	}))
	defer other.Close()
	var from *httptest.Server
	from = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, from.URL+"/loop", http.StatusFound)
			return
		}
		http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
	}))
	defer from.Close()
	h := tool.NewHTTP(tool.HTTPConfig{}) // the client a worker makes
	// The other host is another port of 127.0.0.1: a host, as URLs name one.
	res, err := h.Call(netCtx(t), httpCall(map[string]any{"url": from.URL + "/start?api_key=t0ken", "headers": map[string]any{"X-Api-Key": "s3cret"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.(map[string]any)["status"]); got != "200" {
		t.Fatalf("status %v, want 200 from the host redirected to", got)
	}
	if r := <-referer; r != "" {
		t.Errorf("the host redirected to got Referer %q, want none", r)
	}
	if k := <-apiKey; k != "" {
		t.Errorf("the host redirected to got X-Api-Key %q, want none", k)
	}
	if a := <-agent; a == "" {
		t.Error("the host redirected to got no User-Agent")
	}
	_, err = h.Call(netCtx(t), httpCall(map[string]any{"url": from.URL + "/loop"}))
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") || failure.ClassOf(err) != failure.Fatal {
		t.Errorf("a redirect loop: %v (class %q), want a fatal error after 10 redirects", err, failure.ClassOf(err))
	}
}

func checkNoSecrets(t *testing.T, err error) {
	t.Helper()
	for _, secret := range []string{"s3cret", "t0ken", "admin"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error message %q reveals %q", err, secret)
		}
	}
}

func TestHTTPRetriesWhenConfigured(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(t)

	srv.flaky.Store(2)
	res, err := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client(), Retries: 2}).
		Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/flaky"}))
	if err != nil {
		t.Fatalf("with 2 retries, 2 failures then success: %v", err)
	}
	if body := res.(map[string]any)["body"]; body != "recovered" {
		t.Errorf("body = %v", body)
	}

	// By default the first failure is reported: the broker retries.
	srv.flaky.Store(1)
	_, err = tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()}).
		Call(netCtx(t), httpCall(map[string]any{"url": srv.URL + "/flaky"}))
	var se *tool.StatusError
	if !errors.As(err, &se) || se.Status != 503 || classOf(t, err) != failure.Retryable {
		t.Errorf("default config: error %v, want a retryable 503", err)
	}
}

// netCtx is the context of a call by a skill with network permission.
func netCtx(t *testing.T) context.Context {
	return tool.WithPermissions(t.Context(), tool.Permissions{Network: true})
}

// granted calls t with network permission.
func granted(t tool.Tool) tool.Tool {
	return tool.Func(t.Name(), func(ctx context.Context, c tool.Call) (any, error) {
		return t.Call(tool.WithPermissions(ctx, tool.Permissions{Network: true}), c)
	})
}

func TestHTTPNeedsNetworkPermission(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})
	for _, ctx := range []context.Context{t.Context(), tool.WithPermissions(t.Context(), tool.Permissions{Env: []string{"HOME"}})} {
		_, err := h.Call(ctx, httpCall(map[string]any{"url": srv.URL + "/x?token=secret", "method": "POST", "body": "x"}))
		if !errors.Is(err, tool.ErrNoNetwork) || classOf(t, err) != failure.Fatal {
			t.Errorf("error %v, want fatal ErrNoNetwork", err)
		}
		want := "http: POST " + srv.URL + "/x?…: refused: the skill has no network permission; grant it with permissions: {network: {outbound: true}}"
		if err == nil || err.Error() != want {
			t.Errorf("message %v\nwant %q", err, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
	if _, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL})); err != nil || hits.Load() != 1 {
		t.Errorf("with permission: error %v, %d requests", err, hits.Load())
	}
}
