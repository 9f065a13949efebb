package mcptool_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/mcptool"
)

// TestTraceContextInMeta checks that a call carries the caller's trace context in
// the request's _meta, where MCP servers that trace read it.
func TestTraceContextInMeta(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "meta", Description: "Returns the trace context it got."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			meta := req.Params.Meta
			return nil, map[string]any{"traceparent": meta["traceparent"], "tracestate": meta["tracestate"]}, nil
		})
	c := open(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"m": {Transport: inMemory(t, srv)}}})
	tl := toolNamed(t, c, "meta")

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := telemetry.Extract(t.Context(), tp, "k=v")
	res, err := tl.Call(ctx, tool.Call{Args: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	got := res.(map[string]any)
	if got["traceparent"] != tp || got["tracestate"] != "k=v" {
		t.Errorf("the server got _meta %v, want traceparent %s and tracestate k=v", got, tp)
	}

	res, err = tl.Call(t.Context(), tool.Call{Args: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(map[string]any); got["traceparent"] != nil {
		t.Errorf("a call without a trace sent traceparent %v", got["traceparent"])
	}
}
