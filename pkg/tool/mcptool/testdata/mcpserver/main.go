// Command mcpserver is a stdio MCP server for mcptool's tests, built with the
// same SDK: its tools show what a server process sees and how it fails.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func main() {
	fmt.Fprintln(os.Stderr, "mcpserver: starting")
	if os.Getenv("MCPSERVER_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "mcpserver: refusing to start: MCPSERVER_FAIL is set")
		os.Exit(2)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpserver", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Lists the process's environment and directory."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			env := os.Environ()
			sort.Strings(env)
			wd, _ := os.Getwd()
			return nil, map[string]any{"env": env, "pid": os.Getpid(), "wd": wd}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits in the middle of the call."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "mcpserver: crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
