// Package instruct runs instruction skills: a SKILL.md without workflow steps,
// whose body tells a chat model what to do.
//
// # How a run goes
//
//	r, err := instruct.New(instruct.Config{Model: client}) // an *llm.Client
//	res, err := r.Execute(ctx, instruct.Run{
//		ExecutionID:   execID,
//		Skill:         s,
//		Inputs:        triggerData,
//		Tools:         workerTools,
//		ReadReference: func(ctx context.Context, path string) ([]byte, error) { return files.ReadFile(ctx, s, path) },
//		Observer:      obs,
//	})
//	// res.Output: the final reply, parsed when it is JSON
//
// Step by step:
//
//  1. The system prompt is the skill's body. If the run can read the skill's
//     files (Run.ReadReference), a list of its text files (its references/,
//     scripts/, ... with kind and size) follows under "## Skill files", and
//     the model gets the function read_reference(path) to read one: the
//     model sees the instructions at once and the files when it asks
//     (progressive disclosure). Only listed paths can be read.
//  2. The user message is the inputs — the trigger's data — as JSON.
//  3. The model is offered the tools the skill names in allowed-tools and
//     required_tools, less its disallowed_tools, that the worker has. An
//     argument pattern is not part of a name (Bash(git:*) is Bash). A skill
//     that names no tools gets none: a model is never handed the worker's
//     exec or http tool unasked. Tools describe themselves when they can
//     (Described: bus tools and MCP tools carry their descriptions and
//     schemas); http and exec are described here. A tool name the chat API
//     does not accept as a function name (jira.view) is offered as a
//     sanitised one (jira_view) and the call routed back.
//  4. Then the tool loop, at most MaxTurns (default 8) model turns: the model
//     answers or calls tools; each call runs, in order, with the step id
//     turn-<n>.call-<i> and the idempotency key <executionid>/<step>, and its
//     result goes back to the model as JSON (a string as is), cut at
//     MaxResultBytes. The first reply without tool calls ends the run.
//
// # When things go wrong
//
// A tool's failure normally goes back to the model as the tool's result, with
// its class and what to do about it —
//
//	error: slugify: argument "text" is required
//	(repairable failure: fix the arguments and call it again)
//
// — and so do calls of unknown tools and arguments that are not a JSON
// object: the model can fix its call or work around the problem. A Fatal
// failure (explicit, or by the patterns failure.ClassOf applies to an
// unclassified error: "permission denied", "not found", ...) ends the run instead, as does the run's context ending.
//
// The run fails, with the class the worker acts on:
//
//	no model configured (Config.Model nil)     Fatal (ErrNoModel): the plan falls back
//	no instructions, missing required tools    Fatal
//	a tool failed Fatal                        Fatal
//	the turns ran out                          Fatal
//	the model's request failed                 its class: 429/5xx Retryable, 400 Repairable, 401/403/404 Fatal
//	the context ended                          Retryable
//
// # Watching
//
// An Observer hears each model turn (TurnStarted, TurnCompleted with the reply
// and token usage) and each tool call (ToolStarted, ToolCompleted with result
// or error), in order, from the goroutine running Execute: enough for the
// worker to publish step.started, step.completed and step.failed events with
// the step ids turn-<n> and turn-<n>.call-<i>. The Result carries the whole
// transcript, the number of turns and tool calls, and the summed usage.
package instruct
