// Package mcptool makes the tools of Model Context Protocol servers skillbus
// tools, with the official Go SDK (github.com/modelcontextprotocol/go-sdk).
// Tools such as jira_view_issue, git_create_branch and kube_login, which
// workflow steps commonly call, are served this way.
//
// # Configuring a worker
//
// A worker reads the "mcpServers" JSON file most MCP clients use (Claude
// Desktop, Cursor, ...), with a few fields of skillbus's own:
//
//	{
//	  "mcpServers": {
//	    "jira": {
//	      "command": "npx", "args": ["-y", "mcp-atlassian"],
//	      "env": {"PATH": "${PATH}", "HOME": "${HOME}", "JIRA_API_TOKEN": "${JIRA_API_TOKEN}"},
//	      "prefix": "jira_"
//	    },
//	    "search": {
//	      "url": "https://mcp.example.com/mcp",
//	      "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
//	      "tools": ["web_search"], "timeout": "20s"
//	    }
//	  }
//	}
//
// A server with a command runs as a child process speaking MCP on stdin and
// stdout (stdio); one with a url is reached over streamable HTTP. ${NAME} takes
// a value from the worker's environment when the file is read, so secrets stay
// out of it — and that is the only way anything of the worker's environment
// reaches a stdio server: its environment is exactly "env", because the
// worker's holds the worker's own credentials. Most servers started with npx
// or uvx need at least PATH and HOME. A command without a slash is looked up
// in env's PATH when it sets one, else in the worker's. What a stdio server
// writes to stderr goes to the worker's log at debug level, and its last lines
// into the error when it fails to start or dies.
//
// "prefix" (per server, after the file's top-level "prefix") renames the
// server's tools: with "jira_", the server's view_issue is the skillbus tool
// jira_view_issue. "tools" keeps only the named tools; "disabled": true leaves
// a server out; "timeout" bounds calls that have no deadline of their own
// (default 60s) and connecting.
//
// # Using the tools
//
//	cfg, err := mcptool.LoadConfig("mcp.json", os.Getenv)
//	c, err := mcptool.Open(ctx, cfg) // connects, lists the tools
//	defer c.Close()
//	for _, t := range c.Tools() { ... } // each a tool.Tool
//
// Open fails, naming the server, when a server cannot be reached or two tools
// would share a name. Each tool keeps its server's description and input
// schema (Description, InputSchema), which instruction skills offer to the
// model. A connection that breaks — the server process died, the HTTP server
// restarted — is dropped, and the next call connects anew.
//
// # Results and failures
//
// A tool's structuredContent, when it gives one, is the result as JSON-like
// values. Otherwise its content is: text as a string, a single item as itself,
// several as a list (images, audio and resources as maps, see Tool.Call).
//
// MCP tools report failure in text (isError), without a class. Classify gives
// it one: a rejected argument (the SDK's `validating "arguments"`, "invalid
// params", ...) is Repairable; otherwise failure.ClassOf's patterns decide, as for any
// unclassified error: "not found", "permission denied" Fatal; "parameter",
// "template" Repairable; everything else Retryable. Protocol errors: an unknown
// tool is Fatal, invalid params Repairable. A lost connection, a server that
// exited and a timeout are Retryable: the broker retries the job later.
//
// Call.IdempotencyKey travels in the request's _meta as
// "io.skillbus/idempotency-key", for servers that want to honour it.
package mcptool
