// Package console is skillbus's web console: an http.Handler that shows runs live,
// why the router chose a skill, each step's inputs, outputs and errors, the skill
// catalog, and what waits for a person's answer.
//
// Everything it shows comes from what the rest of skillbus already writes: runs and
// their history from the EVENTS stream (a JetStream consumer keeps a bounded index
// of runs and feeds the live list), skills from the registry service, routing
// explanations from the router service, paused runs from KV "runs", dead letters
// from package dlq, repairs from the repair service's records. Its actions go
// through the same code as the CLI's (run.Confirm, control.Controller,
// dlq.Queue.Replay, service.Actions), so an answer, a cancel, a pause, a replay or a
// repair decision given in the console is recorded exactly like one given with
// `skillbus runs confirm`, `runs cancel`, `runs pause`, `dlq replay` or `repair
// approve`, with who gave it.
//
// Pages are rendered on the server with html/template, so every value of a run —
// a skill's output is hostile input — is escaped for where it lands. htmx (vendored,
// embedded) makes the filters, paging and forms update in place; a few lines of our
// own script merge the live updates, which arrive as server-sent events batched a
// few times a second, into the list.
//
//	c, err := console.New(console.Config{Bus: b, Token: os.Getenv("SKILLBUS_UI_TOKEN")})
//	if err := c.Start(ctx); err != nil { ... }
//	defer c.Stop()
//	http.ListenAndServe("127.0.0.1:8090", c.Handler())
package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/hostguard"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Config configures a Console.
type Config struct {
	// Bus is the connection to skillbus; required.
	Bus *bus.Bus
	// Log receives the console's own messages and one line per action, naming who
	// acted. Default: discarded.
	Log *slog.Logger
	// Token, when set, lets people who sign in with it act (answer confirmations);
	// empty means the console is read-only. At least MinTokenLength characters;
	// wrong tokens are throttled (SignInBurst).
	Token string
	// TraceURL links a run to its trace: "{trace_id}" is replaced by the run's
	// trace id, e.g. "http://localhost:16686/trace/{trace_id}". Empty: no link.
	TraceURL string
	// Window is how far back the runs list reads the events stream when the
	// console starts. Default 24 hours.
	Window time.Duration
	// MaxRuns bounds the runs the list keeps in memory, oldest forgotten first.
	// Default 100,000.
	MaxRuns int
	// FlushInterval is how often live updates are sent to the open pages, batched.
	// Default 250ms.
	FlushInterval time.Duration
	// MaxBatch bounds the rows of one live update; under a flood the newest runs'
	// rows are sent and the others catch up when the list reloads. Default 200.
	MaxBatch int
	// PageSize is how many runs a page of the list shows. Default 50.
	PageSize int
	// RequestTimeout bounds each call to the registry, router and JetStream made
	// to render a page. Default 5s.
	RequestTimeout time.Duration
	// LoopbackOnly, for a console listening on a loopback address, answers only
	// requests whose Host is a loopback name (localhost, 127.0.0.1, [::1]) or one
	// of AllowHosts, and others with 421: a web page elsewhere could otherwise
	// read every run through a name of its own that resolves to 127.0.0.1 (DNS
	// rebinding).
	LoopbackOnly bool
	AllowHosts   []string
}

func (c *Config) setDefaults() error {
	if c.Bus == nil {
		return errors.New("console: Config.Bus is required")
	}
	if err := CheckToken(c.Token); err != nil {
		return err
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Window <= 0 {
		c.Window = 24 * time.Hour
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 250 * time.Millisecond
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 200
	}
	if c.PageSize <= 0 {
		c.PageSize = 50
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	return nil
}

// CheckToken checks a sign-in token: empty (a read-only console) or at least
// MinTokenLength characters.
func CheckToken(tok string) error {
	if tok != "" && len(tok) < MinTokenLength {
		return fmt.Errorf("console: the sign-in token (--ui-token, $SKILLBUS_UI_TOKEN) is %d characters; it must be at least %d, e.g. from openssl rand -hex 16", len(tok), MinTokenLength)
	}
	return nil
}

// Console serves the web console.
type Console struct {
	cfg      Config
	idx      *Index
	hub      *hub
	pages    *pages
	sessions *sessions
	signIns  *throttle

	mu      sync.Mutex
	cc      jetstream.ConsumeContext
	jc      jetstream.ConsumeContext // the plans' jobs
	stop    context.CancelFunc
	done    chan struct{}
	caught  atomic.Bool // the history present at Start has been read
	lastSeq uint64
	applied atomic.Uint64
}

// New returns a console; call Start to read the events.
func New(cfg Config) (*Console, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, idx: NewIndex(IndexConfig{MaxRuns: cfg.MaxRuns}), pages: p, sessions: newSessions(), signIns: newThrottle()}
	c.hub = newHub(c)
	return c, nil
}

// Start reads the events stream from Window ago and keeps following it, and starts
// sending live updates. The EVENTS stream must exist.
func (c *Console) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc != nil {
		return errors.New("console: already started")
	}
	b := c.cfg.Bus
	stream, err := b.Stream(ctx, b.StreamEvents())
	if err != nil {
		return fmt.Errorf("console: the %s stream: %w (is skillbus running there?)", b.StreamEvents(), err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	c.lastSeq = info.State.LastSeq
	if c.lastSeq == 0 {
		c.caught.Store(true)
	}
	start := time.Now().Add(-c.cfg.Window)
	cons, err := b.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Subjects.AllEvents()},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return fmt.Errorf("console: follow %s: %w", b.StreamEvents(), err)
	}
	cc, err := cons.Consume(c.apply)
	if err != nil {
		return fmt.Errorf("console: follow %s: %w", b.StreamEvents(), err)
	}
	c.cc = cc
	// Routing decisions travel in the jobs of each plan (an event of their own only
	// at the full events level): the plan's jobs make the runs that are queued.
	jobs, err := b.OrderedConsumer(ctx, b.StreamJobs(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Subjects.PlanJobs("*")},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err == nil {
		c.jc, err = jobs.Consume(c.applyJob)
	}
	if err != nil {
		cc.Stop()
		c.cc = nil
		return fmt.Errorf("console: follow %s: %w", b.StreamJobs(), err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	c.stop, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		c.hub.run(fctx, c.cfg.FlushInterval)
	}()
	return nil
}

func (c *Console) apply(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	var ids []string
	// A scheduled message — a confirmation's timeout, a sleep's wake-up, a wait's
	// timeout — is no answer until it fires (then it is published again on the
	// event's own subject).
	if events.TimerOf(m.Subject()) == "" {
		if e, err := bus.DecodeFast(m); err == nil {
			ids = c.idx.Apply(e.Type, e.Data, md.Timestamp)
		}
	}
	c.hub.mark(ids)
	c.applied.Add(1)
	if md.Sequence.Stream >= c.lastSeq {
		c.caught.Store(true)
	}
}

// applyJob indexes the decision a job of a plan carries.
func (c *Console) applyJob(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	d, ok, err := bus.DecisionOfJob(m)
	if err != nil || !ok {
		return
	}
	data, err := json.Marshal(d)
	if err != nil {
		return
	}
	c.hub.mark(c.idx.Apply(events.TypeRouteDecided, data, md.Timestamp))
}

// CaughtUp reports whether the history present when the console started has been
// read into the runs list.
func (c *Console) CaughtUp() bool { return c.caught.Load() }

// Stop stops following the events and closes the live streams; idempotent.
func (c *Console) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc == nil {
		return
	}
	c.cc.Stop()
	c.jc.Stop()
	c.stop()
	<-c.done
	c.cc = nil
}

// Handler serves the console's pages.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler()))
	mux.HandleFunc("GET /{$}", c.runsPage)
	mux.HandleFunc("GET /live", c.live)
	mux.HandleFunc("GET /runs/{id}", c.runPage)
	mux.HandleFunc("GET /skills", c.skillsPage)
	mux.HandleFunc("GET /skills/route", c.routeForm)
	mux.HandleFunc("GET /waiting", c.waitingPage)
	mux.HandleFunc("GET /dlq", c.dlqPage)
	mux.HandleFunc("GET /repairs", c.repairsPage)
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.Handle("POST /logout", c.action(c.logout))
	mux.Handle("POST /runs/{id}/confirm", c.action(c.confirm))
	mux.Handle("POST /runs/{id}/cancel", c.action(c.cancelRun))
	mux.Handle("POST /skills/{name}/pause", c.action(c.skillControl("pause")))
	mux.Handle("POST /skills/{name}/resume", c.action(c.skillControl("resume")))
	mux.Handle("POST /skills/{name}/cancel", c.action(c.skillControl("cancel")))
	mux.Handle("POST /dlq/{id}/replay", c.action(c.replay))
	mux.Handle("POST /repairs/{id}/approve", c.action(c.decideRepair(true)))
	mux.Handle("POST /repairs/{id}/reject", c.action(c.decideRepair(false)))
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused: the console's actions only accept forms posted from its own pages", http.StatusForbidden)
	}))
	h := secureHeaders(cop.Handler(mux))
	if c.cfg.LoopbackOnly {
		h = hostguard.Wrap(h, "the console", "--ui-allow-host", c.cfg.AllowHosts)
	}
	return h
}

// secureHeaders sets a strict Content-Security-Policy: only the console's own
// scripts and styles run, so even markup that slipped past escaping could not
// execute.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}
