package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/hostguard"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// Config configures a Gateway.
type Config struct {
	// Bus publishes the triggers and follows them; required. Its NATS user needs only
	// the publisher role's permissions.
	Bus *bus.Bus
	// Tokens are the bearer tokens (Authorization: Bearer <token>) that may post to
	// /events, and to hooks without a secret of their own.
	Tokens []string
	// Secret, when set, also admits a request to /events whose body is signed with
	// it: X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>.
	Secret string
	// Hooks are the webhooks served at /hooks/<name>.
	Hooks map[string]Hook
	// MaxBodyBytes bounds a request body; default 1 MiB. Larger is 413.
	MaxBodyBytes int64
	// MaxEventBytes bounds one event as the routers weigh a trigger (headers and
	// data, bus.EventSize); default bus.DefaultMaxEventBytes, the routers' default.
	// Give it the routers' --max-event-bytes: a larger event is refused with 413 and
	// the limit instead of being accepted and then rejected by the router.
	MaxEventBytes int
	// MaxBatch bounds the events of one batch; default 100.
	MaxBatch int
	// MaxWait caps ?wait=; default 5 minutes.
	MaxWait time.Duration
	// PublishTimeout bounds how long one request's events are sent again while
	// JetStream cannot take them (no responders while a stream elects a leader or a
	// server restarts, an unanswered publish); default 10 seconds, and never past the
	// request's own deadline. Then the answer is 503 with Retry-After.
	PublishTimeout time.Duration
	// Log receives a line per rejected request and per publish failure; default
	// slog.Default().
	Log *slog.Logger
	// LoopbackOnly, for a gateway listening on a loopback address, answers only
	// requests whose Host is a loopback name (localhost, 127.0.0.1, [::1]) or one
	// of AllowHosts, and others with 421: a web page elsewhere could otherwise
	// post events through a name of its own that resolves to 127.0.0.1 (DNS
	// rebinding).
	LoopbackOnly bool
	AllowHosts   []string
}

// Open reports whether the configuration lets anyone post events: no tokens and no
// secret. Such a gateway belongs on a loopback address only.
func (c Config) Open() bool { return len(c.Tokens) == 0 && c.Secret == "" }

// Gateway is the HTTP handler.
type Gateway struct {
	cfg     Config
	client  *client.Client
	mux     *http.ServeMux
	handler http.Handler // mux, behind the Host check of LoopbackOnly
	// replay is the KV bucket of webhook deliveries (see Hook.ReplayWindow); nil
	// when no hook has a replay window.
	replay jetstream.KeyValue
}

// New checks cfg, applies its defaults and returns the handler.
func New(cfg Config) (*Gateway, error) {
	if cfg.Bus == nil {
		return nil, errors.New("gateway: Config.Bus is required")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 100
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = bus.DefaultMaxEventBytes
	}
	if cfg.MaxEventBytes < 0 {
		return nil, errors.New("gateway: MaxEventBytes must not be negative")
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 5 * time.Minute
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.PublishTimeout < 0 {
		return nil, errors.New("gateway: PublishTimeout must not be negative")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	for _, t := range cfg.Tokens {
		if len(t) < 16 {
			return nil, errors.New("gateway: a bearer token must be at least 16 characters")
		}
	}
	for name, h := range cfg.Hooks {
		if err := events.CheckToken("hook name", name); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if h.SecretEnv != "" && h.Secret == "" {
			return nil, fmt.Errorf("gateway: hook %s: secret_env %s is not resolved (use LoadHooks)", name, h.SecretEnv)
		}
	}
	// A ?wait ends when the run is parked on a repair waiting for approval: the
	// answer says so (202, "repairing") instead of holding the request to its end.
	g := &Gateway{cfg: cfg, client: client.New(cfg.Bus).StopAtRepair().WithMaxEventBytes(cfg.MaxEventBytes).WithLog(cfg.Log), mux: http.NewServeMux()}
	if err := g.openReplay(); err != nil {
		return nil, err
	}
	g.mux.HandleFunc("POST /events", g.handleEvents)
	g.mux.HandleFunc("POST /hooks/{name}", g.handleHook)
	g.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// Anything else is answered in JSON too, as every other error is.
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		allow := ""
		switch {
		case r.URL.Path == "/events" || strings.HasPrefix(r.URL.Path, "/hooks/") && len(r.URL.Path) > len("/hooks/"):
			allow = http.MethodPost
		case r.URL.Path == "/healthz":
			allow = "GET, HEAD"
		}
		if allow != "" {
			w.Header().Set("Allow", allow)
			g.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: this path takes %s", r.Method, r.URL.Path, allow))
			return
		}
		g.fail(w, r, http.StatusNotFound, fmt.Errorf("%s: no such path; the gateway serves POST /events, POST /hooks/<name> and GET /healthz", r.URL.Path))
	})
	g.handler = g.mux
	if cfg.LoopbackOnly {
		g.handler = hostguard.Wrap(g.mux, "the gateway", "--allow-host", cfg.AllowHosts)
	}
	return g, nil
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Serve serves HTTP on ln until ctx ends, then shuts down, letting requests in
// flight finish for up to 10 seconds.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      g.cfg.MaxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}

// Accepted is the answer for one published event.
type Accepted struct {
	ID           string `json:"id"`
	Source       string `json:"source"`
	Type         string `json:"type"`
	ActivationID string `json:"activation_id"`
	Subject      string `json:"subject"`
	Seq          uint64 `json:"seq"`
	// Duplicate is true when JetStream had this event already (same id within the
	// dedupe window): nothing new was started.
	Duplicate bool `json:"duplicate,omitempty"`
	// With ?wait: the outcome. Status is "completed", "failed", "unmatched",
	// "deferred" when a debounced or batched skill took it into a run that starts
	// later as its own activation (Error says which and why), "cancelled",
	// "repairing" when the execution is parked on a repair that waits for a
	// person's approval (it has not ended: the same activation goes on once the
	// repair is decided), or "pending" when the wait ended first.
	Status string `json:"status,omitempty"`
	// Waiting, for a "pending" run, says what it waits for when it said so: a
	// person's confirmation ("confirmation of step refund, until ...: skillbus
	// runs confirm <execution>"), a concurrency slot, a throttle's turn, an event.
	Waiting     string         `json:"waiting,omitempty"`
	ExecutionID string         `json:"execution_id,omitempty"`
	Skill       string         `json:"skill,omitempty"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Error       string         `json:"error,omitempty"`
	// EndedWaits and Cancelled, for an event no skill took ("unmatched"): the
	// executions whose wait_for_event it ended, and those it cancelled by their
	// cancel_on — what such an event is sent for.
	EndedWaits []string `json:"ended_waits,omitempty"`
	Cancelled  []string `json:"cancelled,omitempty"`
}

// waitNote keeps, from the events of a run being waited for, its execution and
// what it says it waits for, for an answer given before it ends.
type waitNote struct {
	execution, waiting string
}

func (n *waitNote) note(e *event.Event) {
	if x, ok := e.Extensions()[events.ExtExecutionID].(string); ok && x != "" {
		n.execution = x
	}
	switch e.Type() {
	case events.TypeConfirmationRequested:
		var d events.ConfirmationRequested
		if e.DataAs(&d) == nil {
			n.execution = d.ExecutionID
			n.waiting = fmt.Sprintf("confirmation of step %s (%q) until %s: skillbus runs confirm %s (or --deny)",
				d.StepID, d.Message, d.TimeoutAt.UTC().Format(time.RFC3339), d.ExecutionID)
		}
	case events.TypeExecutionWaiting:
		var d events.ExecutionWaiting
		if e.DataAs(&d) == nil {
			n.execution, n.waiting = d.ExecutionID, d.For
			if d.Detail != "" {
				n.waiting += ": " + d.Detail
			}
		}
	case events.TypeConfirmationRecorded, events.TypeStepStarted, events.TypeExecutionStarted:
		n.waiting = "" // going again
	}
}

type errorBody struct {
	Error string `json:"error"`
}

func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	g.cfg.Log.Info("gateway: request rejected", "path", r.URL.Path, "status", code, "err", err, "remote", r.RemoteAddr)
	writeJSON(w, code, errorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// body reads the request body within MaxBodyBytes.
func (g *Gateway) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		g.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is larger than %d bytes, this gateway's --max-body", g.cfg.MaxBodyBytes))
		return nil, false
	case err != nil:
		g.fail(w, r, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err))
		return nil, false
	}
	return b, true
}

// bearer reports whether the request carries one of the tokens: Authorization:
// Bearer <token>, the scheme in any case (RFC 7235), one or more spaces after it.
func (g *Gateway) bearer(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	tok = strings.TrimLeft(tok, " ")
	found := 0
	for _, t := range g.cfg.Tokens {
		found |= subtle.ConstantTimeCompare([]byte(tok), []byte(t))
	}
	return found == 1
}

// queryParams are the query parameters an ingress request may carry.
var queryParams = []string{"wait", "skill"}

// waitFor parses ?wait=. With strict (POST /events), a parameter it does not know
// is refused too; a webhook's URL may carry parameters of its sender's own (a
// provider's variables), which are ignored. A ?wait without a duration and one
// beyond MaxWait are refused: each would otherwise answer at once, as if the
// sender had not asked to wait, or give up before the sender expected.
func (g *Gateway) waitFor(r *http.Request, strict bool) (time.Duration, error) {
	q := r.URL.Query()
	for k := range q {
		if strict && !slices.Contains(queryParams, k) {
			return 0, fmt.Errorf("?%s: no such parameter; this endpoint takes ?wait=<duration> (wait for the outcome) and ?skill=<name> (invoke that skill)", k)
		}
	}
	if !q.Has("wait") {
		return 0, nil
	}
	v := q.Get("wait")
	if v == "" {
		return 0, fmt.Errorf("?wait needs a duration to wait for the outcome, such as ?wait=30s (at most %v)", g.cfg.MaxWait)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("?wait=%s: want a duration such as 30s (at most %v)", v, g.cfg.MaxWait)
	}
	if d > g.cfg.MaxWait {
		return 0, fmt.Errorf("?wait=%s: longer than this gateway waits, %v (its --max-wait); wait at most that, then ask again with the same event: it is deduplicated and answers with the outcome", v, g.cfg.MaxWait)
	}
	return d, nil
}

func (g *Gateway) handleEvents(w http.ResponseWriter, r *http.Request) {
	// Credentials first: a body is read only for a sender with a token, or one
	// that signed it.
	sig := ""
	if !g.cfg.Open() && !g.bearer(r) {
		sig = r.Header.Get("X-Hub-Signature-256")
		if g.cfg.Secret == "" || sig == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="skillbus"`)
			g.fail(w, r, http.StatusUnauthorized, errors.New("send Authorization: Bearer <token>, or sign the body (X-Hub-Signature-256)"))
			return
		}
	}
	body, ok := g.body(w, r)
	if !ok {
		return
	}
	if sig != "" {
		if err := VerifySignature([]byte(g.cfg.Secret), sig, body); err != nil {
			g.fail(w, r, http.StatusUnauthorized, err)
			return
		}
		// The signature covers the body only: the id, source and type must be in it,
		// or the same signed body could be sent again as new events. The mode is the
		// one the parser will read, not a look at the Content-Type's prefix (an
		// "application/cloudevents+jsonx" is read in binary mode).
		if enc := Encoding(r.Header); enc != binding.EncodingStructured && enc != binding.EncodingBatch {
			g.fail(w, r, http.StatusUnauthorized, fmt.Errorf("%w: a signed event must be sent in structured or batch mode (Content-Type application/cloudevents+json or application/cloudevents-batch+json), so that its id, source and type are in the signed body; or send a bearer token", ErrBadSignature))
			return
		}
		// Nor is the URL signed: a captured body sent again naming a skill would start it.
		if r.URL.Query().Has("skill") {
			g.fail(w, r, http.StatusUnauthorized, fmt.Errorf("%w: ?skill is not covered by the signature; name the skill in the event (its type) or send a bearer token", ErrBadSignature))
			return
		}
	}
	wait, err := g.waitFor(r, true)
	if err != nil {
		g.fail(w, r, http.StatusBadRequest, err)
		return
	}
	skill := r.URL.Query().Get("skill")
	if skill != "" {
		if err := events.CheckToken("?skill", skill); err != nil {
			g.fail(w, r, http.StatusBadRequest, err)
			return
		}
	}
	evs, err := ParseEvents(r.Header, body, g.cfg.MaxBatch)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotCloudEvent) {
			code = http.StatusUnsupportedMediaType
		}
		g.fail(w, r, code, err)
		return
	}
	if skill != "" {
		for i := range evs {
			if x, ok := evs[i].Extensions()[events.ExtSkill].(string); ok && x != skill {
				g.fail(w, r, http.StatusBadRequest, fmt.Errorf("?skill=%s and the event's skill extension %q name different skills; name one", skill, x))
				return
			}
		}
	}
	if tp := r.Header.Get(events.HeaderTraceParent); tp != "" {
		for i := range evs {
			if _, ok := evs[i].Extensions()[events.ExtTraceParent]; !ok {
				evs[i].SetExtension(events.ExtTraceParent, tp)
			}
		}
	}
	g.publish(w, r, evs, skill, wait, isBatch(r))
}

func isBatch(r *http.Request) bool {
	return Encoding(r.Header) == binding.EncodingBatch
}

func (g *Gateway) handleHook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	h, ok := g.cfg.Hooks[name]
	if !ok {
		g.fail(w, r, http.StatusNotFound, fmt.Errorf("%w: %s", errUnknownHook, name))
		return
	}
	// Credentials first: a body is read only when signed, or with a token.
	switch {
	case h.Secret != "" && r.Header.Get(h.signatureHeader()) == "":
		g.fail(w, r, http.StatusUnauthorized, fmt.Errorf("%w: the request is not signed (%s)", ErrBadSignature, h.signatureHeader()))
		return
	case h.Secret == "" && !g.cfg.Open() && !g.bearer(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="skillbus"`)
		g.fail(w, r, http.StatusUnauthorized, errors.New("send Authorization: Bearer <token>"))
		return
	}
	body, ok := g.body(w, r)
	if !ok {
		return
	}
	if h.Secret != "" {
		if err := VerifySignature([]byte(h.Secret), r.Header.Get(h.signatureHeader()), body); err != nil {
			g.fail(w, r, http.StatusUnauthorized, err)
			return
		}
	}
	wait, err := g.waitFor(r, false)
	if err != nil {
		g.fail(w, r, http.StatusBadRequest, err)
		return
	}
	e, err := h.Event(name, r.Header, body)
	if err != nil {
		g.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if window, _ := h.replayWindow(); window > 0 {
		if err := g.firstDelivery(r.Context(), name, window, body, &e); err != nil {
			g.cfg.Log.Error("gateway: webhook replay window", "hook", name, "err", err)
			g.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
	}
	g.publish(w, r, []event.Event{e}, h.Skill, wait, false)
}

// publish publishes each event as a trigger through the client's one publish path
// (client.Prepare and Send) — the event id is the dedupe id — and answers with the
// activations, following them first when asked to wait.
func (g *Gateway) publish(w http.ResponseWriter, r *http.Request, evs []event.Event, skill string, wait time.Duration, batch bool) {
	ctx := r.Context()
	out := make([]Accepted, len(evs))
	// Each is checked and weighed as a router weighs it, and none is published when
	// one is refused: a router would only reject it, after the sender was told it
	// was accepted. Each trigger's PRODUCER span continues the event's (or the
	// request's) traceparent, and the event carries it on.
	outs := make([]*client.Outgoing, 0, len(evs))
	for i := range evs {
		if wait > 0 {
			// A sender waiting is following its run, as trigger --wait does: the
			// run's live progress (what it waits for, among others) is published.
			evs[i].SetExtension(events.ExtProgress, events.ProgressLive)
		}
		o, err := g.client.Prepare(ctx, &evs[i], skill)
		if err != nil {
			for _, p := range outs {
				p.Abandon(err)
			}
			code := http.StatusBadRequest
			if errors.Is(err, client.ErrTooLarge) {
				code = http.StatusRequestEntityTooLarge
			}
			g.fail(w, r, code, err)
			return
		}
		outs = append(outs, o)
	}
	// A sender waiting follows each run from before its trigger is sent, so that
	// none of its live progress is missed (a gap holds what follows it a second).
	subs := make([]*client.Subscription, len(outs))
	if wait > 0 {
		sctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
		defer cancel()
		for i, o := range outs {
			sub, err := g.client.Subscribe(sctx, o.Activation.ID)
			if err != nil {
				for _, p := range outs {
					p.Abandon(err)
				}
				w.Header().Set("Retry-After", "1")
				g.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("following the events: %v", err))
				return
			}
			defer sub.Close()
			subs[i] = sub
		}
	}
	// Every event is sent again, under the same message id, while JetStream cannot
	// take it, until the request's publish deadline.
	deadline := time.Now().Add(g.cfg.PublishTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for i, o := range outs {
		e := &evs[i]
		act, err := g.client.Send(ctx, o, deadline)
		if err != nil {
			for _, p := range outs[i+1:] {
				p.Abandon(err)
			}
			g.cfg.Log.Error("gateway: publish", "subject", o.Activation.Subject, "id", e.ID(), "err", err)
			if ctx.Err() != nil {
				return // the client went away
			}
			w.Header().Set("Retry-After", "1")
			var na *client.NotAcknowledgedError
			if errors.As(err, &na) {
				// Sent, not answered: maybe stored (a publish made while NATS is
				// unreachable is sent when the gateway reconnects).
				g.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("publishing event %s: JetStream did not acknowledge it in time (%v): NATS is unreachable, overloaded, or its store is full; it may or may not have been stored (%d of %d acknowledged before it): send them all again — an event sent again with the same source and id is deduplicated", e.ID(), na.Err, i, len(evs)))
				return
			}
			g.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("publishing event %s: %v (%d of %d published before it; send them all again: the ones published are recognised as duplicates)", e.ID(), err, i, len(evs)))
			return
		}
		out[i] = Accepted{ID: e.ID(), Source: e.Source(), Type: e.Type(), ActivationID: act.ID,
			Subject: act.Subject, Seq: act.Seq, Duplicate: act.Duplicate}
	}
	code := http.StatusAccepted
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		code = http.StatusOK
		for i := range out {
			var seen waitNote
			res, err := subs[i].Follow(wctx, seen.note)
			switch {
			case err != nil && wctx.Err() != nil:
				out[i].Status, code = "pending", http.StatusAccepted
				out[i].ExecutionID, out[i].Waiting = seen.execution, seen.waiting
			case err != nil:
				out[i].Status, out[i].Error = "pending", err.Error()
				code = http.StatusAccepted
			case res.Completed:
				out[i].Status, out[i].Outputs = "completed", res.Outputs
			case res.Deferred():
				// Taken, not refused: its run is another activation, later.
				out[i].Status, out[i].Error = "deferred", res.Err().Error()
				code = http.StatusAccepted
			case res.Unmatched != nil:
				out[i].Status, out[i].Error = "unmatched", res.Err().Error()
				out[i].EndedWaits, out[i].Cancelled = res.Unmatched.EndedWaits, res.Unmatched.Cancelled
			case res.Cancelled != nil:
				out[i].Status, out[i].Error = "cancelled", res.Err().Error()
			case res.Repairing != nil:
				// Not an outcome: the run goes on once the repair is decided, and
				// sending the event again would only be deduplicated.
				out[i].Status, out[i].Error = "repairing", res.Err().Error()
				code = http.StatusAccepted
			default:
				out[i].Status, out[i].Error = "failed", res.Err().Error()
			}
			if res != nil {
				out[i].ExecutionID, out[i].Skill = res.ExecutionID, res.Skill
			}
		}
	}
	if batch {
		writeJSON(w, code, out)
		return
	}
	writeJSON(w, code, out[0])
}
