package mcptool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/mcptool"
)

func Example() {
	ctx := context.Background()

	// An MCP server; usually another process ("command") or a URL ("url").
	server := mcp.NewServer(&mcp.Implementation{Name: "jira", Version: "1.0.0"}, nil)
	type viewArgs struct {
		Key string `json:"key" jsonschema:"the issue key, such as AAP-1"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "view_issue", Description: "Shows a Jira issue."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in viewArgs) (*mcp.CallToolResult, any, error) {
			if !strings.HasPrefix(in.Key, "AAP-") {
				return nil, nil, fmt.Errorf("issue %s not found", in.Key)
			}
			return nil, map[string]any{"key": in.Key, "status": "To Do"}, nil
		})

	c, err := mcptool.Open(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"jira": {Prefix: "jira_", Transport: func() mcp.Transport {
			client, srv := mcp.NewInMemoryTransports()
			if _, err := server.Connect(ctx, srv, nil); err != nil {
				panic(err)
			}
			return client
		}},
	}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	view := c.Tools()[0]
	fmt.Println(view.Name(), "-", view.Description())
	res, err := view.Call(ctx, tool.Call{Args: map[string]any{"key": "AAP-1"}})
	fmt.Println(res, err)
	_, err = view.Call(ctx, tool.Call{Args: map[string]any{"key": "XYZ-9"}})
	fmt.Println(err)
	// Output:
	// jira_view_issue - Shows a Jira issue.
	// map[key:AAP-1 status:To Do] <nil>
	// mcp: server jira: tool view_issue: issue XYZ-9 not found
}
