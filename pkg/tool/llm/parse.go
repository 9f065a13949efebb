package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skillbus/skillbus/pkg/tool"
	"strings"
	"unicode/utf8"
)

// ParseResponse reads a chat-completions response body and returns its first
// choice. It accepts what OpenAI-compatible servers send besides OpenAI's own
// shape: content as a list of text parts or null, and function arguments as a
// JSON object instead of a string.
func ParseResponse(body []byte) (*Response, error) {
	var raw struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message      *Message `json:"message"`
			FinishReason string   `json:"finish_reason"`
		} `json:"choices"`
		Usage *Usage `json:"usage"`
		// Some servers answer 200 with an error object.
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%v in %s", err, excerpt(body, 200))
	}
	if len(raw.Error) > 0 && string(raw.Error) != "null" {
		return nil, fmt.Errorf("the server reports an error: %s", errorMessage(body))
	}
	if len(raw.Choices) == 0 {
		return nil, errors.New("it has no choices")
	}
	c := raw.Choices[0]
	if c.Message == nil {
		return nil, errors.New("its first choice has no message")
	}
	out := &Response{ID: raw.ID, Model: raw.Model, Message: *c.Message, FinishReason: c.FinishReason}
	if out.Message.Role == "" {
		out.Message.Role = RoleAssistant
	}
	if raw.Usage != nil {
		out.Usage = *raw.Usage
	}
	return out, nil
}

// UnmarshalJSON reads a message whose content is a string, null, or a list of
// parts ({"type":"text","text":...}), whose text parts are joined.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	content, err := contentText(raw.Content)
	if err != nil {
		return err
	}
	*m = Message{Role: raw.Role, Content: content, Name: raw.Name, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID}
	return nil
}

// MarshalJSON writes the content of an assistant message that only calls tools
// as null, which every server accepts; some reject "".
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	var content any = m.Content
	if m.Content == "" && len(m.ToolCalls) > 0 {
		content = nil
	}
	return tool.MarshalJSON(struct {
		plain
		Content any `json:"content"`
	}{plain(m), content})
}

func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", fmt.Errorf("content: %v", err)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" || (p.Type == "" && p.Text != "") {
				b.WriteString(p.Text)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("content must be a string, null or a list of parts, got %s", excerpt(raw, 40))
}

// UnmarshalJSON reads arguments given as a JSON string, as OpenAI sends them,
// or as a JSON value, as some servers do.
func (f *FunctionCall) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	f.Name = raw.Name
	args := bytes.TrimSpace(raw.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
		f.Arguments = ""
	case args[0] == '"':
		return json.Unmarshal(args, &f.Arguments)
	default:
		f.Arguments = string(args)
	}
	return nil
}

// errorMessage finds the message in an error response: OpenAI's
// {"error":{"message":...}}, {"error":"..."}, {"message":"..."} or
// {"detail":"..."}; else a short excerpt of the body.
func errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return excerpt([]byte(inner.Message), 500)
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return excerpt([]byte(s), 500)
		case e.Message != "":
			return excerpt([]byte(e.Message), 500)
		case e.Detail != nil:
			if d, ok := e.Detail.(string); ok {
				return excerpt([]byte(d), 500)
			}
			b, _ := json.Marshal(e.Detail)
			return excerpt(b, 500)
		}
	}
	return excerpt(body, 200)
}

// excerpt returns the start of b on one line, valid UTF-8, at most n bytes,
// marked with "…" where cut.
func excerpt(b []byte, n int) string {
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if cut {
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s = strings.TrimSuffix(s, "\uFFFD") + "…"
	}
	return s
}
