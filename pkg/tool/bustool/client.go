package bustool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Config configures the calling side: Tool, Discover and Watcher. Zero values
// select the documented defaults.
type Config struct {
	// Prefix is the subject prefix; tools are called on <Prefix>.tool.<name>.
	// Default "skillbus".
	Prefix string
	// CallTimeout bounds a call whose context has no deadline. Default 30s.
	CallTimeout time.Duration
	// DiscoverTimeout is the longest a discovery waits for $SRV.INFO replies.
	// Default 2s.
	DiscoverTimeout time.Duration
	// DiscoverStall ends a discovery once no reply came for this long after the
	// last one: services answer at once, so a short pause means all have.
	// Default 200ms.
	DiscoverStall time.Duration
}

// Defaults of Config.
const (
	DefaultCallTimeout     = 30 * time.Second
	DefaultDiscoverTimeout = 2 * time.Second
	DefaultDiscoverStall   = 200 * time.Millisecond
)

func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return c, err
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.DiscoverTimeout <= 0 {
		c.DiscoverTimeout = DefaultDiscoverTimeout
	}
	if c.DiscoverStall <= 0 {
		c.DiscoverStall = DefaultDiscoverStall
	}
	return c, nil
}

// Tool calls a tool served on the bus. It implements tool.Tool.
type Tool struct {
	nc          *nats.Conn
	name        string
	subject     string
	description string
	schema      map[string]any
	timeout     time.Duration
}

// New returns the tool of the given name on the bus, whether or not a service
// serves it yet: a call with nobody serving it fails as Retryable. Discover
// returns tools with their descriptions and schemas filled in.
func New(nc *nats.Conn, name string, cfg Config) (*Tool, error) {
	if nc == nil {
		return nil, errors.New("bustool: New needs a NATS connection")
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Tool{nc: nc, name: name, subject: Subject(cfg.Prefix, name), timeout: cfg.CallTimeout}, nil
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// Subject is the subject the tool is called on.
func (t *Tool) Subject() string { return t.subject }

// Description is what the serving service says the tool does; "" if unknown.
func (t *Tool) Description() string { return t.description }

// InputSchema is the JSON Schema of the tool's arguments as the serving service
// describes it, or {"type":"object"} if unknown. The caller must not modify it.
func (t *Tool) InputSchema() map[string]any {
	if t.schema == nil {
		return map[string]any{"type": "object"}
	}
	return t.schema
}

// Call sends the arguments to the tool service and waits for its reply, until
// ctx is done or, without a deadline, for CallTimeout.
//
//	nobody serves the tool                   Retryable ("tool service X is not running")
//	timeout, cancellation, connection lost   Retryable, wrapping ctx.Err() when the context ended
//	arguments too large for the bus          Fatal
//	arguments not JSON-like                  Repairable
//	error reply                              the class the reply carries (see parseReply)
//
// The call is a CLIENT span whose context travels in the request's W3C
// traceparent and tracestate headers, so the service continues the trace.
func (t *Tool) Call(ctx context.Context, c tool.Call) (res any, err error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("bustool: tool %s: %w", t.name, err))
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if err := tool.CheckValue(args[k]); err != nil {
			return nil, failure.Repair("bustool: tool %s: argument %q is not a JSON value: %v", t.name, k, err)
		}
	}
	body, err := tool.MarshalJSON(args)
	if err != nil {
		return nil, failure.Repair("bustool: tool %s: the arguments do not encode as JSON: %v", t.name, err)
	}
	if limit := t.nc.MaxPayload(); limit > 0 && int64(len(body)) > limit {
		return nil, failure.Fatalf("bustool: tool %s: the arguments of %d bytes exceed the NATS max payload of %d bytes", t.name, len(body), limit)
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	msg := nats.NewMsg(t.subject)
	msg.Data = body
	// Rounded up, so the service's deadline is never before the caller's.
	ms := (time.Until(deadline) + time.Millisecond - 1).Milliseconds()
	msg.Header.Set(HeaderTimeout, strconv.FormatInt(max(ms, 1), 10))
	setHeader(msg.Header, HeaderExecutionID, c.ExecutionID)
	setHeader(msg.Header, HeaderStep, c.Step)
	setHeader(msg.Header, HeaderIdempotencyKey, c.IdempotencyKey)

	ctx, span := telemetry.StartRequest(ctx, telemetry.Message{Destination: t.subject, BodySize: len(body)},
		telemetry.AttrTool.String(t.name), telemetry.AttrExecutionID.String(c.ExecutionID), telemetry.AttrStepID.String(c.Step))
	defer func() { telemetry.End(span, err) }()
	bustrace.InjectHeader(ctx, msg.Header)

	reply, err := t.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, t.requestError(ctx, err)
	}
	res, err = parseReply(t.name, reply)
	if err != nil && !time.Now().Before(deadline) {
		// The service gave up at the deadline it was given, just before this
		// side noticed its own: report the expiry, as for no reply at all.
		ctxErr := ctx.Err()
		if ctxErr == nil {
			ctxErr = context.DeadlineExceeded
		}
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("bustool: tool %s: %w (the service said: %w)", t.name, ctxErr, err))
	}
	return res, err
}

func (t *Tool) requestError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return failure.Retry("bustool: tool service %s is not running: nobody serves %s", t.name, t.subject)
	case ctx.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("bustool: tool %s: no reply: %w", t.name, ctx.Err()))
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return failure.Wrap(failure.Fatal, fmt.Errorf("bustool: tool %s: %w", t.name, err))
	}
	// Connection closed or reconnecting, a slow consumer: the bus, not the call.
	return failure.Wrap(failure.Retryable, fmt.Errorf("bustool: tool %s: %w", t.name, err))
}

func setHeader(h nats.Header, key, value string) {
	if value != "" {
		h.Set(key, oneLine(value, 512))
	}
}

// toolFromInfo returns the tool an endpoint of a skillbus tool service
// describes, or an error saying why it describes none.
func toolFromInfo(nc *nats.Conn, cfg Config, subject string, meta map[string]string) (*Tool, error) {
	name := meta[MetaTool]
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if want := Subject(cfg.Prefix, name); subject != want {
		return nil, fmt.Errorf("tool %s is served on %s, not %s", name, subject, want)
	}
	t := &Tool{nc: nc, name: name, subject: subject, description: meta[MetaDescription], timeout: cfg.CallTimeout}
	if s := meta[MetaSchema]; s != "" {
		v, err := tool.DecodeJSON([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("tool %s: its schema is not JSON: %v", name, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tool %s: its schema is not a JSON object", name)
		}
		t.schema = m
	}
	return t, nil
}

// sameTool reports whether two discovered tools describe the same thing.
func sameTool(a, b *Tool) bool {
	if a.name != b.name || a.subject != b.subject || a.description != b.description {
		return false
	}
	ja, _ := json.Marshal(a.schema)
	jb, _ := json.Marshal(b.schema)
	return string(ja) == string(jb)
}
