// Package bustool puts tools on the bus: any process serves a tool as a NATS
// micro service under skillbus.tool.<name>, discoverable with $SRV.INFO like any NATS
// service, and workers call it like a built-in one.
//
// # Serving a tool
//
// A tool is a tool.Tool, so a function is enough. Serve publishes it under
// skillbus.tool.<name> and answers until Shutdown:
//
//	slugify := tool.Func("slugify", func(ctx context.Context, c tool.Call) (any, error) {
//		text, err := tool.NewArgs("slugify", c.Args).String("text")
//		if err != nil {
//			return nil, err // Repairable: the caller gave bad arguments
//		}
//		return slug(text), nil
//	})
//	srv, err := bustool.Serve(nc, bustool.ServerConfig{Name: "text-tools"}, bustool.Def{
//		Tool:        slugify,
//		Description: "Turns a title into a URL slug.",
//		Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
//	})
//	...
//	defer srv.Shutdown(ctx)
//
// Each tool is an endpoint of the service; instances of one service share the
// calls through a queue group, so run as many as the load needs. A handler's
// error goes back with its failure class (failure.ClassOf: an explicit
// *failure.Error, else the patterns its message matches): return failure.Retry for "try
// again later", failure.Fatalf for "this will never work", failure.Repair (or an
// Args error) for "the arguments are wrong". A panic is a Fatal error, not a
// crash. Calls run concurrently, at most ServerConfig.MaxConcurrent at a time,
// each with the deadline the caller will wait for. There is no cancellation
// message: a caller that gives up before its deadline leaves the call running
// until then.
//
// examples/tool-service is a complete service with two tools.
//
// # Calling a tool
//
// New returns the tool.Tool for a name; Discover returns every tool the bus
// serves, with its description and argument schema:
//
//	tools, err := bustool.Discover(ctx, nc, bustool.Config{})
//	res, err := tools[0].Call(ctx, tool.Call{Args: map[string]any{"text": "Hello, World"}})
//
// A call is one request-reply with the context's deadline (CallTimeout when it
// has none). Nobody serving the tool is a Retryable "tool service X is not
// running", as are timeouts and a lost connection: the broker retries the job
// later, when the service may be back.
//
// # Keeping up with the bus
//
// Tool services start and stop while workers run. A Watcher holds a tool.Set of
// the worker's own tools plus the bus tools, rediscovered every Interval, on
// Refresh, and by Ensure when a skill names a tool the set lacks:
//
//	w, err := bustool.NewWatcher(nc, bustool.WatcherConfig{Base: builtins})
//	err = w.Start(ctx)
//	defer w.Stop()
//	...
//	set := w.Ensure(ctx, s.RequiredTools...) // per job
//
// A bus tool never replaces one of the worker's own of the same name.
//
// # The protocol
//
// Tool services can be written in any language with a NATS client; this is all
// there is to it.
//
// Discovery is micro's: a request to $SRV.INFO gathers every service's info. A
// skillbus tool service has the service metadata skillbus.protocol = "tool/1";
// each of its endpoints that has the metadata skillbus.tool is a tool:
//
//	skillbus.tool         the tool's name: 1-64 of [A-Za-z0-9_-]
//	skillbus.description  what it does
//	skillbus.schema       the JSON Schema of its arguments, as JSON text
//
// and must be served on <prefix>.tool.<name>.
//
// A call is a request on that subject. Its payload is the arguments, a JSON
// object; these headers carry the rest:
//
//	Skillbus-Timeout-Ms     milliseconds the caller waits for the reply
//	Skillbus-Execution-Id   the execution making the call
//	Skillbus-Step           the workflow step making the call
//	Idempotency-Key         <executionid>/<step>: a tool with side effects does them once per key
//
// A result is a reply whose payload is one JSON value. An error is a reply with
// micro's error headers: Nats-Service-Error-Code is the failure class
// (retryable, fatal or repairable) and Nats-Service-Error the message; the
// payload may repeat both as {"class": ..., "message": ...} to keep a message
// with line breaks whole. From services that send HTTP-like codes instead, 400
// and 422 are repairable, 408, 429 and 5xx but 501 retryable, other 4xx and 501
// fatal; any other code is classified by its message.
//
// From the command line:
//
//	nats micro ls
//	nats req skillbus.tool.slugify '{"text":"Hello, World"}'
package bustool
