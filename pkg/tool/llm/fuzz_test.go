package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/tool"
)

// FuzzParseResponse feeds response bodies of any shape, as servers that call
// themselves OpenAI-compatible send them: a response parses or is an error,
// never a panic, and a parsed one marshals back.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
		`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
		`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":[1]}}}]}}]}`,
		`{"error":{"message":"quota exceeded","type":"insufficient_quota"}}`,
		`{"choices":[]}`,
		`{"choices":[{"message":{"content":5}}]}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := ParseResponse(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if resp.Message.Role == "" {
			t.Fatal("parsed a message without a role")
		}
		if _, err := json.Marshal(resp.Message); err != nil {
			t.Fatalf("the message does not marshal back: %v", err)
		}
		_ = Content(resp.Message.Content)
	})
}

// FuzzErrorMessage feeds error bodies: the message is one short line.
func FuzzErrorMessage(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"bad key"}}`, `{"error":"nope"}`, `{"message":"m"}`, `{"detail":[1,{"a":2}]}`,
		`<html>Bad Gateway</html>`, "\xff\xfe", ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := errorMessage(body)
		if !utf8.ValidString(msg) || strings.ContainsAny(msg, "\n\r") || len(msg) > 520 {
			t.Fatalf("errorMessage = %q", msg)
		}
	})
}

// FuzzParseJSON feeds model replies: what parses is JSON-like.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{"{\"a\":1}", "```json\n[1,2]\n```", "```\n{}\n```  ", "text", "[1, 1e999]", "{\"a\":99999999999999999999}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, ok := ParseJSON(text)
		if !ok {
			return
		}
		if err := tool.CheckValue(v); err != nil {
			t.Fatalf("ParseJSON(%q) = %#v, not JSON-like: %v", text, v, err)
		}
	})
}
