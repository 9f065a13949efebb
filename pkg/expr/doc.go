// Package expr evaluates the expressions that skills are written with: {{ }}
// templates in args and outputs, conditions, and compute blocks. They
// run in Starlark (go.starlark.net), a hermetic, Python-like language, with a
// bridge for the Python and Jinja the skills are written in. Go's text/template is
// never used: it cannot be stopped.
//
// # Compile once, evaluate many times
//
// ParseTemplate, ParseExpr, ParseProgram and CompileValue compile source into
// immutable values that any number of goroutines may evaluate at once, each with
// its own Env of inputs and step outputs:
//
//	cond, err := expr.ParseExpr("failure_info and failure_info.get('needs_vpn')",
//		expr.WithName("steps.fix_vpn.condition"))
//	...
//	ok, err := cond.EvalBool(ctx, expr.Env{"failure_info": map[string]any{"needs_vpn": true}})
//
// Values in an Env are JSON-like: nil, bool, string, numbers, map[string]any,
// []any. They are not copied: maps and lists are wrapped and their elements
// converted when used, and they are read-only to expressions. Values that come
// back are JSON-like too: None is nil, ints are int64, floats float64, lists
// []any and dicts map[string]any. A float64 with an integral value (JSON gives
// every number as one) comes in as an int, so that s[:n] works.
//
// # Templates
//
// A string without {{ is a literal. A template that is one {{ expression }},
// with nothing but whitespace around it, evaluates to the expression's value,
// whatever its type, so "{{ pod_analysis.unhealthy_pods }}" passes a list to a
// tool. Any other template is rendered to a string: None renders as nothing,
// True as True, lists and dicts as JSON.
//
//	namespace: "{{ namespace | default('default') }}"
//	slug: "{{ summary | lower | replace(' ', '-') }}"
//	message: "Create branch {{ branch_name }}?"
//
// Expressions are Python expressions, as in Jinja: attribute access on dicts
// (inputs.issue_key is inputs["issue_key"]; a key wins over a dict method of the
// same name, so inputs.items is the input named items, while inputs.items() is
// the method), indexing, slicing, comparisons, `a if c else b`, list and dict
// comprehensions, and Jinja's filters, which are functions called with the
// filtered value first: x | replace(' ', '-') is replace(x, ' ', '-').
//
// Precedence is Jinja's: a filter, and a test such as `is defined`, applies to
// the operand just before it, with its attributes, calls and unary signs, and
// binds tighter than every binary operator: -x | abs is abs(-x), 2 - x | abs is
// 2 - abs(x), 'a' ~ b | upper upper-cases b only, and x | length > 0 compares
// the length. In templates ** is Jinja's too: left-associative, with unary
// operands, so -2 ** 2 is 4 and 2 ** 3 ** 2 is 64. Jinja's lower-case true,
// false and none, concatenation with ~, comments {# #} and whitespace control
// {{- -}} work. The tests are `is defined`, `is undefined` (and their `is not`
// forms), `is none`, `is true` and `is false`: x.key is defined is false when
// x has no key "key", and a name set to None is defined. Jinja statements
// ({% if %}, {% for %}) do not work: use a compute step, or a condition on the
// step.
//
// The filters are default(value, default_value="", boolean=False), lower,
// upper, title, capitalize, trim (and strip), replace(s, old, new[, count]),
// join(list, sep="", attribute=None), length (and count), tojson(indent=None),
// fromjson, first, last, int, float, string, list, sort(reverse=False,
// case_sensitive=False, attribute=None), sorted, unique, split(sep=None,
// maxsplit=-1), truncate(length=255, killwords=False, end="...", leeway=0),
// abs, round(precision=0, method="common"), sum(start=0, attribute=None), min,
// max, map(filter_name or attribute=) and reverse; d is default. All of them are
// also functions in conditions and compute blocks, where round, int and float
// are Python's (round(2.5) is 2) and the filters Jinja's (2.5 | round is 2.0,
// '3.7' | int is 3). String filters take None as "". The default filter's value
// is the default when its operand is undefined (a missing name, key, attribute
// or index) or None.
//
// # Conditions
//
// A condition is one Python expression, true or false by Python's rules (see
// Truthy):
//
//	not check_existing_branch or '✅' not in str(check_existing_branch)
//	pod_analysis.unhealthy_count > 0
//
// A name that is not in the Env is None, as an undefined name is in Jinja, so a
// condition on the output of a skipped step is simply false. Refs lists the
// names an expression uses, and Reads where it reads them and which keys, for
// callers that check them when a skill is loaded.
//
// # Compute blocks
//
// A compute block is a sequence of Python statements; its value is the final
// value of the variable result:
//
//	error_text = str(create_branch)[:300].lower()
//	result = {
//	  "needs_vpn": any(x in error_text for x in ['no route', 'timeout', 'network']),
//	  "needs_auth": any(x in error_text for x in ['unauthorized', '401', 'forbidden']),
//	}
//
// Blocks may use if, for and while at top level, reassign variables, define
// functions (def and lambda, without recursion), and use sets. f-strings,
// generator expressions, **, `is None`, x.sort(), x.copy(), str.ljust and
// friends, isinstance, sum, round, pow, map and filter are translated or
// provided. The json module (dumps, loads, encode, decode, indent) and the math
// module are always available, so `import json` and `import math` do nothing;
// any other import is an error, because compute blocks have no clock,
// filesystem, network, environment or randomness. print goes to the WithPrint
// hook, or nowhere.
//
// # Differences from Python and Jinja
//
// Templates give Jinja2's answers; conformance_test.go checks 243 expressions
// against the text Jinja2 3.1 renders. Where they differ, on purpose:
//
//   - A template renders None as nothing (Jinja2: None), lists and dicts as
//     JSON, and a template that is one expression alone gives its value.
//   - Attribute access on a dict reads the key before the method (Jinja2 tries
//     the method first, so its inputs.items is a bound method).
//   - default replaces None as well as undefined.
//   - A missing name is None, but reading a missing key, attribute or index is an
//     error naming the keys there are (Jinja2 gives an undefined that renders as
//     nothing), except under is defined, is undefined and default.
//   - ~ binds like + (Jinja2: between + and *); they differ only where Jinja2
//     fails, as in 1 + 2 ~ 'a'.
//   - No chained comparisons (a < b < c), no `a if c` without else, no adjacent
//     string literals ('a' 'b'), and only the tests and filters listed above.
//
// Expressions are Starlark underneath, so in compute blocks and conditions:
//
//   - Strings are text: len, indexing, slicing and iteration count characters,
//     but find, index and friends return byte offsets (the same for ASCII).
//   - No try/except, classes, with, yield, global, del, or chained comparisons
//     (a < b < c); fail(msg) stops a block with an error.
//   - `is` is equality, so use it only with None, True and False.
//   - f-strings take no format specs ({x:>10}); use str methods or %.
//   - Dicts and lists from the Env are read-only ("attrdict" and "attrlist" to
//     type()); copy them with dict(x) or list(x) to change them. Attribute access
//     works on them, not on dicts a block builds.
//   - In a compute block, a variable read before it is first assigned, in the
//     order of the text, is the Env's value of that name: `pods = pods or []`
//     works, but a loop that reads a variable before the statement that sets it
//     reads the Env's value (or None) every time round.
//   - An Env name hides a builtin or filter of the same name; IsBuiltin and
//     Builtins let callers keep step ids off those names.
//   - In a compute block | is Python's operator with Python's precedence (a
//     filter when its right side names one), and ** is Python's.
//   - round halves to even, as Python's does, and returns an int without
//     ndigits; sort is Jinja's (case-insensitive) and sorted is Python's.
//   - json.dumps leaves non-ASCII text as it is.
//
// # Limits
//
// Every evaluation is bounded (Limits, WithLimits): by a number of steps, where
// a step is an interpreter instruction or a comparable piece of work in a
// builtin, and by an allocation budget for everything that makes values grow,
// checked before the memory is taken. An endless loop, 'x' * 10**10, or a loop
// that doubles a list stops with a failure.Fatal error within milliseconds. The
// context stops an evaluation too: its error wraps ctx.Err(). Pass a context with
// a deadline as the last line of defence: a builtin given a deliberately
// pathological value (hashing a tuple that holds the same tuple many times over,
// say) is not interrupted by either limit.
//
// # Errors
//
// Errors are *Error values with the position in the text the author wrote, and a
// failure class: failure.Repairable for mistakes in the skill (syntax, unknown
// keys, type errors), failure.Fatal for exceeded limits. A missing key names the
// keys there are:
//
//	args.issue_key:1:11: inputs has no key "isue_key" (did you mean "issue_key"?); its keys are: branch_prefix, issue_key
//		{{ inputs.isue_key }}
//		          ^
package expr
