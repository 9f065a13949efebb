package instruct

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Model is the chat model instruction skills run on; *llm.Client is one.
type Model interface {
	Chat(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Config configures a Runner. Zero values select the documented defaults.
type Config struct {
	// Model runs the skills. Nil: every run fails with a Fatal "no chat model
	// configured", so the plan falls back to the next skill.
	Model Model
	// MaxTurns bounds the model turns (chat requests) of one run. Default 8.
	MaxTurns int
	// MaxResultBytes bounds what one tool result or file gives the model back;
	// the rest is cut off, and the model told so. Default 32 KiB.
	MaxResultBytes int
	// Temperature, if set, is sent with every request.
	Temperature *float64
	// Log receives debug logs. Default slog.Default().
	Log *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxTurns       = 8
	DefaultMaxResultBytes = 32 << 10
)

// ErrNoModel is the error, wrapped in a Fatal *failure.Error, of a run on a
// Runner without a Model.
var ErrNoModel = errors.New("no chat model configured (start it with --llm-url, or set $SKILLBUS_LLM_URL, an OpenAI-compatible chat-completions URL)")

// Runner runs instruction skills. It is safe for concurrent use.
type Runner struct {
	cfg Config
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.MaxTurns < 0 || cfg.MaxResultBytes < 0 {
		return nil, errors.New("instruct: MaxTurns and MaxResultBytes must not be negative")
	}
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Runner{cfg: cfg}, nil
}

// HasModel reports whether the runner can run skills at all.
func (r *Runner) HasModel() bool { return r.cfg.Model != nil }

// Run is one execution of an instruction skill.
type Run struct {
	ExecutionID string
	Skill       *skill.Skill
	// Instructions are the system prompt; "" is Skill.Body. (The catalog may
	// keep bodies out of its records; the worker reads them from the skill's
	// files.)
	Instructions string
	// Inputs are the trigger's data; the model gets them as JSON in the user
	// message.
	Inputs map[string]any
	// Tools are the worker's tools; the skill gets those its allowed-tools and
	// required_tools name, less its disallowed_tools. Nil: none.
	Tools *tool.Set
	// ReadReference reads a file of the skill by its path relative to the skill
	// directory. Nil: the model is not offered the skill's files.
	ReadReference func(ctx context.Context, path string) ([]byte, error)
	// Observer hears about each model turn and tool call. Nil: nobody.
	Observer Observer
}

// Result is what a run produced.
type Result struct {
	// Output is the final reply: its JSON value when it is a JSON object or
	// array (llm.ParseJSON), else its text.
	Output any
	// Text is the final reply as the model wrote it.
	Text string
	// Turns is how many model turns the run took; ToolCalls how many tools it
	// called.
	Turns, ToolCalls int
	// Transcript is the whole conversation, system prompt first.
	Transcript []llm.Message
	// Usage adds up the tokens of all turns.
	Usage llm.Usage
}

// Outputs is the result as a skill's outputs: result (Output), turns,
// tool_calls and messages (the transcript's length).
func (r *Result) Outputs() map[string]any {
	return map[string]any{
		"result":     r.Output,
		"turns":      int64(r.Turns),
		"tool_calls": int64(r.ToolCalls),
		"messages":   int64(len(r.Transcript)),
	}
}

// Execute runs the skill: the model answers the inputs under the skill's
// instructions, calling tools for up to MaxTurns turns, and its last reply
// without tool calls is the result.
//
// It fails Fatal without a model, without instructions, when a required tool
// is missing, when a tool fails Fatal, and when the turns run out; a model's
// error keeps its class (Retryable for 429 and 5xx, ...). Other tool errors go
// back to the model as the tool's result, for it to deal with.
func (r *Runner) Execute(ctx context.Context, run Run) (*Result, error) {
	s := run.Skill
	if s == nil {
		return nil, failure.Fatalf("instruct: no skill to run")
	}
	// The http and exec tools act only as far as the skill's permissions allow.
	ctx = tool.WithPermissions(ctx, tool.SkillPermissions(s))
	if r.cfg.Model == nil {
		return nil, failure.Wrap(failure.Fatal, fmt.Errorf("instruct: skill %s is an instruction skill, and this worker has %w", s.Name, ErrNoModel))
	}
	instructions := run.Instructions
	if instructions == "" {
		instructions = s.Body
	}
	if strings.TrimSpace(instructions) == "" {
		return nil, failure.Fatalf("instruct: skill %s has no instructions (an empty SKILL.md body)", s.Name)
	}
	tools, missing := selectTools(s, run.Tools)
	if len(missing) > 0 {
		return nil, failure.Fatalf("missing required tools: %s", strings.Join(missing, ", "))
	}
	obs := run.Observer
	if obs == nil {
		obs = NopObserver{}
	}

	var files []skill.Resource
	if run.ReadReference != nil {
		files = readable(s)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	byFunction := map[string]offered{}
	var functions []llm.FunctionTool
	for i, f := range functionNames(names) {
		byFunction[f] = offered{function: f, tool: tools[i], name: names[i]}
		functions = append(functions, describe(f, tools[i]))
	}
	var paths []string
	if len(files) > 0 {
		for _, f := range files {
			paths = append(paths, f.Path)
		}
		byFunction[ReadReferenceTool] = offered{function: ReadReferenceTool, name: ReadReferenceTool}
		functions = append(functions, readReferenceFunction(paths))
	}

	user, err := tool.MarshalJSON(orEmpty(run.Inputs))
	if err != nil {
		return nil, failure.Repair("instruct: skill %s: the inputs do not encode as JSON: %v", s.Name, err)
	}
	res := &Result{Transcript: []llm.Message{
		{Role: llm.RoleSystem, Content: systemPrompt(instructions, files)},
		{Role: llm.RoleUser, Content: string(user)},
	}}
	ex := &execution{r: r, run: run, obs: obs, byFunction: byFunction, paths: paths}

	for turn := 1; turn <= r.cfg.MaxTurns; turn++ {
		obs.TurnStarted(turn)
		start := time.Now()
		resp, err := r.cfg.Model.Chat(ctx, llm.Request{Messages: res.Transcript, Tools: functions, Temperature: r.cfg.Temperature})
		res.Turns = turn
		if err != nil {
			obs.TurnCompleted(turn, llm.Message{}, llm.Usage{}, err, time.Since(start))
			return res, failure.Wrap(failure.ClassOf(err), fmt.Errorf("instruct: skill %s: turn %d: %w", s.Name, turn, err))
		}
		res.Usage = res.Usage.Add(resp.Usage)
		reply := resp.Message
		reply.Role = llm.RoleAssistant
		obs.TurnCompleted(turn, reply, resp.Usage, nil, time.Since(start))
		res.Transcript = append(res.Transcript, reply)

		if len(reply.ToolCalls) == 0 {
			res.Text = reply.Content
			res.Output = llm.Content(strings.ToValidUTF8(reply.Content, "\uFFFD"))
			return res, nil
		}
		asked := len(res.Transcript) - 1
		for i := range reply.ToolCalls {
			tc := &res.Transcript[asked].ToolCalls[i]
			if tc.ID == "" { // some servers leave it out; a tool message must name one
				tc.ID = fmt.Sprintf("call_%d_%d", turn, i)
			}
			content, err := ex.call(ctx, turn, i, *tc)
			res.ToolCalls++
			if err != nil {
				return res, err
			}
			res.Transcript = append(res.Transcript, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: content})
		}
	}
	return res, failure.Fatalf("instruct: skill %s did not finish within %d model turns (it still called tools)", s.Name, r.cfg.MaxTurns)
}

// execution is the state of one run that tool calls need.
type execution struct {
	r          *Runner
	run        Run
	obs        Observer
	byFunction map[string]offered
	paths      []string
}

// call runs one tool call and returns what the model gets back. Only an error
// that ends the run is returned as an error: a Fatal tool failure, or the
// run's context ending.
func (ex *execution) call(ctx context.Context, turn, index int, tc llm.ToolCall) (string, error) {
	name := tc.Function.Name
	o, known := ex.byFunction[name]
	if known {
		name = o.name
	}
	call := ToolCall{Turn: turn, Index: index, ID: tc.ID, Tool: name}
	args, argErr := parseArgs(tc.Function.Arguments)
	call.Args = args

	ex.obs.ToolStarted(call)
	start := time.Now()
	var result any
	var err error
	switch {
	case !known:
		err = failure.Repair("there is no tool %q; the tools are: %s", tc.Function.Name, strings.Join(ex.functionList(), ", "))
	case argErr != nil:
		err = failure.Repair("the arguments of %s are not a JSON object: %v", name, argErr)
	case o.tool == nil:
		result, err = ex.readReference(ctx, args)
	default:
		step := call.Step()
		result, err = o.tool.Call(ctx, tool.Call{
			Args:           args,
			ExecutionID:    ex.run.ExecutionID,
			Step:           step,
			IdempotencyKey: ex.run.ExecutionID + "/" + step,
		})
	}
	ex.obs.ToolCompleted(call, result, err, time.Since(start))

	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", failure.Wrap(failure.Retryable, fmt.Errorf("instruct: skill %s: %w", ex.run.Skill.Name, ctxErr))
		}
		class := failure.ClassOf(err)
		if class == failure.Fatal {
			return "", failure.Wrap(failure.Fatal, fmt.Errorf("instruct: skill %s: tool %s: %w", ex.run.Skill.Name, name, err))
		}
		ex.r.cfg.Log.Debug("instruct: a tool failed; the model is told", "skill", ex.run.Skill.Name, "tool", name, "err", err)
		return ex.clip(errorText(class, err)), nil
	}
	return ex.clip(resultText(result)), nil
}

func (ex *execution) functionList() []string {
	var out []string
	for f := range ex.byFunction {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

func (ex *execution) readReference(ctx context.Context, args map[string]any) (any, error) {
	a := tool.NewArgs(ReadReferenceTool, args)
	if err := a.Only("path"); err != nil {
		return nil, err
	}
	p, err := a.String("path")
	if err != nil {
		return nil, err
	}
	p = strings.TrimPrefix(strings.TrimSpace(p), "./")
	if !slices.Contains(ex.paths, p) {
		return nil, failure.Repair("read_reference: the skill has no file %q; its files are: %s", p, strings.Join(ex.paths, ", "))
	}
	b, err := ex.run.ReadReference(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read_reference %s: %w", p, err)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return nil, failure.Repair("read_reference: %s is not a text file", p)
	}
	return string(b), nil
}

// parseArgs reads a model's function arguments: a JSON object, or nothing.
func parseArgs(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	v, err := tool.DecodeJSON([]byte(s))
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case map[string]any:
		return v, nil
	case nil:
		return map[string]any{}, nil
	default:
		return nil, fmt.Errorf("got %s", jsonKind(v))
	}
}

// resultText is a tool result as the model reads it: a string as is, anything
// else as JSON.
func resultText(v any) string {
	if s, ok := v.(string); ok {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	b, err := tool.MarshalJSON(v)
	if err != nil {
		return fmt.Sprintf("(a result that does not encode as JSON: %v)", err)
	}
	return string(b)
}

// errorText tells the model what went wrong and whether trying again may help.
func errorText(class failure.Class, err error) string {
	hint := "it may work if you call it again later"
	if class == failure.Repairable {
		hint = "fix the arguments and call it again"
	}
	return fmt.Sprintf("error: %v\n(%s failure: %s)", err, class, hint)
}

// clip cuts s to MaxResultBytes, saying how much was cut.
func (ex *execution) clip(s string) string {
	n := ex.r.cfg.MaxResultBytes
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s\n…[cut: %d more bytes]", cut, len(s)-len(cut))
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case []any:
		return "a list"
	case bool:
		return "a bool"
	case int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
