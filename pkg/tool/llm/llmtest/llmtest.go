// Package llmtest is a chat-completions server for tests: a real HTTP server
// speaking the OpenAI protocol that answers with scripted replies, tool calls
// included, and records what it was asked.
//
//	srv := llmtest.Script(t,
//		llmtest.Calls(llmtest.ToolCall("c1", "slugify", map[string]any{"text": "Hi there"})),
//		llmtest.Text(`{"slug": "hi-there"}`),
//	)
//	client, _ := llm.New(srv.Config("test-model"))
//	... // run the code under test
//	reqs := srv.Requests() // what the model was sent, in order
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Reply is how the server answers one request.
type Reply struct {
	// Content is the assistant's text.
	Content string
	// ToolCalls are the assistant's function calls (see ToolCall).
	ToolCalls []llm.ToolCall
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string
	Usage        llm.Usage
	// Status, if not 0 or 200, fails the request with an OpenAI error object
	// whose message is Content.
	Status int
	// Body, if set, is sent as the response body as is (with Status).
	Body string
	// Wait holds the request until the client gives up on it; the server's
	// Waiting channel receives a value first.
	Wait bool
}

// Text is a reply with text only.
func Text(content string) Reply { return Reply{Content: content} }

// Calls is a reply that calls tools.
func Calls(calls ...llm.ToolCall) Reply { return Reply{ToolCalls: calls} }

// Error is a failed reply with an HTTP status and an OpenAI error message.
func Error(status int, message string) Reply { return Reply{Status: status, Content: message} }

// ToolCall is a function call with the given arguments: a string is sent as
// written (so it may be invalid JSON), anything else is marshalled.
func ToolCall(id, name string, args any) llm.ToolCall {
	s, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			panic(fmt.Sprintf("llmtest: arguments of %s: %v", name, err))
		}
		s = string(b)
	}
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: s}}
}

// Request is a request the server received.
type Request struct {
	llm.Request
	Header http.Header
	Body   []byte
}

// Server is a running chat-completions server, closed by t.Cleanup.
type Server struct {
	// Waiting receives a value whenever a Wait reply starts waiting.
	Waiting chan struct{}

	srv     *httptest.Server
	mu      sync.Mutex
	handler func(*Request) Reply
	reqs    []*Request
}

// New starts a server that answers each request with handler's reply. The
// handler runs on the server's goroutines, concurrently for concurrent requests.
func New(t testing.TB, handler func(*Request) Reply) *Server {
	s := &Server{handler: handler, Waiting: make(chan struct{}, 64)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// Script starts a server that answers the requests with replies, in order.
// A request beyond the script fails the test and gets a 500.
func Script(t testing.TB, replies ...Reply) *Server {
	var mu sync.Mutex
	next := 0
	return New(t, func(*Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(replies) {
			t.Errorf("llmtest: request %d, but the script has only %d replies", next+1, len(replies))
			return Error(http.StatusInternalServerError, "the script has ended")
		}
		next++
		return replies[next-1]
	})
}

// URL is the API's base URL, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Client is an HTTP client for the server whose connections end with it.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Config is an llm.Config for the server.
func (s *Server) Config(model string) llm.Config {
	return llm.Config{URL: s.URL(), Model: model, Client: s.Client()}
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such endpoint"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := &Request{Header: r.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, &req.Request); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("llmtest: the request is not JSON: %v", err)))
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()

	reply := s.handler(req)
	if reply.Wait {
		s.Waiting <- struct{}{}
		<-r.Context().Done()
		return
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if reply.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	if status != http.StatusOK {
		writeJSON(w, status, errorBody(reply.Content))
		return
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	model := req.Model
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", n),
		"object":  "chat.completion",
		"model":   model,
		"choices": []any{map[string]any{"index": 0, "message": llm.Message{Role: llm.RoleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls}, "finish_reason": finish}},
		"usage":   reply.Usage,
	})
}

func errorBody(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
