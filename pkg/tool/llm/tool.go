package llm

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// Chatter sends chat requests; *Client is one.
type Chatter interface {
	Chat(ctx context.Context, req Request) (*Response, error)
}

// NewTool returns the "llm" tool, which asks the model one question per call.
//
// Arguments:
//
//	prompt           the user message (one of prompt and messages is required)
//	messages         the conversation: a list of {"role": ..., "content": ...}
//	system           a system message put first
//	model            replaces the client's default model
//	temperature      a number from 0 to 2
//	max_tokens       the most tokens of the reply
//	response_format  "text" (default) or "json"
//
// The result is the reply's text or, with response_format "json", its JSON
// value; a reply that is not JSON then is a Retryable error (the model may do
// better next time). Errors are the client's (see Client.Chat).
func NewTool(c Chatter) tool.Tool {
	return &llmTool{c: c}
}

type llmTool struct{ c Chatter }

func (*llmTool) Name() string { return "llm" }

// Description and InputSchema describe the tool to models.
func (*llmTool) Description() string {
	return "Asks a chat model a question and returns its answer (text, or JSON with response_format json)."
}

func (*llmTool) InputSchema() map[string]any {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"prompt": str("the question or task"),
			"messages": map[string]any{
				"type":        "array",
				"description": "the conversation, instead of prompt",
				"items": map[string]any{
					"type":       "object",
					"properties": map[string]any{"role": str("system, user or assistant"), "content": str("the text")},
					"required":   []any{"role", "content"},
				},
			},
			"system":          str("a system message"),
			"model":           str("the model, instead of the default"),
			"temperature":     map[string]any{"type": "number", "minimum": 0, "maximum": 2},
			"max_tokens":      map[string]any{"type": "integer", "minimum": 1},
			"response_format": map[string]any{"type": "string", "enum": []any{"text", "json"}},
		},
	}
}

func (t *llmTool) Call(ctx context.Context, c tool.Call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, fmt.Errorf("llm: %w", err))
	}
	req, asJSON, err := toolRequest(c.Args)
	if err != nil {
		return nil, err
	}
	resp, err := t.c.Chat(ctx, req)
	if err != nil {
		return nil, err
	}
	text := resp.Message.Content
	if !asJSON {
		return strings.ToValidUTF8(text, "\uFFFD"), nil
	}
	v, ok := ParseJSON(text)
	if !ok {
		return nil, failure.Retry("llm: response_format json was asked for, but the reply is not a JSON object or array: %s", excerpt([]byte(text), 200))
	}
	return v, nil
}

func toolRequest(args map[string]any) (Request, bool, error) {
	a := tool.NewArgs("llm", args)
	var req Request
	if err := a.Only(skill.BuiltinToolArgs["llm"]...); err != nil {
		return req, false, err
	}
	system, err := a.OptString("system", "")
	if err != nil {
		return req, false, err
	}
	if system != "" {
		req.Messages = append(req.Messages, Message{Role: RoleSystem, Content: system})
	}
	switch {
	case a.Has("prompt") && a.Has("messages"):
		return req, false, failure.Repair("llm: arguments \"prompt\" and \"messages\" exclude each other; give one")
	case a.Has("prompt"):
		p, err := a.String("prompt")
		if err != nil {
			return req, false, err
		}
		req.Messages = append(req.Messages, Message{Role: RoleUser, Content: p})
	case a.Has("messages"):
		list, err := a.List("messages")
		if err != nil {
			return req, false, err
		}
		if len(list) == 0 {
			return req, false, a.Errorf("messages", "is empty")
		}
		for i, m := range list {
			mm, ok := m.(map[string]any)
			role, _ := mm["role"].(string)
			content, okc := mm["content"].(string)
			if !ok || !okc || (role != RoleSystem && role != RoleUser && role != RoleAssistant) {
				return req, false, a.Errorf("messages", "must be a list of {\"role\": system|user|assistant, \"content\": string}; item %d is not", i)
			}
			req.Messages = append(req.Messages, Message{Role: role, Content: content})
		}
	default:
		return req, false, failure.Repair("llm: argument \"prompt\" (or \"messages\") is required")
	}
	if req.Model, err = a.OptString("model", ""); err != nil {
		return req, false, err
	}
	if a.Has("temperature") {
		f, ok := number(args["temperature"])
		if !ok || f < 0 || f > 2 {
			return req, false, a.Errorf("temperature", "must be a number from 0 to 2, got %v", args["temperature"])
		}
		req.Temperature = &f
	}
	maxTokens, err := a.OptInt("max_tokens", 0)
	if err != nil {
		return req, false, err
	}
	if maxTokens < 0 || maxTokens > math.MaxInt32 {
		return req, false, a.Errorf("max_tokens", "must be positive, got %d", maxTokens)
	}
	req.MaxTokens = int(maxTokens)
	format, err := a.OptString("response_format", "text")
	if err != nil {
		return req, false, err
	}
	switch strings.ToLower(format) {
	case "text":
		return req, false, nil
	case "json", "json_object":
		req.ResponseFormat = JSONObject
		return req, true, nil
	}
	return req, false, a.Errorf("response_format", "must be \"text\" or \"json\", got %q", format)
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, !math.IsNaN(v)
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	}
	return 0, false
}
