package instruct

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/tool"
)

// FuzzParseArgs feeds function arguments as models write them: an object of
// JSON-like values, or an error, never a panic.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{`{"a": 1, "b": [1.5, "x", null]}`, ``, `null`, `[1]`, `{"a":`, `{"a":1}{"b":2}`, `{"n": 1e400}`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args, err := parseArgs(s)
		if err != nil {
			return
		}
		if args == nil {
			t.Fatal("nil arguments without an error")
		}
		if err := tool.CheckValue(map[string]any(args)); err != nil {
			t.Fatalf("parseArgs(%q) = %v, not JSON-like: %v", s, args, err)
		}
	})
}

// FuzzFunctionNames checks that any tool names map to distinct, valid
// function names.
func FuzzFunctionNames(f *testing.F) {
	f.Add("jira.view", "jira_view", "read_reference")
	f.Add("", "a/b", "a_b")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		names := functionNames([]string{a, b, c})
		seen := map[string]bool{ReadReferenceTool: true}
		for i, n := range names {
			if !validFunction(n) || seen[n] {
				t.Fatalf("functionNames(%q, %q, %q)[%d] = %q: invalid or taken", a, b, c, i, n)
			}
			seen[n] = true
		}
	})
}
