// Package llm talks to chat models over the OpenAI chat-completions protocol,
// which OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter,
// Groq and most gateways speak. It provides the client that instruction skills
// run on (package instruct) and the "llm" tool for workflow steps.
//
// # The client
//
// A Client needs the API's base URL and a model; the key is optional for
// local servers:
//
//	c, err := llm.New(llm.Config{
//		URL:    "https://api.openai.com/v1",
//		APIKey: os.Getenv("SKILLBUS_LLM_API_KEY"),
//		Model:  "gpt-4o-mini",
//	})
//	resp, err := c.Chat(ctx, llm.Request{
//		Messages: []llm.Message{
//			{Role: llm.RoleSystem, Content: "You label support tickets."},
//			{Role: llm.RoleUser, Content: ticket},
//		},
//		Tools: []llm.FunctionTool{llm.NewFunctionTool("lookup_customer", "Finds a customer by email.", schema)},
//	})
//	// resp.Message.Content is the text; resp.Message.ToolCalls the calls the model wants.
//
// The client sends one request per Chat and never retries, because retries
// belong to the broker, which redelivers the job with backoff and without holding a
// worker. Its errors carry the failure class
// that decides what the worker does next:
//
//	connection error, timeout, 408, 429, 5xx but 501   Retryable: the job is redelivered later
//	400, 422                                           Repairable: the request (prompt, tools, format) was wrong
//	401, 403, 404 (key, permission, model), 501, 4xx   Fatal: the plan falls back to the next skill
//	a 2xx that is not a chat completion                Fatal
//
// Messages name the method and URL (without credentials or query), the status
// and the API's own error message: "llm: POST https://api.openai.com/v1/chat/completions:
// 401 Unauthorized: Incorrect API key provided".
//
// Responses are read leniently, since "compatible" servers differ: content may
// be a string, null or a list of text parts; function arguments a JSON string
// or an object (ParseResponse).
//
// # The llm tool
//
// NewTool makes a Client a tool, for a workflow step that needs one answer:
//
//	steps:
//	  - id: classify
//	    tool: llm
//	    args:
//	      system: "Classify the sentiment. Answer {\"sentiment\": ...}."
//	      prompt: "{{ inputs.text }}"
//	      response_format: json
//
// It returns the reply's text, or with response_format json the parsed value
// (ParseJSON also takes JSON wrapped in a ``` fence, as models like to write it).
//
// # Testing
//
// Package llmtest runs a local server that speaks the protocol with scripted
// replies, tool calls included, and records the requests.
package llm
