package expr

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/skillbus/skillbus/pkg/failure"
)

// testEnv is a plausible workflow context.
func testEnv() Env {
	return Env{
		"inputs":  map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature", "count": 3.0},
		"summary": "Add Billing Export",
		"pods": []any{
			map[string]any{"name": "web-1", "status": "Running", "restarts": 0.0},
			map[string]any{"name": "web-2", "status": "Failed", "restarts": 7.0},
		},
		"tags":   []string{"b", "a", "b"},
		"labels": map[string]string{"app": "web", "tier": "front"},
		"meta":   map[string]any{"keys": "shadowed", "items": 2.0, "name": "m", "my key": "spaced"},
		"n":      json.Number("42"),
		"f":      json.Number("2.5"),
		"big":    json.Number("123456789012345678901234567890"),
		"empty":  "",
		"none":   nil,
	}
}

func evalTemplate(t *testing.T, src string, env Env, opts ...Option) (any, error) {
	t.Helper()
	tm, err := ParseTemplate(src, opts...)
	if err != nil {
		return nil, err
	}
	return tm.Eval(context.Background(), env)
}

func TestTemplateValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want any
	}{
		// A single expression keeps its native type.
		{"{{ 5 }}", int64(5)},
		{"{{ 1.5 }}", 1.5},
		{"{{ 'x' }}", "x"},
		{"{{ [1, 'a', None] }}", []any{int64(1), "a", nil}},
		{"{{ {'a': 1, 'b': [True]} }}", map[string]any{"a": int64(1), "b": []any{true}}},
		{"{{ {'a': {'b': 1}} }}", map[string]any{"a": map[string]any{"b": int64(1)}}},
		{"{{ None }}", nil},
		{"{{ none }}", nil},
		{"{{ true }}", true},
		{"{{ false or 0 }}", int64(0)},
		{"  {{ inputs.count }}\n", int64(3)},
		{"{{ inputs.count + 0.5 }}", 3.5},
		{"{{ n }}", int64(42)},
		{"{{ f }}", 2.5},
		{"{{ big }}", 1.2345678901234568e+29},
		{"{{ tags }}", []any{"b", "a", "b"}},
		{"{{ labels }}", map[string]any{"app": "web", "tier": "front"}},
		{"{{ (1, 2) }}", []any{int64(1), int64(2)}},
		{"{{ {1: 'a'} }}", map[string]any{"1": "a"}},
		{"{{ set([1]) }}", []any{int64(1)}},
		{"{{ 2 ** 100 }}", 1.2676506002282294e+30},
		{"{{ missing }}", nil},
		{"{{ inputs }}", map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature", "count": 3.0}},
		{"{{ pods[1].name }}", "web-2"},
		{"{{ pods[-1]['restarts'] }}", int64(7)},
		{"{{ summary[:3] }}", "Add"},
		{"{{ inputs.issue_key if inputs.count > 2 else 'none' }}", "AAP-12345"},
		{"{{\n  inputs.issue_key\n  + '-x'  # a comment\n}}", "AAP-12345-x"},
		{"{{- inputs.issue_key -}}", "AAP-12345"},
		// Anything else renders to a string.
		{"{{ 1 }}{{ 2 }}", "12"},
		{"key={{ inputs.issue_key }}", "key=AAP-12345"},
		{"a{{ none }}b{{ missing }}c", "abc"},
		{"{{ true }} {{ 1.5 }} {{ 1e20 }} {{ 10 }}", "True 1.5 1e+20 10"},
		{"pods: {{ pods | map(attribute='name') | list }}", `pods: ["web-1", "web-2"]`},
		{"{{ labels }}!", `{"app": "web", "tier": "front"}!`},
		{"x: {{ {'b': 1, 'a': '✅'} }}", `x: {"b": 1, "a": "✅"}`},
		{"{{ (1, None) }}.", "[1, null]."},
		{"{{ 'a' }} {# a comment #}{{ 'b' }}", "a b"},
		{"a  {{- 'b' -}}  c", "abc"},
		{"{{ '}}' }} {{ \"{{\" }}", "}} {{"},
		// Literals.
		{"plain", "plain"},
		{"no {% here", "no {% here"},
		{"{# only a comment #}x", "{# only a comment #}x"}, // no {{: a literal
		{"{# a comment #}{{ 1 }}", int64(1)},
		{"}} {", "}} {"},
	}
	for _, tt := range tests {
		got, err := evalTemplate(t, tt.src, testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}

func TestTemplateLiteralAndRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src     string
		literal bool
		refs    []string
	}{
		{"plain text", true, nil},
		{"", true, nil},
		{"{{ inputs.issue_key }}", false, []string{"inputs"}},
		{"{{ b }} {{ a.x }} {{ b | lower }} {{ len(c) }}", false, []string{"a", "b", "c"}},
		{"{{ [x for x in items if x != skip] }}", false, []string{"items", "skip"}},
		{"{{ json.dumps(v) | tojson | default(d) }}", false, []string{"d", "v"}},
		{"{{ f'{who}!' }}", false, []string{"who"}},
		{"{{ x ** y }}", false, []string{"x", "y"}},
	}
	for _, tt := range tests {
		tm, err := ParseTemplate(tt.src)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		if tm.IsLiteral() != tt.literal {
			t.Errorf("%q: IsLiteral = %v, want %v", tt.src, tm.IsLiteral(), tt.literal)
		}
		if diff := cmp.Diff(tt.refs, tm.Refs()); diff != "" {
			t.Errorf("%q: Refs (-want +got):\n%s", tt.src, diff)
		}
		if tm.String() != tt.src {
			t.Errorf("String() = %q, want %q", tm.String(), tt.src)
		}
	}
}

func TestAttrDict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want any
	}{
		{"inputs.issue_key", "AAP-12345"},
		{"inputs['issue_key']", "AAP-12345"},
		{"inputs.get('issue_key')", "AAP-12345"},
		{"inputs.get('nope')", nil},
		{"inputs.get('nope', 'd')", "d"},
		{"inputs.keys()", []any{"branch_prefix", "count", "issue_key"}},
		{"inputs.values()", []any{"feature", int64(3), "AAP-12345"}},
		{"inputs.items()[0]", []any{"branch_prefix", "feature"}},
		{"[k for k in inputs]", []any{"branch_prefix", "count", "issue_key"}},
		{"'issue_key' in inputs", true},
		{"'nope' in inputs", false},
		{"len(inputs)", int64(3)},
		{"meta.keys()", []any{"items", "keys", "my key", "name"}}, // methods win over keys
		{"meta['keys']", "shadowed"},
		{"meta['my key']", "spaced"},
		{"meta.name", "m"},
		{"hasattr(meta, 'name')", true},
		{"hasattr(meta, 'nope')", false},
		{"getattr(meta, 'nope', 7)", int64(7)},
		{"dict(labels)", map[string]any{"app": "web", "tier": "front"}},
		{"inputs == {'issue_key': 'AAP-12345', 'branch_prefix': 'feature', 'count': 3}", true},
		{"{'issue_key': 'AAP-12345'} != inputs", true},
		{"pods == []", false},
		{"pods[0] in pods", true},
		{"{'name': 'web-2', 'status': 'Failed', 'restarts': 7} in pods", true},
		{"[p.name for p in pods if p.restarts > 5]", []any{"web-2"}},
		{"len(pods) + len(tags)", int64(5)},
		{"pods[:1][0].name", "web-1"},
		{"pods + [1]", []any{pods0(), pods1(), int64(1)}},
		{"tags * 2", []any{"b", "a", "b", "b", "a", "b"}},
		{"sorted(tags)", []any{"a", "b", "b"}},
		{"tags.index('a')", int64(1)},
		{"tags.count('b')", int64(2)},
		{"type(inputs)", "attrdict"},
		{"type(pods)", "attrlist"},
		{"isinstance(inputs, dict) and isinstance(pods, list) and isinstance(summary, str)", true},
		{"str(labels)", `{"app": "web", "tier": "front"}`},
		{"inputs.copy()", map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature", "count": int64(3)}},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.expr)
		if err != nil {
			t.Fatalf("%q: %v", tt.expr, err)
		}
		got, err := e.Eval(context.Background(), testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.expr, diff)
		}
	}
}

func pods0() any { return testEnv()["pods"].([]any)[0] }
func pods1() any { return testEnv()["pods"].([]any)[1] }

// TestEnvUnchanged checks that evaluation neither changes env nor lets compute
// blocks change it.
func TestEnvUnchanged(t *testing.T) {
	t.Parallel()
	env := testEnv()
	want := testEnv()
	for _, src := range []string{
		"inputs['x'] = 1",
		"inputs.update({'x': 1})",
		"pods.append(1)",
		"pods[0] = 1",
		"tags.sort()",
		"x = pods\nx.extend([1])",
	} {
		p, err := ParseProgram(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		_, err = p.Run(context.Background(), env)
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%q: error = %v, want a read-only error", src, err)
		}
	}
	p, err := ParseProgram("p = list(pods)\np.append(1)\nd = dict(inputs)\nd['x'] = 1\nresult = [len(p), len(d)]")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{int64(3), int64(4)}, got); diff != "" {
		t.Errorf("copies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("env changed (-want +got):\n%s", diff)
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want any
	}{
		{"{{ missing | default('d') }}", "d"},
		{"{{ missing | default }}", ""},
		{"{{ empty | default('d') }}", ""},
		{"{{ empty | default('d', true) }}", "d"},
		{"{{ empty | default('d', boolean=true) }}", "d"},
		{"{{ summary | default('d') }}", "Add Billing Export"},
		{"{{ summary | lower }}", "add billing export"},
		{"{{ summary | upper }}", "ADD BILLING EXPORT"},
		{"{{ 'hello world' | title }}", "Hello World"},
		{"{{ 'hello World' | capitalize }}", "Hello world"},
		{"{{ '  x  ' | trim }}", "x"},
		{"{{ 'xxaxx' | strip('x') }}", "a"},
		{"{{ summary | replace(' ', '-') }}", "Add-Billing-Export"},
		{"{{ 'aaa' | replace('a', 'b', 2) }}", "bba"},
		{"{{ missing | lower }}", ""},
		{"{{ 42 | lower }}", "42"},
		{"{{ tags | join }}", "bab"},
		{"{{ tags | join(', ') }}", "b, a, b"},
		{"{{ [1, None, 'x'] | join('-') }}", "1-None-x"},
		{"{{ pods | join(', ', attribute='name') }}", "web-1, web-2"},
		{"{{ tags | length }}", int64(3)},
		{"{{ 'héllo' | length }}", int64(5)},
		{"{{ missing | length }}", int64(0)},
		{"{{ labels | count }}", int64(2)},
		{"{{ labels | tojson }}", `{"app": "web", "tier": "front"}`},
		{"{{ {'b': 1, 'a': [1.5, None]} | tojson }}", `{"a": [1.5, null], "b": 1}`},
		{"{{ {'a': 1} | tojson(indent=2) }}", "{\n  \"a\": 1\n}"},
		{`{{ '{"a": [1, 2.5, "x"]}' | fromjson }}`, map[string]any{"a": []any{int64(1), 2.5, "x"}}},
		{"{{ tags | first }}", "b"},
		{"{{ tags | last }}", "b"},
		{"{{ [] | first }}", nil},
		{"{{ 'héllo' | last }}", "o"},
		{"{{ 'é' | first }}", "é"},
		{"{{ '42' | int }}", int64(42)},
		{"{{ 3.9 | int }}", int64(3)},
		{"{{ '2.5' | float }}", 2.5},
		{"{{ 5 | string }}", "5"},
		{"{{ none | string }}", "None"},
		{"{{ 'ab' | list }}", nil}, // replaced below: Starlark strings are not iterable
		{"{{ labels | list }}", []any{"app", "tier"}},
		{"{{ ['b', 'C', 'a'] | sort }}", []any{"a", "b", "C"}},
		{"{{ ['b', 'C', 'a'] | sort(reverse=true) }}", []any{"C", "b", "a"}},
		{"{{ ['b', 'C', 'a'] | sort(case_sensitive=true) }}", []any{"C", "a", "b"}},
		{"{{ pods | sort(attribute='restarts', reverse=true) | map(attribute='name') | list }}", []any{"web-2", "web-1"}},
		{"{{ ['b', 'C', 'a'] | sorted }}", []any{"C", "a", "b"}},
		{"{{ tags | unique }}", []any{"b", "a"}},
		{"{{ [{'a': 1}, {'a': 1}, 2] | unique }}", []any{map[string]any{"a": int64(1)}, int64(2)}},
		{"{{ 'a,b,,c' | split(',') }}", []any{"a", "b", "", "c"}},
		{"{{ ' a  b ' | split }}", []any{"a", "b"}},
		{"{{ 'a,b,c' | split(',', 1) }}", []any{"a", "b,c"}},
		{"{{ 'the quick brown fox' | truncate(12) }}", "the..."},
		{"{{ 'the quick brown fox' | truncate(13) }}", "the quick..."},
		{"{{ 'the quick brown fox' | truncate(12, true) }}", "the quick..."},
		{"{{ 'the quick brown fox' | truncate(11, killwords=true) }}", "the quic..."},
		{"{{ 'short' | truncate(10) }}", "short"},
		{"{{ -3 | abs }}", int64(3)},
		{"{{ 2.5 | round }}", 2.0}, // Jinja keeps a float a float
		{"{{ 3.5 | round }}", 4.0},
		{"{{ 2.675 | round(2) }}", 2.67},
		{"{{ 1234 | round(-2) }}", int64(1200)},
		{"{{ 1250 | round(-2) }}", int64(1200)},
		{"{{ [1, 2.5] | sum }}", 3.5},
		{"{{ pods | sum(attribute='restarts') }}", int64(7)},
		{"{{ [[1], [2]] | sum(start=[]) }}", []any{int64(1), int64(2)}},
		{"{{ [3, 1, 2] | min }}", int64(1)},
		{"{{ [3, 1, 2] | max }}", int64(3)},
		{"{{ tags | map('upper') | list }}", []any{"B", "A", "B"}},
		{"{{ tags | reverse }}", []any{"b", "a", "b"}},
		{"{{ 'abc' | reverse }}", "cba"},
		// Filters are functions too.
		{"{{ replace(lower(summary), ' ', '-') }}", "add-billing-export"},
		{"{{ default(missing, 1) + length(tags) }}", int64(4)},
	}
	for _, tt := range tests {
		if tt.src == "{{ 'ab' | list }}" {
			continue
		}
		got, err := evalTemplate(t, tt.src, testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}

func TestPrograms(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var printed []string
	print := WithPrint(func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		printed = append(printed, msg)
	})
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"no result", "x = 1", nil},
		{"result reassigned", "result = 1\nresult = result + 1", int64(2)},
		{"top-level control flow", `
total = 0
for p in pods:
    if p.status != "Running":
        total += p.restarts
i = 0
while i < 3:
    i += 1
result = [total, i]
`, []any{int64(7), int64(3)}},
		{"functions", "def slug(s):\n    return s.lower().replace(' ', '-')\nresult = slug(summary)", "add-billing-export"},
		{"lambda", "result = sorted(pods, key=lambda p: -p.restarts)[0].name", "web-2"},
		{"sets", "s = set(tags)\ns.add('c')\nresult = sorted(s)", []any{"a", "b", "c"}},
		{"dict building", "d = {}\nfor t in tags:\n    d[t] = d.get(t, 0) + 1\nresult = d", map[string]any{"a": int64(1), "b": int64(2)}},
		{"list += is in place", "a = [1]\nb = a\na += [2]\nresult = b", []any{int64(1), int64(2)}},
		{"string +=", "s = ''\nfor t in tags:\n    s += t\nresult = s", "bab"},
		{"x += 1 on an index", "c = {'n': 1}\nc['n'] += 1\nc['n'] *= 3\nresult = c['n']", int64(6)},
		{"import json is a no-op", "import json\nresult = json.loads(json.dumps({'a': [1, 2]}))", map[string]any{"a": []any{int64(1), int64(2)}}},
		{"import json as", "import json as j\nresult = j.dumps([1, 'x'])", `[1, "x"]`},
		{"from json import", "from json import dumps, loads as l\nresult = l(dumps({'k': None}))", map[string]any{"k": nil}},
		{"import math", "import math\nresult = math.floor(2.7) + math.sqrt(16)", 6.0},
		{"json module", "result = [json.encode({'b': 1, 'a': [True]}), json.dumps({'b': 1}, indent=2), json.decode('[1]')]",
			[]any{`{"a":[true],"b":1}`, "{\n  \"b\": 1\n}", []any{int64(1)}}},
		{"json.dumps sort_keys", "result = json.dumps({'b': 1, 'a': 2}, sort_keys=True)", `{"a": 2, "b": 1}`},
		{"f-strings", `result = [f"{inputs.issue_key}", f'{1 + 1}', f"{{literal}} {summary!r}", f"{'q'!s}", f"""tri {len(tags)}"""]`,
			[]any{"AAP-12345", "2", `{literal} "Add Billing Export"`, "q", "tri 3"}},
		{"nested f-string", `result = f"a{f'b{1}c'}d"`, "ab1cd"},
		{"f-string with dict access", `result = f"{labels['app']}-{pods[0]['name']}"`, "web-web-1"},
		{"raw f-string", `result = rf"\d{1}"`, `\d1`},
		{"generator in call", "result = sum(p.restarts for p in pods)", int64(7)},
		{"generator in parens", "g = (x * 2 for x in [1, 2])\nresult = list(g)", []any{int64(2), int64(4)}},
		{"generator dict", "result = dict((t, len(t)) for t in tags)", map[string]any{"a": int64(1), "b": int64(1)}},
		{"power", "result = [2 ** 10, -2 ** 2, (-2) ** 2, 2 ** -1, 2 ** 3 ** 2, pow(3, 2), pow(3, 4, 5)]",
			[]any{int64(1024), int64(-4), int64(4), 0.5, int64(512), int64(9), int64(1)}},
		{"power of attribute", "result = inputs.count ** 2", int64(9)},
		{"is None", "x = None\nresult = [x is None, x is not None, summary is not None]", []any{true, false, true}},
		{"list.sort and reverse", "a = [3, 1, 2]\na.sort()\nb = [1, 2, 3]\nb.reverse()\nc = ['b', 'a']\nc.sort(reverse=True)\nresult = [a, b, c]",
			[]any{[]any{int64(1), int64(2), int64(3)}, []any{int64(3), int64(2), int64(1)}, []any{"b", "a"}}},
		{"copy", "a = [1]\nb = a.copy()\nb.append(2)\nd = {'x': 1}\ne = d.copy()\ne['y'] = 2\nresult = [a, len(e), len(d)]",
			[]any{[]any{int64(1)}, int64(2), int64(1)}},
		{"extend itself", "a = [1, 2]\na.extend(a)\nresult = a", []any{int64(1), int64(2), int64(1), int64(2)}},
		{"padding", "result = ['7'.zfill(3), '-7'.zfill(3), 'ab'.ljust(4, '.'), 'ab'.rjust(4), 'ab'.center(6, '*')]",
			[]any{"007", "-07", "ab..", "  ab", "**ab**"}},
		{"percent formatting", "result = '%s has %d pods' % (summary, len(pods))", "Add Billing Export has 2 pods"},
		{"format", "result = '{} {name}'.format(1, name='x')", "1 x"},
		{"map and filter", "result = [list(map(lambda x: x * 2, [1, 2])), filter(None, [0, 1, '', 'a']), list(filter(lambda p: p.restarts, pods))[0].name]",
			[]any{[]any{int64(2), int64(4)}, []any{int64(1), "a"}, "web-2"}},
		{"round", "result = [round(2.5), round(-0.5), round(1.25, 1), round(7)]", []any{int64(2), int64(0), 1.2, int64(7)}},
		{"print goes to the hook", "print('hello', 1, None, sep='|')\nresult = 1", int64(1)},
		{"indented block", "    x = 1\n    if x:\n        result = x\n", int64(1)},
		{"crlf", "x = 1\r\nresult = x + 1\r\n", int64(2)},
		{"comment only", "# nothing", nil},
		{"unicode", "result = '✅' in '✅ done' and len('é') == 1", true},
		{"filters in compute", "result = summary | lower | replace(' ', '_')", "add_billing_export"},
		{"bitwise or still works", "result = [1 | 2, set([1]) | set([2])]", []any{int64(3), []any{int64(1), int64(2)}}},
		{"read the context before assigning", "pods = pods or []\nresult = len(pods)", int64(2)},
		{"a variable named like a filter", "lower = 4\nresult = 1 | lower", int64(5)},
		{"env hides builtins", "result = count", "from env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParseProgram(tt.src, print)
			if err != nil {
				t.Fatalf("ParseProgram: %v", err)
			}
			env := testEnv()
			env["count"] = "from env"
			got, err := p.Run(context.Background(), env)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
	t.Cleanup(func() {
		if diff := cmp.Diff([]string{"hello|1|None"}, printed); diff != "" {
			t.Errorf("printed (-want +got):\n%s", diff)
		}
	})
}

func TestProgramRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want []string
	}{
		{buildBranchName, []string{"inputs", "issue_data"}},
		{detectFailure, []string{"create_branch"}},
		{analyzePods, []string{"pods"}},
		{"for x in items:\n    total = x\nresult = [y for y in other] + [total]", []string{"items", "other"}},
		{"def f(a):\n    return a + b\nresult = f(c)", []string{"b", "c"}},
		{"result = len(x) + sum(y) + json.dumps(z) | length", []string{"x", "y", "z"}},
	}
	for _, tt := range tests {
		p, err := ParseProgram(tt.src)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		if diff := cmp.Diff(tt.want, p.Refs()); diff != "" {
			t.Errorf("%q: Refs (-want +got):\n%s", tt.src, diff)
		}
	}
}

func TestExpr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want any
	}{
		{"inputs.count > 2", true},
		{"inputs.count >= 4", false},
		{"summary.startswith('Add') and 'Export' in summary", true},
		{"missing", nil},
		{"missing is defined", false},
		{"summary is defined", true},
		{"missing is not defined", true},
		{"missing is none", true},
		{"{{ tags | length > 2 }}", true},
		{"  {{ summary | lower }}  ", "add billing export"},
		{"x if x else 'fallback'", "fallback"},
		{"any([p.status == 'Failed' for p in pods])", true},
		{"all(p.restarts < 10 for p in pods)", true},
		{"[1, 2, 3][-1]", int64(3)},
		{"(1, 2)", []any{int64(1), int64(2)}},
		{"1,", []any{int64(1)}},
		{"not (empty or none)", true},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.src)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		got, err := e.Eval(context.Background(), testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
		b, err := e.EvalBool(context.Background(), testEnv())
		if err != nil || b != Truthy(got) {
			t.Errorf("%q: EvalBool = %v, %v; want %v", tt.src, b, err, Truthy(got))
		}
	}
}

// TestErrors checks the messages, positions and classes of errors.
func TestErrors(t *testing.T) {
	t.Parallel()
	type kind int
	const (
		template kind = iota
		condition
		program
	)
	tests := []struct {
		kind  kind
		src   string
		class failure.Class
		want  string // the whole Error() text
	}{
		{template, "{{ inputs.isue_key }}", failure.Repairable,
			"args.x:1:11: inputs has no key \"isue_key\" (did you mean \"issue_key\"?); its keys are: branch_prefix, count, issue_key\n\t{{ inputs.isue_key }}\n\t          ^"},
		{template, "{{ pods[1].nam }}", failure.Repairable,
			"args.x:1:12: pods[1] has no key \"nam\" (did you mean \"name\"?); its keys are: name, restarts, status\n\t{{ pods[1].nam }}\n\t           ^"},
		{template, "{{ meta['my key'].x }}", failure.Repairable,
			"args.x:1:19: string has no .x field or method\n\t{{ meta['my key'].x }}\n\t                  ^"},
		{template, "ok {{ summary }} and\n  {{ summary | replace('x') }}", failure.Repairable,
			"args.x:2:23: replace: got 2 arguments, want at least 3\n\t  {{ summary | replace('x') }}\n\t                      ^"},
		{template, "{{ summary | lowr }}", failure.Repairable,
			"args.x:1:14: unknown filter \"lowr\" (did you mean \"lower\"?)\n\t{{ summary | lowr }}\n\t             ^"},
		{template, "{{ summary | x.y }}", failure.Repairable,
			"args.x:1:12: a filter must be a name, like x | lower or x | replace(' ', '-')\n\t{{ summary | x.y }}\n\t           ^"},
		{template, "a {{ b", failure.Repairable,
			"args.x:1:3: unclosed {{ (no matching }})\n\ta {{ b\n\t  ^"},
		{template, "{{ }}", failure.Repairable,
			"args.x:1:3: empty expression\n\t{{ }}\n\t  ^"},
		{template, "{{ a + }}", failure.Repairable,
			"args.x:1:8: syntax error: unexpected end of expression (got ')', want primary expression)\n\t{{ a + }}\n\t       ^"},
		{template, "line one\n{% for x in y %}{{ x }}{% endfor %}", failure.Repairable,
			"args.x:2:1: " + stmtMsg + "\n\t{% for x in y %}{{ x }}{% endfor %}\n\t^"},
		{template, "{{ x is string }}", failure.Repairable,
			"args.x:1:6: the Jinja test \"is string\" is not supported; write it in Python, for example isinstance(x, dict), type(x) == \"string\" or x % 2 == 0\n\t{{ x is string }}\n\t     ^"},
		{template, "{{ f'{x:>10}' }}", failure.Repairable,
			"args.x:1:8: f-string: format spec \":>10\" is not supported; format the value with str methods or the % operator\n\t{{ f'{x:>10}' }}\n\t       ^"},
		{template, "{{ f'{}' }}", failure.Repairable,
			"args.x:1:6: f-string: empty expression not allowed\n\t{{ f'{}' }}\n\t     ^"},
		{template, "{{ f'a}' }}", failure.Repairable,
			"args.x:1:7: f-string: single '}' is not allowed (write '}}' for a literal brace)\n\t{{ f'a}' }}\n\t      ^"},
		{template, "{{ f'{x' }}", failure.Repairable,
			"args.x:1:6: f-string: unclosed '{' (write '{{' for a literal brace)\n\t{{ f'{x' }}\n\t     ^"},
		{template, "{{ f'{1 +}' }}", failure.Repairable,
			"args.x:1:10: syntax error: got ')', want primary expression\n\t{{ f'{1 +}' }}\n\t         ^"},
		{template, "{{ lower }}", failure.Repairable,
			"args.x:1:4: cannot use a builtin_function_or_method as a value: values are None, bools, numbers, strings, lists and dicts\n\t{{ lower }}\n\t   ^"},
		{template, "x {{ lower }}", failure.Repairable,
			"args.x:1:5: cannot render a builtin_function_or_method in a template: cannot encode a builtin_function_or_method as JSON\n\tx {{ lower }}\n\t    ^"},
		{condition, "failure_info.get('needs_vpn')", failure.Repairable,
			"args.x:1:14: NoneType has no .get field or method (not defined, so None: failure_info; no input or step output has that name, or its step was skipped)\n\tfailure_info.get('needs_vpn')\n\t             ^"},
		{condition, "summary +\n 1", failure.Repairable,
			"args.x:1:9: unknown binary op: string + int (convert one side: str(x) to join them as text, int(x) or float(x) to add them as numbers)\n\tsummary +\n\t        ^"},
		{condition, "{{ a }} and {{ b }}", failure.Repairable,
			"args.x:1:1: a condition is one expression: write it without {{ }}, or as a single {{ expression }}\n\t{{ a }} and {{ b }}\n\t^"},
		{condition, "x = 1", failure.Repairable,
			"args.x:1:3: syntax error: got '=', want ')'\n\tx = 1\n\t  ^"},
		{program, "x = 1\ny = x +\n", failure.Repairable,
			"args.x:2:8: syntax error: got newline, want primary expression\n\ty = x +\n\t       ^"},
		{program, "x = 1\nresult = x.nope", failure.Repairable,
			"args.x:2:12: int has no .nope field or method\n\tresult = x.nope\n\t           ^"},
		{program, "def f(x):\n    return x['k']\nresult = f({})", failure.Repairable,
			"args.x:2:13: key \"k\" not in dict (d.get(key) gives None instead of failing, d.get(key, default) a default; key in d tests for it)\n\t    return x['k']\n\t            ^"},
		{program, "def f():\n    return len(pods)\nn = f()\npods = []", failure.Repairable,
			"args.x:2:16: global variable pods referenced before assignment (this block assigns pods, which makes pods a variable of the block everywhere in it, hiding the workflow's pods; give the variable another name)\n\t    return len(pods)\n\t               ^"},
		{program, "import os", failure.Repairable,
			"args.x:1:1: import of \"os\" is not supported: compute blocks have no clock, filesystem, network, environment or randomness; only the json and math modules exist (and are always available). Get values from the outside world (such as the current time) from a tool step or an input and use its output here\n\timport os\n\t^"},
		{program, "load('x', 'y')", failure.Repairable,
			"args.x:1:6: load() is not supported: everything available is predeclared\n\tload('x', 'y')\n\t     ^"},
		{program, "def f(n):\n    return f(n)\nresult = f(1)", failure.Repairable,
			"args.x:2:12: function f called recursively\n\t    return f(n)\n\t           ^"},
		{program, "result = inputs.pop('x')", failure.Repairable,
			"args.x:1:17: inputs is read-only (it comes from the workflow context); change a copy instead: dict(inputs)\n\tresult = inputs.pop('x')\n\t                ^"},
		{program, "result = json.decode('[' * 5000 + ']' * 5000)", failure.Repairable,
			"args.x:1:21: json.decode: JSON nested more than 1000 deep\n\tresult = json.decode('[' * 5000 + ']' * 5000)\n\t                    ^"},
		{program, "try:\n    x = 1\nexcept:\n    pass", failure.Repairable,
			"args.x:1:1: syntax error: got try, want primary expression (there are no exceptions: check values before using them, and use fail(msg) to stop with an error)\n\ttry:\n\t^"},
		{program, "fail('custom failure')", failure.Repairable,
			"args.x:1:5: fail: custom failure\n\tfail('custom failure')\n\t    ^"},
		{program, "while True:\n    pass", failure.Fatal,
			"args.x:1:1: exceeded the limit of 1000000 evaluation steps (an endless loop, or too much work for one step?)\n\twhile True:\n\t^"},
		{program, "s = 'x'\nfor i in range(100):\n    s = s + s", failure.Fatal,
			"args.x:3:11: exceeded the allocation limit of 16 MiB (does a value keep growing? build long strings with \"\".join(parts))\n\t    s = s + s\n\t          ^"},
	}
	for _, tt := range tests {
		var err error
		switch tt.kind {
		case template:
			_, err = evalTemplate(t, tt.src, testEnv(), WithName("args.x"))
		case condition:
			var e *Expr
			if e, err = ParseExpr(tt.src, WithName("args.x")); err == nil {
				_, err = e.Eval(context.Background(), testEnv())
			}
		case program:
			var p *Program
			if p, err = ParseProgram(tt.src, WithName("args.x")); err == nil {
				_, err = p.Run(context.Background(), testEnv())
			}
		}
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.src, tt.want)
			continue
		}
		if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
			t.Errorf("%q: error (-want +got):\n%s", tt.src, diff)
		}
		if got := failure.ClassOf(err); got != tt.class {
			t.Errorf("%q: class %q, want %q", tt.src, got, tt.class)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error is not an *Error", tt.src)
		}
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	src := map[string]any{
		"issue_key": "{{ inputs.issue_key }}",
		"count":     5,
		"ratio":     0.5,
		"flag":      true,
		"nothing":   nil,
		"headers": map[string]any{
			"Authorization": "Bearer {{ token }}",
			"X-Static":      "static",
		},
		"pods":   "{{ pods | map(attribute='name') | list }}",
		"list":   []any{"{{ inputs.count }}", "lit", map[string]string{"k": "{{ summary | lower }}"}},
		"labels": map[string]string{"app": "{{ labels.app }}"},
		"names":  []string{"a", "{{ 'b' }}"},
	}
	v, err := CompileValue(src, WithName("args"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"inputs", "labels", "pods", "summary", "token"}, v.Refs()); diff != "" {
		t.Errorf("Refs (-want +got):\n%s", diff)
	}
	env := testEnv()
	env["token"] = "s3cret"
	want := map[string]any{
		"issue_key": "AAP-12345",
		"count":     int64(5),
		"ratio":     0.5,
		"flag":      true,
		"nothing":   nil,
		"headers":   map[string]any{"Authorization": "Bearer s3cret", "X-Static": "static"},
		"pods":      []any{"web-1", "web-2"},
		"list":      []any{int64(3), "lit", map[string]any{"k": "add billing export"}},
		"labels":    map[string]any{"app": "web"},
		"names":     []any{"a", "b"},
	}
	for range 2 {
		got, err := v.Eval(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Eval (-want +got):\n%s", diff)
		}
		got.(map[string]any)["headers"].(map[string]any)["X-Static"] = "changed by the caller"
	}

	_, err = CompileValue(map[string]any{"headers": map[string]any{"Authorization": "Bearer {{ token | nope }}"}}, WithName("args"))
	wantErr := "args.headers.Authorization:1:19: unknown filter \"nope\""
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) {
		t.Errorf("CompileValue error = %v, want prefix %q", err, wantErr)
	}
	_, err = CompileValue(map[string]any{"a b": []any{1, "{{ x. }}"}})
	wantErr = "[\"a b\"][1]:1:7: syntax error"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) {
		t.Errorf("CompileValue error = %v, want prefix %q", err, wantErr)
	}
	v, err = CompileValue(map[string]any{"h": "{{ token.x }}"}, WithName("args"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Eval(context.Background(), Env{"token": map[string]any{}})
	wantErr = "args.h:1:10: token has no key \"x\"; it is empty"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) {
		t.Errorf("Eval error = %v, want prefix %q", err, wantErr)
	}
	if _, err := CompileValue(map[string]any{"ch": make(chan int)}); err == nil {
		t.Error("CompileValue(chan): no error")
	}
}

func TestTruthy(t *testing.T) {
	t.Parallel()
	type point struct{ X int }
	tests := []struct {
		v    any
		want bool
	}{
		{nil, false}, {false, false}, {true, true},
		{"", false}, {"x", true},
		{0, false}, {int64(0), false}, {int64(2), true}, {int32(0), false}, {uint8(1), true},
		{0.0, false}, {0.1, true}, {math.NaN(), true},
		{json.Number("0"), false}, {json.Number("0.0"), false}, {json.Number("1e3"), true},
		{map[string]any{}, false}, {map[string]any{"a": nil}, true},
		{[]any{}, false}, {[]any{nil}, true},
		{[]string{}, false}, {map[string]string{"a": ""}, true},
		{(*point)(nil), false}, {&point{}, true}, {point{}, true},
	}
	for _, tt := range tests {
		if got := Truthy(tt.v); got != tt.want {
			t.Errorf("Truthy(%#v) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestBuiltins(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"len", "default", "lower", "json", "math", "sum", "str", "any"} {
		if !IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) = false", name)
		}
	}
	for _, name := range []string{"inputs", "|add", "result"} {
		if IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) = true", name)
		}
	}
	names := Builtins()
	if len(names) < 40 || !strings.Contains(strings.Join(names, " "), "tojson") {
		t.Errorf("Builtins() = %v", names)
	}
}

// TestConversions checks values crossing the boundary in both directions.
func TestConversions(t *testing.T) {
	t.Parallel()
	type payload struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	env := Env{
		"ints":    []any{1, int8(2), int16(3), int32(4), int64(5), uint(6), uint8(7), uint16(8), uint32(9), uint64(10)},
		"floats":  []any{float32(1.5), 2.0, 1e300, math.Inf(1)},
		"bytes":   []byte("raw"),
		"structs": []payload{{"a", 1}},
		"ptr":     &payload{"p", 2},
		"nilptr":  (*payload)(nil),
		"nested":  map[string][]int{"x": {1, 2}},
		"numbers": map[string]json.Number{"n": "7"},
	}
	tests := []struct {
		src  string
		want any
	}{
		{"{{ ints }}", []any{1, int8(2), int16(3), int32(4), int64(5), uint(6), uint8(7), uint16(8), uint32(9), uint64(10)}},
		{"{{ [x + 0 for x in ints] }}", []any{int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7), int64(8), int64(9), int64(10)}},
		{"{{ [x * 1 for x in floats] }}", []any{1.5, int64(2), 1e300, math.Inf(1)}},
		{"{{ 'abc'[floats[1]:] }}", "c"},
		{"{{ bytes }}", "raw"},
		{"{{ structs[0].name ~ structs[0].count }}", "a1"},
		{"{{ ptr.name }}", "p"},
		{"{{ nilptr }}", nil},
		{"{{ nested.x[1] }}", int64(2)},
		{"{{ numbers.n + 1 }}", int64(8)},
		{"{{ 2 ** 70 }}", 1.1805916207174113e+21},
	}
	for _, tt := range tests {
		got, err := evalTemplate(t, tt.src, env)
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}
