package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/skillbus/skillbus/pkg/tool"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Request is a chat-completions request. Zero fields are left out of the JSON,
// so the server's defaults apply.
type Request struct {
	// Model names the model; "" is the client's Config.Model.
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	// Tools are the functions the model may call.
	Tools []FunctionTool `json:"tools,omitempty"`
	// ToolChoice is "auto", "none", "required" or a {"type":"function",...}
	// object; nil leaves it to the server ("auto" when there are tools).
	ToolChoice     any             `json:"tool_choice,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
}

// ResponseFormat asks for a kind of reply: {"type": "json_object"} for JSON.
type ResponseFormat struct {
	Type string `json:"type"`
}

// JSONObject is the ResponseFormat that asks for a JSON object.
var JSONObject = &ResponseFormat{Type: "json_object"}

// FunctionTool offers a function to the model.
type FunctionTool struct {
	Type     string   `json:"type"` // "function"
	Function Function `json:"function"`
}

// Function describes a function the model may call.
type Function struct {
	// Name is 1-64 of [A-Za-z0-9_-].
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments, an object schema.
	Parameters any `json:"parameters"`
}

// NewFunctionTool returns a FunctionTool of type "function".
func NewFunctionTool(name, description string, parameters any) FunctionTool {
	if parameters == nil {
		parameters = map[string]any{"type": "object"}
	}
	return FunctionTool{Type: "function", Function: Function{Name: name, Description: description, Parameters: parameters}}
}

// Message is one message of a conversation.
type Message struct {
	Role string `json:"role"`
	// Content is the text. In responses, content given as a list of parts is
	// joined; null is "".
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
	// ToolCalls are the assistant's function calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID answers a tool call, in a message of role "tool".
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is the model's call of a function.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and gives its arguments as JSON text, as
// the model wrote them: they may not be valid JSON.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Response is the first choice of a chat completion.
type Response struct {
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`
	// Message is the assistant's reply: text, tool calls, or both.
	Message Message `json:"message"`
	// FinishReason is why the model stopped: "stop", "tool_calls", "length", ...
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        Usage  `json:"usage"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.PromptTokens + v.PromptTokens, u.CompletionTokens + v.CompletionTokens, u.TotalTokens + v.TotalTokens}
}

// Config configures a Client. Zero values select the documented defaults.
type Config struct {
	// URL is the API's base URL, such as https://api.openai.com/v1 or
	// http://localhost:11434/v1 (Ollama); requests go to URL/chat/completions,
	// or to URL itself when it ends in /chat/completions. Required.
	URL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty: no header, as
	// local servers want.
	APIKey string
	// Model is the model of requests that name none. Required.
	Model string
	// Client sends the requests; wrap its Transport for tracing (otelhttp).
	// Nil: a client of its own with a transport cloned from
	// http.DefaultTransport.
	Client *http.Client
	// Timeout bounds one request, from sending it to reading the whole
	// response. Default 2m: models are slow.
	Timeout time.Duration
	// MaxResponseBytes is the largest response accepted; larger is Fatal.
	// Default 10 MiB.
	MaxResponseBytes int64
	// Headers are sent with every request (e.g. OpenRouter's HTTP-Referer).
	Headers map[string]string
	// UserAgent is sent unless Headers name one. Default "skillbus".
	UserAgent string
}

// Defaults of Config.
const (
	DefaultTimeout          = 2 * time.Minute
	DefaultMaxResponseBytes = 10 << 20
)

// Client talks to an OpenAI-compatible chat-completions endpoint. It never
// retries: a Retryable error goes back to the broker, which redelivers the
// job later without holding a worker. It is safe for concurrent
// use.
type Client struct {
	cfg      Config
	endpoint string
	safeURL  string
	hc       *http.Client
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("llm: URL is required (the chat-completions API's base URL, such as https://api.openai.com/v1)")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: URL %q is not an http or https URL", redact(cfg.URL))
	}
	if cfg.Model == "" {
		return nil, errors.New("llm: Model is required")
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/chat/completions") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/chat/completions"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "skillbus"
	}
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			hc.Transport = t.Clone()
		}
	}
	return &Client{cfg: cfg, endpoint: u.String(), safeURL: redact(u.String()), hc: hc}, nil
}

// Model is the default model.
func (c *Client) Model() string { return c.cfg.Model }

// StatusError is the error, inside a *failure.Error, for a response whose
// status is not 2xx. Use errors.As to read the status.
type StatusError struct {
	URL     string // without credentials or query
	Status  int
	Message string // the API's error message, or a short excerpt of the body
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("llm: POST %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Chat sends one chat-completions request and returns the first choice.
//
//	connection error, timeout, 408, 429, 5xx but 501   Retryable
//	400, 422 (the request: messages, tools, format)   Repairable
//	401, 403, 404, 501, other 4xx                      Fatal
//	a response that is not a chat completion           Fatal
//
// An error for a cancelled or expired ctx wraps ctx.Err().
func (c *Client) Chat(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("llm: %w", err))
	}
	if req.Model == "" {
		req.Model = c.cfg.Model
	}
	if len(req.Messages) == 0 {
		return nil, failure.Repair("llm: a chat request needs at least one message")
	}
	body, err := tool.MarshalJSON(req)
	if err != nil {
		return nil, failure.Repair("llm: the request does not encode as JSON: %v", err)
	}

	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, failure.Fatalf("llm: POST %s: %v", c.safeURL, err)
	}
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}

	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, c.transportError(ctx, callCtx, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		return nil, failure.Wrap(statusClass(resp), &StatusError{URL: c.safeURL, Status: resp.StatusCode, Message: errorMessage(b)})
	}
	limit := c.cfg.MaxResponseBytes
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, c.transportError(ctx, callCtx, resp, fmt.Errorf("reading the response: %w", err))
	}
	if int64(len(b)) > limit {
		return nil, failure.Fatalf("llm: POST %s: the response exceeds the limit of %d bytes", c.safeURL, limit)
	}
	out, err := ParseResponse(b)
	if err != nil {
		return nil, failure.Fatalf("llm: POST %s: the response is not a chat completion: %v", c.safeURL, err)
	}
	return out, nil
}

func (c *Client) transportError(parent, callCtx context.Context, resp *http.Response, err error) error {
	switch {
	case parent.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("llm: POST %s: %w", c.safeURL, parent.Err()))
	case callCtx.Err() != nil:
		return failure.Wrap(failure.Retryable, fmt.Errorf("llm: POST %s: no response within %s: %w", c.safeURL, c.cfg.Timeout, callCtx.Err()))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // it quotes the whole URL
	}
	class := failure.Fatal
	if retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), resp, err); retry || resp != nil {
		class = failure.Retryable
	}
	return failure.Wrap(class, fmt.Errorf("llm: POST %s: %w", c.safeURL, err))
}

// statusClass classifies a failed response like the http tool: what
// go-retryablehttp retries is Retryable; 400 and 422 mean the request was wrong.
func statusClass(resp *http.Response) failure.Class {
	if resp.StatusCode == http.StatusRequestTimeout {
		return failure.Retryable
	}
	if retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), resp, nil); retry {
		return failure.Retryable
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return failure.Repairable
	}
	return failure.Fatal
}

// redact drops credentials, query and fragment from a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid URL>"
	}
	u.User = nil
	q := u.RawQuery != ""
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	s := u.String()
	if q {
		s += "?…"
	}
	return s
}
