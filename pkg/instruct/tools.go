package instruct

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Described is implemented by tools that can describe themselves to a model:
// bus tools, MCP tools and the llm tool. Other tools are offered with a
// generic description and a schema that takes any object, unless they are the
// built-in http and exec tools, which this package describes itself.
type Described interface {
	Description() string
	InputSchema() map[string]any
}

// ReadReferenceTool is the name of the built-in function that reads a file of
// the skill.
const ReadReferenceTool = "read_reference"

// offered is a tool as the model sees it.
type offered struct {
	function string    // the function name the model calls
	tool     tool.Tool // nil for read_reference
	name     string    // the skillbus tool name
}

// toolNames returns the names in a tool list without Agent Skills' argument
// patterns: "Bash(git:*)" is the tool Bash.
func toolNames(list []string) []string {
	out := make([]string, 0, len(list))
	for _, t := range list {
		if i := strings.IndexByte(t, '('); i > 0 {
			t = t[:i]
		}
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// selectTools returns the tools the skill may call: its allowed-tools and
// required_tools that this worker has, minus its disallowed_tools, sorted by
// name; and which required tools are missing.
func selectTools(s *skill.Skill, set *tool.Set) (tools []tool.Tool, missing []string) {
	banned := toolNames(s.DisallowedTools)
	for _, name := range toolNames(s.RequiredTools) {
		if _, ok := set.Lookup(name); !ok {
			missing = append(missing, name)
		}
	}
	seen := map[string]bool{}
	for _, name := range append(toolNames(s.AllowedTools), toolNames(s.RequiredTools)...) {
		if seen[name] || slices.Contains(banned, name) || name == ReadReferenceTool {
			continue
		}
		seen[name] = true
		if t, ok := set.Lookup(name); ok {
			tools = append(tools, t)
		}
	}
	slices.SortFunc(tools, func(a, b tool.Tool) int { return cmp.Compare(a.Name(), b.Name()) })
	return tools, missing
}

var invalidFunctionChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// functionNames maps tool names to function names the chat API accepts (1-64
// of [A-Za-z0-9_-]): a valid name stays; others have the rest replaced by '_',
// and a number appended if that clashes.
func functionNames(names []string) []string {
	out := make([]string, len(names))
	used := map[string]bool{ReadReferenceTool: true}
	for i, n := range names {
		if validFunction(n) && !used[n] {
			out[i] = n
			used[n] = true
		}
	}
	for i, n := range names {
		if out[i] != "" {
			continue
		}
		base := invalidFunctionChars.ReplaceAllString(n, "_")
		if base == "" {
			base = "tool"
		}
		base = base[:min(len(base), 58)]
		f := base
		for k := 2; used[f]; k++ {
			f = fmt.Sprintf("%s_%d", base, k)
		}
		out[i] = f
		used[f] = true
	}
	return out
}

func validFunction(n string) bool {
	return n != "" && len(n) <= 64 && !invalidFunctionChars.MatchString(n)
}

// describe returns how a tool is offered to the model.
func describe(function string, t tool.Tool) llm.FunctionTool {
	if d, ok := t.(Described); ok {
		desc := d.Description()
		if desc == "" {
			desc = "The " + t.Name() + " tool."
		}
		return llm.NewFunctionTool(function, desc, d.InputSchema())
	}
	if b, ok := builtins[t.Name()]; ok {
		return llm.NewFunctionTool(function, b.description, b.schema)
	}
	return llm.NewFunctionTool(function, "The "+t.Name()+" tool.", map[string]any{"type": "object", "additionalProperties": true})
}

func readReferenceFunction(paths []string) llm.FunctionTool {
	return llm.NewFunctionTool(ReadReferenceTool,
		"Reads one of the skill's files, listed in the instructions, and returns its text.",
		map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{"type": "string", "description": "the file's path, as listed", "enum": toAny(paths)},
			},
			"required":             []any{"path"},
			"additionalProperties": false,
		})
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

type builtin struct {
	description string
	schema      map[string]any
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

// builtins describes the tools of package tool that do not describe
// themselves.
var builtins = map[string]builtin{
	"http": {
		description: "Sends one HTTP request and returns {status, headers, body}; body is parsed when the response is JSON.",
		schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"url":     prop("string", "http or https URL"),
				"method":  prop("string", "GET by default, POST when json or body is given"),
				"headers": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"query":   map[string]any{"type": "object", "description": "added to the URL's query"},
				"json":    map[string]any{"description": "a value sent as the JSON body"},
				"body":    prop("string", "a body sent as is"),
				"timeout": prop("string", "seconds or a duration such as \"10s\""),
			},
			"required":             []any{"url"},
			"additionalProperties": false,
		},
	},
	"exec": {
		description: "Runs a program (no shell) and returns {exit_code, stdout, stderr}.",
		schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"command": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "the program and its arguments"},
				"env":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"stdin":   prop("string", "sent to the program's standard input"),
				"dir":     prop("string", "a relative directory to run in"),
				"timeout": prop("string", "seconds or a duration such as \"10s\""),
			},
			"required":             []any{"command"},
			"additionalProperties": false,
		},
	},
	"echo": {
		description: "Returns its arguments.",
		schema:      map[string]any{"type": "object", "additionalProperties": true},
	},
}
