package instruct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is an Observer that writes down what it hears.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) TurnStarted(turn int) { r.add("turn %d started", turn) }
func (r *recorder) TurnCompleted(turn int, reply llm.Message, _ llm.Usage, err error, _ time.Duration) {
	r.add("turn %d completed: %d calls, %q, err=%v", turn, len(reply.ToolCalls), reply.Content, err)
}
func (r *recorder) ToolStarted(c instruct.ToolCall) {
	r.add("%s %s started %v", c.Step(), c.Tool, c.Args)
}
func (r *recorder) ToolCompleted(c instruct.ToolCall, res any, err error, _ time.Duration) {
	r.add("%s %s completed: %v, err=%v", c.Step(), c.Tool, res, err)
}

// describedTool is a tool that describes itself, as bus and MCP tools do.
type describedTool struct {
	tool.Tool
	desc   string
	schema map[string]any
}

func (d describedTool) Description() string         { return d.desc }
func (d describedTool) InputSchema() map[string]any { return d.schema }

// slugCalls records the calls of the slugify tool.
type slugCalls struct {
	mu    sync.Mutex
	calls []tool.Call
}

func (s *slugCalls) tool() tool.Tool {
	return describedTool{
		Tool: tool.Func("slugify", func(ctx context.Context, c tool.Call) (any, error) {
			s.mu.Lock()
			s.calls = append(s.calls, c)
			s.mu.Unlock()
			text, err := tool.NewArgs("slugify", c.Args).String("text")
			if err != nil {
				return nil, err
			}
			return strings.ReplaceAll(strings.ToLower(text), " ", "-"), nil
		}),
		desc:   "Slugifies text.",
		schema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
	}
}

var failing = tool.Func("failing", func(ctx context.Context, c tool.Call) (any, error) {
	mode, _ := c.Args["mode"].(string)
	switch mode {
	case "fatal":
		return nil, failure.Fatalf("failing: permission denied for the project")
	case "retry":
		return nil, failure.Retry("failing: upstream is busy")
	case "plain-notfound":
		return nil, errors.New("record 7 not found")
	}
	return map[string]any{"mode": mode, "n": int64(len(mode))}, nil
})

func newSkill() *skill.Skill {
	return &skill.Skill{
		Name:            "triage",
		Kind:            skill.KindInstruction,
		Body:            "# Triage\n\nLabel the ticket. Answer with JSON {\"label\": ...}.\n",
		AllowedTools:    []string{"slugify", "failing", "Bash(git:*)", "http", "exec"},
		DisallowedTools: []string{"exec"},
		Resources: []skill.Resource{
			{Path: "references/labels.md", Kind: skill.ResourceReference, Size: 1234, Inline: true},
			{Path: "assets/logo.png", Kind: skill.ResourceAsset, Size: 50, Binary: true},
			{Path: "scripts/check.sh", Kind: skill.ResourceScript, Size: 20, Inline: true},
		},
	}
}

func toolSet(t *testing.T, tools ...tool.Tool) *tool.Set {
	t.Helper()
	s, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runner(t *testing.T, srv *llmtest.Server, cfg instruct.Config) *instruct.Runner {
	t.Helper()
	c, err := llm.New(srv.Config("model-x"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = c
	r, err := instruct.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestToolLoop runs a skill through two turns of tool calls and checks every
// request the model got, the tool calls and the observer's account.
func TestToolLoop(t *testing.T) {
	srv := llmtest.Script(t,
		llmtest.Reply{Content: "Let me look.", ToolCalls: []llm.ToolCall{
			llmtest.ToolCall("c1", "slugify", map[string]any{"text": "Broken Login"}),
			llmtest.ToolCall("c2", "read_reference", map[string]any{"path": "references/labels.md"}),
		}, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.ToolCall("c3", "failing", map[string]any{"mode": "retry"})},
			Usage: llm.Usage{PromptTokens: 200, CompletionTokens: 5, TotalTokens: 205}},
		llmtest.Reply{Content: "```json\n{\"label\": \"bug\", \"slug\": \"broken-login\"}\n```"},
	)
	var slug slugCalls
	var read []string
	obs := &recorder{}
	res, err := runner(t, srv, instruct.Config{}).Execute(t.Context(), instruct.Run{
		ExecutionID: "exec1",
		Skill:       newSkill(),
		Inputs:      map[string]any{"title": "Broken login <b>", "id": int64(7)},
		Tools:       toolSet(t, slug.tool(), failing, tool.Echo(), tool.NewHTTP(tool.HTTPConfig{}), tool.NewExec(tool.ExecConfig{})),
		ReadReference: func(ctx context.Context, path string) ([]byte, error) {
			read = append(read, path)
			return []byte("bug: something is broken\nfeature: a wish"), nil
		},
		Observer: obs,
	})
	if err != nil {
		t.Fatal(err)
	}

	if diff := cmp.Diff(map[string]any{"label": "bug", "slug": "broken-login"}, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if res.Turns != 3 || res.ToolCalls != 3 || len(res.Transcript) != 8 || res.Usage.TotalTokens != 315 {
		t.Errorf("turns %d, tool calls %d, transcript %d, tokens %d; want 3, 3, 8, 315", res.Turns, res.ToolCalls, len(res.Transcript), res.Usage.TotalTokens)
	}
	if diff := cmp.Diff(map[string]any{"result": res.Output, "turns": int64(3), "tool_calls": int64(3), "messages": int64(8)}, res.Outputs()); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"references/labels.md"}, read); diff != "" {
		t.Errorf("files read (-want +got):\n%s", diff)
	}
	if len(slug.calls) != 1 || slug.calls[0].ExecutionID != "exec1" || slug.calls[0].Step != "turn-1.call-0" || slug.calls[0].IdempotencyKey != "exec1/turn-1.call-0" {
		t.Errorf("slugify calls %+v", slug.calls)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	first := reqs[0]
	wantSystem := "# Triage\n\nLabel the ticket. Answer with JSON {\"label\": ...}.\n\n## Skill files\n\n" +
		"This skill comes with these files. Read one with the read_reference tool when you need it:\n\n" +
		"- references/labels.md (reference, 1.2 kB)\n- scripts/check.sh (script, 20 bytes)\n"
	if diff := cmp.Diff([]llm.Message{
		{Role: "system", Content: wantSystem},
		{Role: "user", Content: `{"id":7,"title":"Broken login <b>"}`},
	}, first.Messages); diff != "" {
		t.Errorf("first request's messages (-want +got):\n%s", diff)
	}
	var functions []string
	for _, f := range first.Tools {
		functions = append(functions, f.Function.Name+": "+f.Function.Description)
	}
	if diff := cmp.Diff([]string{
		"failing: The failing tool.",
		"http: Sends one HTTP request and returns {status, headers, body}; body is parsed when the response is JSON.",
		"slugify: Slugifies text.",
		"read_reference: Reads one of the skill's files, listed in the instructions, and returns its text.",
	}, functions); diff != "" {
		t.Errorf("offered functions (-want +got):\n%s", diff)
	}
	var refSchema map[string]any
	b, _ := json.Marshal(first.Tools[3].Function.Parameters)
	_ = json.Unmarshal(b, &refSchema)
	if diff := cmp.Diff([]any{"references/labels.md", "scripts/check.sh"}, refSchema["properties"].(map[string]any)["path"].(map[string]any)["enum"]); diff != "" {
		t.Errorf("read_reference's paths (-want +got):\n%s", diff)
	}

	third := reqs[2].Messages
	if diff := cmp.Diff([]llm.Message{
		{Role: "tool", ToolCallID: "c1", Content: "broken-login"},
		{Role: "tool", ToolCallID: "c2", Content: "bug: something is broken\nfeature: a wish"},
		{Role: "assistant", ToolCalls: []llm.ToolCall{llmtest.ToolCall("c3", "failing", map[string]any{"mode": "retry"})}},
		{Role: "tool", ToolCallID: "c3", Content: "error: failing: upstream is busy\n(retryable failure: it may work if you call it again later)"},
	}, third[3:]); diff != "" {
		t.Errorf("the last request's tail (-want +got):\n%s", diff)
	}

	if diff := cmp.Diff([]string{
		"turn 1 started",
		`turn 1 completed: 2 calls, "Let me look.", err=<nil>`,
		"turn-1.call-0 slugify started map[text:Broken Login]",
		"turn-1.call-0 slugify completed: broken-login, err=<nil>",
		"turn-1.call-1 read_reference started map[path:references/labels.md]",
		"turn-1.call-1 read_reference completed: bug: something is broken\nfeature: a wish, err=<nil>",
		"turn 2 started",
		`turn 2 completed: 1 calls, "", err=<nil>`,
		"turn-2.call-0 failing started map[mode:retry]",
		"turn-2.call-0 failing completed: <nil>, err=failing: upstream is busy",
		"turn 3 started",
		"turn 3 completed: 0 calls, \"```json\\n{\\\"label\\\": \\\"bug\\\", \\\"slug\\\": \\\"broken-login\\\"}\\n```\", err=<nil>",
	}, obs.events); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// TestToolTrouble checks what the model is told when its calls go wrong, and
// which failures end the run.
func TestToolTrouble(t *testing.T) {
	tests := []struct {
		name  string
		call  llm.ToolCall
		told  string        // what the model got back, when the run goes on
		class failure.Class // the run's failure, when it ends
		msg   string
	}{
		{name: "unknown tool", call: llmtest.ToolCall("x", "exec", map[string]any{"command": []any{"ls"}}),
			told: "error: there is no tool \"exec\"; the tools are: failing, read_reference, slugify\n(repairable failure: fix the arguments and call it again)"},
		{name: "bad JSON", call: llmtest.ToolCall("x", "slugify", `{"text": `),
			told: "error: the arguments of slugify are not a JSON object: unexpected EOF\n(repairable failure: fix the arguments and call it again)"},
		{name: "not an object", call: llmtest.ToolCall("x", "slugify", `["a"]`),
			told: "error: the arguments of slugify are not a JSON object: got a list\n(repairable failure: fix the arguments and call it again)"},
		{name: "bad argument", call: llmtest.ToolCall("x", "slugify", map[string]any{"txt": "a"}),
			told: "error: slugify: argument \"text\" is required\n(repairable failure: fix the arguments and call it again)"},
		{name: "unlisted file", call: llmtest.ToolCall("x", "read_reference", map[string]any{"path": "../../etc/passwd"}),
			told: "error: read_reference: the skill has no file \"../../etc/passwd\"; its files are: references/labels.md, scripts/check.sh\n(repairable failure: fix the arguments and call it again)"},
		{name: "result", call: llmtest.ToolCall("", "failing", map[string]any{"mode": "ok"}), told: `{"mode":"ok","n":2}`},
		{name: "fatal", call: llmtest.ToolCall("x", "failing", map[string]any{"mode": "fatal"}),
			class: failure.Fatal, msg: "instruct: skill triage: tool failing: failing: permission denied for the project"},
		{name: "fatal by pattern", call: llmtest.ToolCall("x", "failing", map[string]any{"mode": "plain-notfound"}),
			class: failure.Fatal, msg: "record 7 not found"},
		{name: "file gone", call: llmtest.ToolCall("x", "read_reference", map[string]any{"path": "scripts/check.sh"}),
			class: failure.Fatal, msg: "read_reference scripts/check.sh: triage@1: scripts/check.sh: version not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.Script(t, llmtest.Calls(tt.call), llmtest.Text("done"))
			var slug slugCalls
			res, err := runner(t, srv, instruct.Config{}).Execute(t.Context(), instruct.Run{
				Skill: newSkill(),
				Tools: toolSet(t, slug.tool(), failing),
				ReadReference: func(ctx context.Context, path string) ([]byte, error) {
					return nil, fmt.Errorf("triage@1: %s: version not found", path)
				},
			})
			if tt.class != "" {
				if failure.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("got %v (class %q), want a %s error containing %q", err, failure.ClassOf(err), tt.class, tt.msg)
				}
				if len(srv.Requests()) != 1 {
					t.Errorf("the model was asked again after a fatal failure")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != "done" {
				t.Errorf("output %v", res.Output)
			}
			msgs := srv.Requests()[1].Messages
			last := msgs[len(msgs)-1]
			if last.Role != "tool" || last.Content != tt.told {
				t.Errorf("the model was told %q (role %s), want %q", last.Content, last.Role, tt.told)
			}
			if id := msgs[len(msgs)-2].ToolCalls[0].ID; id == "" || last.ToolCallID != id {
				t.Errorf("tool message answers %q, the call's id is %q", last.ToolCallID, id)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name    string
		replies []llmtest.Reply
		cfg     instruct.Config
		edit    func(*instruct.Run)
		class   failure.Class
		msg     string
	}{
		{name: "rate limited", replies: []llmtest.Reply{llmtest.Error(429, "slow down")},
			class: failure.Retryable, msg: "instruct: skill triage: turn 1: llm: POST"},
		{name: "bad key", replies: []llmtest.Reply{llmtest.Error(401, "invalid key")}, class: failure.Fatal, msg: "401 Unauthorized: invalid key"},
		{name: "too long", replies: []llmtest.Reply{llmtest.Error(400, "context_length_exceeded")}, class: failure.Repairable, msg: "context_length_exceeded"},
		{name: "second turn fails", replies: []llmtest.Reply{
			llmtest.Calls(llmtest.ToolCall("a", "failing", map[string]any{"mode": "ok"})), llmtest.Error(503, "overloaded"),
		}, class: failure.Retryable, msg: "turn 2: llm: POST"},
		{name: "turns run out", cfg: instruct.Config{MaxTurns: 2}, replies: []llmtest.Reply{
			llmtest.Calls(llmtest.ToolCall("a", "failing", map[string]any{"mode": "ok"})),
			llmtest.Calls(llmtest.ToolCall("b", "failing", map[string]any{"mode": "ok"})),
		}, class: failure.Fatal, msg: "skill triage did not finish within 2 model turns"},
		{name: "required tool missing", edit: func(r *instruct.Run) { r.Skill.RequiredTools = []string{"jira_view_issue", "slugify", "git"} },
			class: failure.Fatal, msg: "missing required tools: jira_view_issue, git"},
		{name: "no instructions", edit: func(r *instruct.Run) { r.Skill.Body = "  \n" },
			class: failure.Fatal, msg: "skill triage has no instructions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.Script(t, tt.replies...)
			run := instruct.Run{Skill: newSkill(), Tools: toolSet(t, failing, (&slugCalls{}).tool())}
			if tt.edit != nil {
				tt.edit(&run)
			}
			_, err := runner(t, srv, tt.cfg).Execute(t.Context(), run)
			if failure.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v (class %q), want a %s error containing %q", err, failure.ClassOf(err), tt.class, tt.msg)
			}
		})
	}
}

func TestNoModel(t *testing.T) {
	r, err := instruct.New(instruct.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r.HasModel() {
		t.Error("HasModel without a model")
	}
	_, err = r.Execute(t.Context(), instruct.Run{Skill: newSkill()})
	if failure.ClassOf(err) != failure.Fatal || !errors.Is(err, instruct.ErrNoModel) {
		t.Fatalf("got %v, want a Fatal ErrNoModel", err)
	}
	if want := "instruct: skill triage is an instruction skill, and this worker has no chat model configured (start it with --llm-url, or set $SKILLBUS_LLM_URL, an OpenAI-compatible chat-completions URL)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestCancelled(t *testing.T) {
	srv := llmtest.Script(t, llmtest.Reply{Wait: true})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-srv.Waiting; cancel() }()
	_, err := runner(t, srv, instruct.Config{}).Execute(ctx, instruct.Run{Skill: newSkill()})
	if failure.ClassOf(err) != failure.Retryable || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want a Retryable error wrapping context.Canceled", err)
	}
}

// TestCancelledInTool ends the run when its context ends during a tool call,
// rather than telling the model.
func TestCancelledInTool(t *testing.T) {
	srv := llmtest.Script(t, llmtest.Calls(llmtest.ToolCall("a", "wait", map[string]any{})))
	ctx, cancel := context.WithCancel(t.Context())
	wait := tool.Func("wait", func(ctx context.Context, c tool.Call) (any, error) {
		cancel()
		<-ctx.Done()
		return nil, failure.Wrap(failure.Retryable, ctx.Err())
	})
	s := newSkill()
	s.AllowedTools = []string{"wait"}
	_, err := runner(t, srv, instruct.Config{}).Execute(ctx, instruct.Run{Skill: s, Tools: toolSet(t, wait)})
	if failure.ClassOf(err) != failure.Retryable || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want a Retryable error wrapping context.Canceled", err)
	}
}

func TestPlainRun(t *testing.T) {
	srv := llmtest.Script(t, llmtest.Text("All good."))
	s := newSkill()
	s.AllowedTools = nil
	temp := 0.2
	res, err := runner(t, srv, instruct.Config{Temperature: &temp}).Execute(t.Context(), instruct.Run{
		Skill:        s,
		Instructions: "Fetched instructions.",
		Tools:        toolSet(t, failing),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "All good." || res.Text != "All good." || res.Turns != 1 {
		t.Errorf("result %+v", res)
	}
	req := srv.Requests()[0]
	// No tools allowed, no files readable: no functions, no file list.
	if len(req.Tools) != 0 || req.Messages[0].Content != "Fetched instructions." || req.Messages[1].Content != "{}" {
		t.Errorf("request %+v", req.Request)
	}
	if req.Temperature == nil || *req.Temperature != 0.2 {
		t.Errorf("temperature %v", req.Temperature)
	}
}

// TestFunctionNames offers tools whose names the chat API would reject under
// names it accepts, and routes the calls back.
func TestFunctionNames(t *testing.T) {
	var got []string
	mk := func(name string) tool.Tool {
		return tool.Func(name, func(ctx context.Context, c tool.Call) (any, error) {
			got = append(got, name)
			return "ok", nil
		})
	}
	long := strings.Repeat("x", 70)
	srv := llmtest.Script(t,
		llmtest.Calls(llmtest.ToolCall("a", "jira_view", nil), llmtest.ToolCall("b", "jira_view_2", nil), llmtest.ToolCall("c", strings.Repeat("x", 58), nil)),
		llmtest.Text("done"))
	s := newSkill()
	s.AllowedTools = []string{"jira.view", "jira/view", long}
	_, err := runner(t, srv, instruct.Config{}).Execute(t.Context(), instruct.Run{Skill: s, Tools: toolSet(t, mk("jira.view"), mk("jira/view"), mk(long))})
	if err != nil {
		t.Fatal(err)
	}
	var functions []string
	for _, f := range srv.Requests()[0].Tools {
		functions = append(functions, f.Function.Name)
	}
	if diff := cmp.Diff([]string{"jira_view", "jira_view_2", strings.Repeat("x", 58)}, functions); diff != "" {
		t.Errorf("function names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"jira.view", "jira/view", long}, got); diff != "" {
		t.Errorf("tools called (-want +got):\n%s", diff)
	}
}

func TestClip(t *testing.T) {
	big := tool.Func("big", func(ctx context.Context, c tool.Call) (any, error) { return strings.Repeat("é", 100), nil })
	srv := llmtest.Script(t, llmtest.Calls(llmtest.ToolCall("a", "big", nil)), llmtest.Text("ok"))
	s := newSkill()
	s.AllowedTools = []string{"big"}
	_, err := runner(t, srv, instruct.Config{MaxResultBytes: 11}).Execute(t.Context(), instruct.Run{Skill: s, Tools: toolSet(t, big)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[1].Messages
	if got, want := msgs[len(msgs)-1].Content, "ééééé\n…[cut: 190 more bytes]"; got != want {
		t.Errorf("clipped result %q, want %q", got, want)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := instruct.New(instruct.Config{MaxTurns: -1}); err == nil {
		t.Error("New accepted MaxTurns -1")
	}
}
