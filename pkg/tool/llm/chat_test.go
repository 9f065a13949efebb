package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newClient(t *testing.T, srv *llmtest.Server, edit func(*llm.Config)) *llm.Client {
	t.Helper()
	cfg := srv.Config("model-a")
	if edit != nil {
		edit(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChat(t *testing.T) {
	srv := llmtest.Script(t, llmtest.Reply{
		ToolCalls: []llm.ToolCall{llmtest.ToolCall("call_1", "slugify", map[string]any{"text": "Hi"})},
		Content:   "thinking",
		Usage:     llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	})
	c := newClient(t, srv, func(c *llm.Config) {
		c.APIKey = "sk-test"
		c.Headers = map[string]string{"X-Extra": "1"}
	})
	temp := 0.5
	resp, err := c.Chat(t.Context(), llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "be brief"},
			{Role: llm.RoleUser, Content: "hi <&>"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{llmtest.ToolCall("c0", "x", "{}")}},
			{Role: llm.RoleTool, ToolCallID: "c0", Content: "ok"},
		},
		Tools:          []llm.FunctionTool{llm.NewFunctionTool("slugify", "slugs", nil)},
		Temperature:    &temp,
		MaxTokens:      100,
		ResponseFormat: llm.JSONObject,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		ID: "chatcmpl-1", Model: "model-a",
		Message: llm.Message{Role: "assistant", Content: "thinking", ToolCalls: []llm.ToolCall{
			{ID: "call_1", Type: "function", Function: llm.FunctionCall{Name: "slugify", Arguments: `{"text":"Hi"}`}},
		}},
		FinishReason: "tool_calls",
		Usage:        llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	for k, v := range map[string]string{"Authorization": "Bearer sk-test", "X-Extra": "1", "Content-Type": "application/json", "User-Agent": "skillbus"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	var sent map[string]any
	if err := json.Unmarshal(r.Body, &sent); err != nil {
		t.Fatal(err)
	}
	wantSent := map[string]any{
		"model": "model-a",
		"messages": []any{
			map[string]any{"role": "system", "content": "be brief"},
			map[string]any{"role": "user", "content": "hi <&>"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				map[string]any{"id": "c0", "type": "function", "function": map[string]any{"name": "x", "arguments": "{}"}},
			}},
			map[string]any{"role": "tool", "content": "ok", "tool_call_id": "c0"},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "slugify", "description": "slugs", "parameters": map[string]any{"type": "object"},
		}}},
		"temperature":     0.5,
		"max_tokens":      100.0,
		"response_format": map[string]any{"type": "json_object"},
	}
	if diff := cmp.Diff(wantSent, sent); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(r.Body), "hi <&>") {
		t.Errorf("the request escapes HTML: %s", r.Body)
	}
}

func TestChatErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply llmtest.Reply
		class failure.Class
		msg   string
	}{
		{"rate limited", llmtest.Error(429, "slow down"), failure.Retryable, "429 Too Many Requests: slow down"},
		{"overloaded", llmtest.Error(503, "overloaded"), failure.Retryable, "503 Service Unavailable: overloaded"},
		{"server error", llmtest.Error(500, "oops"), failure.Retryable, "500"},
		{"request timeout", llmtest.Error(408, "slow"), failure.Retryable, "408"},
		{"bad request", llmtest.Error(400, "context_length_exceeded"), failure.Repairable, "400 Bad Request: context_length_exceeded"},
		{"unprocessable", llmtest.Error(422, "bad schema"), failure.Repairable, "422"},
		{"unauthorized", llmtest.Error(401, "invalid api key"), failure.Fatal, "401 Unauthorized: invalid api key"},
		{"forbidden", llmtest.Error(403, "no"), failure.Fatal, "403"},
		{"no such model", llmtest.Error(404, "model nope does not exist"), failure.Fatal, "404 Not Found: model nope does not exist"},
		{"not implemented", llmtest.Error(501, "no"), failure.Fatal, "501"},
		{"plain text error", llmtest.Reply{Status: 502, Body: "<html>Bad Gateway</html>"}, failure.Retryable, "502 Bad Gateway: <html>Bad Gateway</html>"},
		{"error string", llmtest.Reply{Status: 400, Body: `{"error":"model is required"}`}, failure.Repairable, "400 Bad Request: model is required"},
		{"detail", llmtest.Reply{Status: 422, Body: `{"detail":[{"loc":["body","messages"]}]}`}, failure.Repairable, `[{"loc":["body","messages"]}]`},
		{"not a completion", llmtest.Reply{Body: `{"hello":"world"}`}, failure.Fatal, "the response is not a chat completion: it has no choices"},
		{"not JSON", llmtest.Reply{Body: `<html>`}, failure.Fatal, "the response is not a chat completion"},
		{"error in a 200", llmtest.Reply{Body: `{"error":{"message":"quota"}}`}, failure.Fatal, "the server reports an error: quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.Script(t, tt.reply)
			c := newClient(t, srv, nil)
			_, err := c.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
			if got := failure.ClassOf(err); got != tt.class {
				t.Errorf("class %q, want %q (error %v)", got, tt.class, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			var se *llm.StatusError
			if tt.reply.Status != 0 && (!errors.As(err, &se) || se.Status != tt.reply.Status) {
				t.Errorf("error %v is not a StatusError of status %d", err, tt.reply.Status)
			}
		})
	}
}

func TestChatTransport(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := llmtest.Script(t)
		// Port 1: nothing listens there.
		c, err := llm.New(llm.Config{URL: "http://127.0.0.1:1/v1", Model: "m", Client: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
		if failure.ClassOf(err) != failure.Retryable || !strings.Contains(err.Error(), "llm: POST http://127.0.0.1:1/v1/chat/completions") {
			t.Errorf("got %v (class %q), want a Retryable error naming the URL", err, failure.ClassOf(err))
		}
	})
	t.Run("too large", func(t *testing.T) {
		srv := llmtest.Script(t, llmtest.Text(strings.Repeat("x", 2000)))
		c := newClient(t, srv, func(c *llm.Config) { c.MaxResponseBytes = 1000 })
		_, err := c.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
		if failure.ClassOf(err) != failure.Fatal || !strings.Contains(err.Error(), "exceeds the limit of 1000 bytes") {
			t.Errorf("got %v, want a Fatal size error", err)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		srv := llmtest.Script(t, llmtest.Reply{Wait: true})
		c := newClient(t, srv, nil)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-srv.Waiting; cancel() }()
		_, err := c.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
		if failure.ClassOf(err) != failure.Retryable || !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want a Retryable error wrapping context.Canceled", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		srv := llmtest.Script(t, llmtest.Reply{Wait: true})
		c := newClient(t, srv, func(c *llm.Config) { c.Timeout = 50 * time.Millisecond })
		_, err := c.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
		if failure.ClassOf(err) != failure.Retryable || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no response within 50ms") {
			t.Errorf("got %v, want a Retryable timeout", err)
		}
	})
	t.Run("no messages", func(t *testing.T) {
		srv := llmtest.Script(t)
		_, err := newClient(t, srv, nil).Chat(t.Context(), llm.Request{})
		if failure.ClassOf(err) != failure.Repairable {
			t.Errorf("got %v, want Repairable", err)
		}
	})
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  llm.Config
		msg  string
		path string // the path requests go to
	}{
		{"base", llm.Config{URL: "http://h/v1", Model: "m"}, "", "/v1/chat/completions"},
		{"trailing slash", llm.Config{URL: "http://h/v1/", Model: "m"}, "", "/v1/chat/completions"},
		{"full", llm.Config{URL: "http://h/api/chat/completions", Model: "m"}, "", "/api/chat/completions"},
		{"no URL", llm.Config{Model: "m"}, "URL is required", ""},
		{"not http", llm.Config{URL: "ftp://h", Model: "m"}, "not an http or https URL", ""},
		{"secret in a bad URL", llm.Config{URL: "ftp://user:secret@h/?key=secret", Model: "m"}, "ftp://h/?…", ""},
		{"no model", llm.Config{URL: "http://h"}, "Model is required", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llm.New(tt.cfg)
			if tt.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("New = %v, want an error containing %q", err, tt.msg)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
	// The path is where the requests go.
	var got string
	srv := llmtest.New(t, func(r *llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	for _, base := range []string{srv.URL(), srv.URL() + "/", srv.URL() + "/chat/completions"} {
		c, err := llm.New(llm.Config{URL: base, Model: "m", Client: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
		if err != nil {
			t.Errorf("URL %s: %v", base, err)
			continue
		}
		got = resp.Message.Content
	}
	if got != "ok" {
		t.Errorf("content %q", got)
	}
}

func TestUnmarshalVariants(t *testing.T) {
	tests := []struct {
		name string
		body string
		want llm.Message
	}{
		{"null content", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`,
			llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "a", Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: `{"x":1}`}}}}},
		{"parts", `{"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}}]}`,
			llm.Message{Role: "assistant", Content: "ab"}},
		{"object arguments", `{"choices":[{"message":{"content":"","tool_calls":[{"id":"a","function":{"name":"f","arguments":{"x":1}}}]}}]}`,
			llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "a", Function: llm.FunctionCall{Name: "f", Arguments: `{"x":1}`}}}}},
		{"no role", `{"choices":[{"message":{"content":"hi"}}]}`, llm.Message{Role: "assistant", Content: "hi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := llm.ParseResponse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, resp.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"choices":[]}`, `{"choices":[{}]}`, `{"choices":[{"message":{"content":5}}]}`} {
		if _, err := llm.ParseResponse([]byte(bad)); err == nil {
			t.Errorf("ParseResponse(%s) succeeded", bad)
		}
	}
}

func TestStatusErrorForUnknownStatus(t *testing.T) {
	srv := llmtest.Script(t, llmtest.Reply{Status: http.StatusTeapot, Body: "{}"})
	_, err := newClient(t, srv, nil).Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if failure.ClassOf(err) != failure.Fatal {
		t.Errorf("418 gave %v, want Fatal", err)
	}
}
