package llm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

// byPrompt answers by the last user message: "status:NNN" fails with that
// status, "block" waits for the client to give up, "json" answers JSON, and
// anything else is echoed.
func byPrompt(r *llmtest.Request) llmtest.Reply {
	last := r.Messages[len(r.Messages)-1].Content
	var status int
	if _, err := fmt.Sscanf(last, "status:%d", &status); err == nil {
		return llmtest.Error(status, "scripted failure")
	}
	switch last {
	case "block":
		return llmtest.Reply{Wait: true}
	case "json":
		return llmtest.Text("```json\n{\"n\": 1, \"l\": [1.5, \"x\"]}\n```")
	}
	return llmtest.Text("you said: " + last)
}

func TestToolConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		srv := llmtest.New(t, byPrompt)
		c, err := llm.New(srv.Config("m"))
		if err != nil {
			t.Fatal(err)
		}
		prompt := func(p string) *tool.Call { return &tool.Call{Args: map[string]any{"prompt": p}} }
		return tooltest.Fixture{
			Tool:      llm.NewTool(c),
			OK:        *prompt("hello"),
			CheckOK:   func(t *testing.T, res any) { check(t, "you said: hello", res) },
			Retryable: prompt("status:429"),
			Fatal:     prompt("status:401"),
			BadArg:    &tool.Call{Args: map[string]any{"prompt": "x", "temperature": "hot"}},
			Blocking:  prompt("block"),
			Started:   func(t *testing.T) { <-srv.Waiting },
		}
	})
}

func TestTool(t *testing.T) {
	srv := llmtest.New(t, byPrompt)
	c, err := llm.New(srv.Config("default-model"))
	if err != nil {
		t.Fatal(err)
	}
	tl := llm.NewTool(c)
	tests := []struct {
		name  string
		args  map[string]any
		want  any
		class failure.Class
		msg   string
		sent  func(t *testing.T, r *llmtest.Request)
	}{
		{name: "prompt", args: map[string]any{"prompt": "hi", "system": "be nice", "model": "other", "temperature": int64(0), "max_tokens": int64(50)},
			want: "you said: hi",
			sent: func(t *testing.T, r *llmtest.Request) {
				want := []llm.Message{{Role: "system", Content: "be nice"}, {Role: "user", Content: "hi"}}
				check(t, want, r.Messages)
				if r.Model != "other" || r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens != 50 || r.ResponseFormat != nil {
					t.Errorf("request %+v", r.Request)
				}
			}},
		{name: "messages", args: map[string]any{"messages": []any{
			map[string]any{"role": "user", "content": "a"},
			map[string]any{"role": "assistant", "content": "b"},
			map[string]any{"role": "user", "content": "c"},
		}}, want: "you said: c", sent: func(t *testing.T, r *llmtest.Request) {
			if r.Model != "default-model" || len(r.Messages) != 3 {
				t.Errorf("request %+v", r.Request)
			}
		}},
		{name: "json", args: map[string]any{"prompt": "json", "response_format": "json"},
			want: map[string]any{"n": int64(1), "l": []any{1.5, "x"}},
			sent: func(t *testing.T, r *llmtest.Request) {
				check(t, llm.JSONObject, r.ResponseFormat)
			}},
		{name: "json asked, text given", args: map[string]any{"prompt": "plain", "response_format": "json"},
			class: failure.Retryable, msg: "the reply is not a JSON object or array: you said: plain"},
		{name: "no prompt", args: map[string]any{}, class: failure.Repairable, msg: `argument "prompt" (or "messages") is required`},
		{name: "both", args: map[string]any{"prompt": "a", "messages": []any{}}, class: failure.Repairable, msg: "exclude each other"},
		{name: "bad message", args: map[string]any{"messages": []any{map[string]any{"role": "tool", "content": "x"}}}, class: failure.Repairable, msg: "item 0"},
		{name: "empty messages", args: map[string]any{"messages": []any{}}, class: failure.Repairable, msg: "is empty"},
		{name: "bad format", args: map[string]any{"prompt": "a", "response_format": "xml"}, class: failure.Repairable, msg: `"response_format" must be "text" or "json"`},
		{name: "hot", args: map[string]any{"prompt": "a", "temperature": 3.0}, class: failure.Repairable, msg: "from 0 to 2"},
		{name: "unknown", args: map[string]any{"prompt": "a", "temprature": 1.0}, class: failure.Repairable, msg: `unknown argument "temprature"`},
		{name: "server says 400", args: map[string]any{"prompt": "status:400"}, class: failure.Repairable, msg: "400 Bad Request: scripted failure"},
		{name: "server says 503", args: map[string]any{"prompt": "status:503"}, class: failure.Retryable, msg: "503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Requests())
			got, err := tl.Call(t.Context(), tool.Call{Args: tt.args})
			if tt.class != "" {
				if failure.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("got %v (class %q), want a %s error containing %q", err, failure.ClassOf(err), tt.class, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check(t, tt.want, got)
			reqs := srv.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d requests sent, want 1", len(reqs)-before)
			}
			if tt.sent != nil {
				tt.sent(t, reqs[before])
			}
		})
	}
}

func TestToolDescribes(t *testing.T) {
	type described interface {
		Description() string
		InputSchema() map[string]any
	}
	d, ok := llm.NewTool(nil).(described)
	if !ok || d.Description() == "" || d.InputSchema()["type"] != "object" {
		t.Error("the llm tool does not describe itself")
	}
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		text string
		want any
		ok   bool
	}{
		{`{"a":1}`, map[string]any{"a": int64(1)}, true},
		{"  [1, 2.5]\n", []any{int64(1), 2.5}, true},
		{"```json\n{\"a\": true}\n```", map[string]any{"a": true}, true},
		{"```\n[]\n```\n", []any{}, true},
		{"Here it is:\n```json\n{}\n```", nil, false},
		{`"just a string"`, nil, false},
		{`42`, nil, false},
		{`{"a":1} trailing`, nil, false},
		{`{not json}`, nil, false},
		{``, nil, false},
	}
	for _, tt := range tests {
		got, ok := llm.ParseJSON(tt.text)
		if ok != tt.ok {
			t.Errorf("ParseJSON(%q) ok = %v, want %v", tt.text, ok, tt.ok)
			continue
		}
		check(t, tt.want, got)
		if c := llm.Content(tt.text); !ok && c != tt.text {
			t.Errorf("Content(%q) = %v, want the text", tt.text, c)
		}
	}
}

func check(t *testing.T, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func Example() {
	// A local server stands in for the model; any OpenAI-compatible URL works
	// the same (https://api.openai.com/v1, http://localhost:11434/v1, ...).
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"{\"sentiment\": \"positive\"}"}}]}`)
	}))
	defer model.Close()

	c, err := llm.New(llm.Config{URL: model.URL + "/v1", Model: "gpt-4o-mini", APIKey: "sk-...", Client: model.Client()})
	if err != nil {
		panic(err)
	}
	res, err := llm.NewTool(c).Call(context.Background(), tool.Call{Args: map[string]any{
		"system":          "Classify the sentiment of the text. Answer in JSON.",
		"prompt":          "I love this!",
		"response_format": "json",
	}})
	fmt.Println(res, err)
	// Output: map[sentiment:positive] <nil>
}
