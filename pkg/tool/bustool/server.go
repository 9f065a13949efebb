package bustool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Def is one tool a Server serves.
type Def struct {
	// Tool handles the calls; its Name (see CheckName) is the tool's name on the
	// bus. tool.Func turns a function into one. Its results may be anything
	// encoding/json can marshal; callers receive them as JSON-like values.
	Tool tool.Tool
	// Description says what the tool does, to people and to models choosing a tool.
	Description string
	// Schema is the JSON Schema of the arguments: any value that marshals to a
	// JSON object (a map, a struct, json.RawMessage). Nil: {"type":"object"}.
	Schema any
}

// ServerConfig configures a Server. Zero values select the documented defaults.
type ServerConfig struct {
	// Name is the micro service name, shown by `nats micro ls`: letters, digits,
	// '_' and '-'. Default "skillbus-tools".
	Name string
	// Version is the service's SemVer version. Default "0.0.1".
	Version string
	// Description describes the service as a whole.
	Description string
	// Prefix is the subject prefix; tools are served on <Prefix>.tool.<name>.
	// Default "skillbus".
	Prefix string
	// QueueGroup is the queue group of the endpoints, so that instances of a
	// service share the calls. Default micro's "q", which all services share:
	// two services serving the same tool name split its calls.
	QueueGroup string
	// MaxConcurrent bounds how many calls run at once; a call beyond it waits in
	// the subscription's buffer. Default 64.
	MaxConcurrent int
	// Timeout bounds a call whose request carries no Skillbus-Timeout-Ms header.
	// Default 5m.
	Timeout time.Duration
	// Log receives errors that cannot be sent to the caller. Default slog.Default().
	Log *slog.Logger
}

// Defaults of ServerConfig.
const (
	DefaultServiceName   = "skillbus-tools"
	DefaultMaxConcurrent = 64
	DefaultServerTimeout = 5 * time.Minute
)

// Server serves tools on the bus as a NATS micro service. Each tool is an
// endpoint on <prefix>.tool.<name>; `nats micro info <name>` lists them with
// their descriptions and schemas.
type Server struct {
	svc     micro.Service
	nc      *nats.Conn
	cfg     ServerConfig
	sem     chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	stopped bool
	calls   sync.WaitGroup
	stop    sync.Once
	stopErr error
}

// Serve starts serving the tools on nc and returns at once; the calls are
// handled on goroutines of the Server until Shutdown.
func Serve(nc *nats.Conn, cfg ServerConfig, defs ...Def) (*Server, error) {
	if nc == nil {
		return nil, errors.New("bustool: Serve needs a NATS connection")
	}
	if len(defs) == 0 {
		return nil, errors.New("bustool: Serve needs at least one tool")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultServiceName
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.1"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultServerTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}

	type endpoint struct {
		def  Def
		name string
		meta map[string]string
	}
	var eps []endpoint
	seen := map[string]bool{}
	for i, d := range defs {
		if d.Tool == nil {
			return nil, fmt.Errorf("bustool: tool %d has no Tool", i)
		}
		name := d.Tool.Name()
		if err := CheckName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("bustool: tool %q is defined twice", name)
		}
		seen[name] = true
		schema, err := schemaJSON(d.Schema)
		if err != nil {
			return nil, fmt.Errorf("bustool: tool %s: %w", name, err)
		}
		eps = append(eps, endpoint{def: d, name: name, meta: map[string]string{
			MetaTool:        name,
			MetaDescription: d.Description,
			MetaSchema:      string(schema),
		}})
	}

	s := &Server{nc: nc, cfg: cfg, sem: make(chan struct{}, cfg.MaxConcurrent)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(nc, micro.Config{
		Name:        cfg.Name,
		Version:     cfg.Version,
		Description: cfg.Description,
		Metadata:    map[string]string{MetaProtocol: ProtocolVersion},
		QueueGroup:  cfg.QueueGroup,
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("bustool: starting service %s: %w", cfg.Name, err)
	}
	s.svc = svc
	for _, ep := range eps {
		t := ep.def.Tool
		err := svc.AddEndpoint(ep.name, micro.HandlerFunc(func(r micro.Request) { s.dispatch(t, r) }),
			micro.WithEndpointSubject(Subject(cfg.Prefix, ep.name)),
			micro.WithEndpointMetadata(ep.meta))
		if err != nil {
			_ = svc.Stop()
			s.cancel()
			return nil, fmt.Errorf("bustool: serving tool %s: %w", ep.name, err)
		}
	}
	return s, nil
}

// schemaJSON returns the JSON of an argument schema, which must be an object.
func schemaJSON(schema any) ([]byte, error) {
	if schema == nil {
		return []byte(`{"type":"object"}`), nil
	}
	b, err := tool.MarshalJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("schema does not marshal to JSON: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("schema must be a JSON object, got %.40s", b)
	}
	return b, nil
}

// Info returns the service's micro info: its id, name and endpoints.
func (s *Server) Info() micro.Info { return s.svc.Info() }

// dispatch runs on the endpoint's subscription goroutine. It waits for a free
// slot, so at most MaxConcurrent calls run and the rest queue in the
// subscription, and hands the call to a goroutine of its own.
func (s *Server) dispatch(t tool.Tool, r micro.Request) {
	if r.Reply() == "" {
		return // a publish, not a request: nobody waits for a result
	}
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		s.respondError(t.Name(), r, failure.Retry("bustool: tool service %s is shutting down", s.cfg.Name))
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.sem
		s.respondError(t.Name(), r, failure.Retry("bustool: tool service %s is shutting down", s.cfg.Name))
		return
	}
	s.calls.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.calls.Done()
		defer func() { <-s.sem }()
		s.handle(t, r)
	}()
}

func (s *Server) handle(t tool.Tool, r micro.Request) {
	name := t.Name()
	timeout := s.cfg.Timeout
	if v := r.Headers().Get(HeaderTimeout); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			timeout = min(time.Duration(ms)*time.Millisecond, timeout)
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	h := r.Headers()
	// The caller's span (a worker's step) parents this one, across processes.
	ctx, span := telemetry.StartServe(bustrace.ExtractHeader(ctx, nats.Header(h)),
		telemetry.Message{Destination: r.Subject(), BodySize: len(r.Data())},
		telemetry.AttrTool.String(name), telemetry.AttrExecutionID.String(h.Get(HeaderExecutionID)), telemetry.AttrStepID.String(h.Get(HeaderStep)))
	var err error
	defer func() { telemetry.End(span, err) }()

	args, err := decodeArgs(name, r.Data())
	if err != nil {
		s.respondError(name, r, err)
		return
	}
	call := tool.Call{
		Args:           args,
		ExecutionID:    h.Get(HeaderExecutionID),
		Step:           h.Get(HeaderStep),
		IdempotencyKey: h.Get(HeaderIdempotencyKey),
	}
	res, err := s.safeCall(ctx, t, call)
	if err != nil {
		s.respondError(name, r, err)
		return
	}
	b, err := tool.MarshalJSON(res)
	if err != nil {
		err = failure.Fatalf("%s: the result does not encode as JSON: %v", name, err)
		s.respondError(name, r, err)
		return
	}
	if limit := s.nc.MaxPayload(); limit > 0 && int64(len(b)) > limit {
		err = failure.Fatalf("%s: the result of %d bytes exceeds the NATS max payload of %d bytes", name, len(b), limit)
		s.respondError(name, r, err)
		return
	}
	if err := r.Respond(b); err != nil {
		s.cfg.Log.Error("bustool: sending a result", "tool", name, "err", err)
	}
}

// decodeArgs reads a request payload: a JSON object, or nothing for no arguments.
func decodeArgs(name string, data []byte) (map[string]any, error) {
	if len(data) == 0 {
		return map[string]any{}, nil
	}
	v, err := tool.DecodeJSON(data)
	if err != nil {
		return nil, failure.Repair("%s: the arguments are not valid JSON: %v", name, err)
	}
	switch v := v.(type) {
	case map[string]any:
		return v, nil
	case nil:
		return map[string]any{}, nil
	default:
		return nil, failure.Repair("%s: the arguments must be a JSON object, got %T", name, v)
	}
}

// safeCall calls the tool and turns a panic into a Fatal error, so one bad call
// does not take the service down.
//
// A served tool acts with the rights of the process serving it, not of the skill
// calling it: a skill's permissions bound what a worker does on its behalf, and
// calling a service on the bus is itself what the skill was allowed (as with an MCP
// server). So the call's context grants the network.
func (s *Server) safeCall(ctx context.Context, t tool.Tool, c tool.Call) (res any, err error) {
	ctx = tool.WithPermissions(ctx, tool.Permissions{Network: true})
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Log.Error("bustool: a tool panicked", "tool", t.Name(), "panic", p, "stack", string(debug.Stack()))
			err = failure.Fatalf("%s: the tool panicked: %v", t.Name(), p)
		}
	}()
	return t.Call(ctx, c)
}

// The reply is written as micro's Error writes it (its two headers and the body) but
// with Respond: calls are answered from goroutines of their own after the micro
// handler returned, and Error records the error on the request where micro's stats
// read it at that moment — a data race. The service's error count is what is lost.
func (s *Server) respondError(name string, r micro.Request, err error) {
	code, desc, body := errorReply(err)
	if rerr := r.Respond(body, micro.WithHeaders(micro.Headers{micro.ErrorHeader: {desc}, micro.ErrorCodeHeader: {code}})); rerr != nil {
		s.cfg.Log.Error("bustool: sending an error reply", "tool", name, "err", rerr, "error", err)
	}
}

// Shutdown stops taking calls and waits for the running ones to finish. When ctx
// is done first, it cancels their contexts, waits for them to return (tools
// return promptly once cancelled) and returns ctx.Err(). Calls that arrive
// meanwhile get a Retryable error. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.stopErr = s.svc.Stop()
	})
	done := make(chan struct{})
	go func() {
		s.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return s.stopErr
	case <-ctx.Done():
		s.cancel()
		<-done
		return ctx.Err()
	}
}
