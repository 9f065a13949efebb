package mcptool

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Tool is a tool of an MCP server. It implements tool.Tool.
type Tool struct {
	srv         *server
	name        string
	mcpName     string
	description string
	schema      map[string]any
	// readOnly: the server annotates the tool readOnlyHint (it does not modify its
	// environment).
	readOnly bool
}

func newTool(s *server, t *mcp.Tool) (*Tool, error) {
	name := s.prefix + t.Name
	if t.Name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
		return nil, fmt.Errorf("mcp: server %s: tool %q has no usable name", s.name, name)
	}
	tl := &Tool{srv: s, name: name, mcpName: t.Name, description: t.Description,
		readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint}
	if t.InputSchema != nil {
		v, err := toValue(t.InputSchema)
		if m, ok := v.(map[string]any); err == nil && ok {
			tl.schema = m
		}
	}
	if tl.description == "" && t.Title != "" {
		tl.description = t.Title
	}
	return tl, nil
}

// Name is the tool's name: the prefixes and its MCP name.
func (t *Tool) Name() string { return t.name }

// ReadOnly reports whether the server annotates the tool readOnlyHint: its calls
// only read (tool.ReadOnly). Servers are the operator's to configure, so the hint is
// taken at its word; at worst a step is done again after a worker's crash.
func (t *Tool) ReadOnly(tool.Call) bool { return t.readOnly }

// MCPName is the tool's name on its server.
func (t *Tool) MCPName() string { return t.mcpName }

// Server is the name of the tool's server in the config.
func (t *Tool) Server() string { return t.srv.name }

// Description is the server's description of the tool.
func (t *Tool) Description() string { return t.description }

// InputSchema is the JSON Schema of the arguments, as the server gave it; the
// caller must not modify it.
func (t *Tool) InputSchema() map[string]any {
	if t.schema == nil {
		return map[string]any{"type": "object"}
	}
	return t.schema
}

// Call calls the tool on its server, connecting first if the connection was
// lost.
//
// The result is the structuredContent when the tool gives one, else its
// content: one item as itself, several as a list. Text is a string; images and
// audio are {"type", "mime_type", "data" (base64)}; resources
// {"type": "resource", "uri", "mime_type", "text" or "blob"}; resource links
// {"type": "resource_link", "uri", "name", ...}.
//
//	the tool reports an error (isError)                   classified by its text (Classify)
//	unknown tool, method not found                        Fatal
//	invalid params (the server rejected the arguments)    Repairable
//	other JSON-RPC errors                                  by their message (failure.ClassOf)
//	connection lost, server exited, timeout               Retryable
//	arguments that are not JSON-like                      Repairable
func (t *Tool) Call(ctx context.Context, c tool.Call) (v any, err error) {
	ctx, span := telemetry.StartClient(ctx, "tools/call "+t.mcpName,
		attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", t.mcpName),
		telemetry.AttrTool.String(t.name))
	defer func() { telemetry.End(span, err) }()
	return t.call(ctx, c)
}

func (t *Tool) call(ctx context.Context, c tool.Call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("%s: %w", t.where(), err))
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if err := tool.CheckValue(args[k]); err != nil {
			return nil, failure.Repair("%s: argument %q is not a JSON value: %v", t.where(), k, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.srv.cfg.timeout())
		defer cancel()
	}
	cs, err := t.srv.session(ctx)
	if err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: t.mcpName, Arguments: args}
	if c.IdempotencyKey != "" {
		params.Meta = mcp.Meta{"io.skillbus/idempotency-key": c.IdempotencyKey}
	}
	// Trace context in _meta, where MCP servers that trace look for it; the
	// stdio transport has no headers to carry it.
	if tp, ts := telemetry.Inject(ctx); tp != "" {
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[events.HeaderTraceParent] = tp
		if ts != "" {
			params.Meta[events.HeaderTraceState] = ts
		}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return nil, t.callError(ctx, cs, err)
	}
	if res.IsError {
		msg := contentText(res.Content)
		if msg == "" {
			msg = "the tool failed without a message"
		}
		return nil, failure.Wrap(Classify(msg), fmt.Errorf("%s: %s", t.where(), msg))
	}
	v, err := result(res)
	if err != nil {
		return nil, failure.Fatalf("%s: the result cannot be read: %v", t.where(), err)
	}
	return v, nil
}

func (t *Tool) where() string {
	return fmt.Sprintf("mcp: server %s: tool %s", t.srv.name, t.mcpName)
}

func (t *Tool) callError(ctx context.Context, cs *mcp.ClientSession, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return failure.Wrap(failure.Retryable, fmt.Errorf("%s: %w", t.where(), ctxErr))
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		e := fmt.Errorf("%s: %s", t.where(), rpc.Message)
		switch {
		case rpc.Code == jsonrpc.CodeMethodNotFound || strings.HasPrefix(rpc.Message, "unknown tool"):
			return failure.Wrap(failure.Fatal, fmt.Errorf("%w: the server does not offer it (any more)", e))
		case rpc.Code == jsonrpc.CodeInvalidParams:
			return failure.Wrap(failure.Repairable, e)
		}
		return failure.Wrap(failure.ClassOf(errors.New(rpc.Message)), e)
	}
	// The connection, not the call: start over with a new one next time.
	t.srv.drop(cs)
	msg := fmt.Errorf("%s: %w", t.where(), err)
	if tail := t.srv.stderrTail(); tail != "" {
		msg = fmt.Errorf("%w (stderr: %s)", msg, tail)
	}
	return failure.Wrap(failure.Retryable, msg)
}

func (s *server) stderrTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.Tail()
}

// argumentError matches the messages of tools that rejected their arguments,
// as the Go SDK writes them ("validating \"arguments\": ...", "unmarshaling
// arguments") and as other SDKs do ("Invalid arguments", "invalid params").
var argumentError = regexp.MustCompile(`(?i)\b(validating|validation|invalid|unmarshal+ing|missing)\W+(arguments?|params|input)\b|\binput validation\b|cannot unmarshal`)

// Classify gives the class of an error a tool reported: Repairable for
// rejected arguments, else what failure.ClassOf's patterns make of the text
// (not found, permission denied, ... Fatal; parameter, template, ...
// Repairable; anything else Retryable).
func Classify(msg string) failure.Class {
	if argumentError.MatchString(msg) {
		return failure.Repairable
	}
	return failure.ClassOf(errors.New(msg))
}

func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	return strings.ToValidUTF8(strings.Join(parts, "\n"), "\uFFFD")
}

// result maps a tool's result to JSON-like values.
func result(res *mcp.CallToolResult) (any, error) {
	if res.StructuredContent != nil {
		return toValue(res.StructuredContent)
	}
	switch len(res.Content) {
	case 0:
		return nil, nil
	case 1:
		return contentValue(res.Content[0])
	}
	out := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		v, err := contentValue(c)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func contentValue(c mcp.Content) (any, error) {
	switch c := c.(type) {
	case *mcp.TextContent:
		return strings.ToValidUTF8(c.Text, "\uFFFD"), nil
	case *mcp.ImageContent:
		return map[string]any{"type": "image", "mime_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)}, nil
	case *mcp.AudioContent:
		return map[string]any{"type": "audio", "mime_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)}, nil
	case *mcp.EmbeddedResource:
		m := map[string]any{"type": "resource"}
		if r := c.Resource; r != nil {
			m["uri"] = r.URI
			if r.MIMEType != "" {
				m["mime_type"] = r.MIMEType
			}
			if r.Blob != nil {
				m["blob"] = base64.StdEncoding.EncodeToString(r.Blob)
			} else {
				m["text"] = strings.ToValidUTF8(r.Text, "\uFFFD")
			}
		}
		return m, nil
	case *mcp.ResourceLink:
		m := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		if c.Description != "" {
			m["description"] = c.Description
		}
		if c.MIMEType != "" {
			m["mime_type"] = c.MIMEType
		}
		return m, nil
	}
	// A kind of content this SDK version knows and this code does not: its JSON.
	return toValue(c)
}

// toValue turns any JSON-marshallable value into JSON-like values.
func toValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return tool.DecodeJSON(b)
}
