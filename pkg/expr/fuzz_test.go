package expr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
)

// The fuzz tests check that compiling and running any input neither panics nor
// hangs, and that every error is a classified *Error. `go test` runs the seeds
// below and the corpus in testdata/fuzz; run the fuzzers with, for example,
//
//	go test -fuzz=FuzzParseTemplate -fuzztime=30s ./pkg/expr/

var fuzzLimits = WithLimits(Limits{MaxSteps: 20_000, MaxAlloc: 1 << 20})

func fuzzEnv() Env {
	return Env{
		"inputs":        map[string]any{"issue_key": "AAP-1", "branch_prefix": "feature", "n": 2.0},
		"issue_data":    map[string]any{"summary": "Add billing/export", "type": "Story"},
		"pods":          []any{map[string]any{"name": "a", "status": "Running"}, "x", 1.5, nil},
		"create_branch": "❌ timeout",
		"s":             "text",
	}
}

// checkErr fails t unless err is a classified *Error, or a context error.
func checkErr(t *testing.T, err error, classes ...failure.Class) {
	t.Helper()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not an *Error: %v", err, err)
	}
	class := failure.ClassOf(err)
	for _, c := range classes {
		if class == c {
			return
		}
	}
	t.Fatalf("error class %q, want one of %v: %v", class, classes, err)
}

func run(t *testing.T, eval func(context.Context) (any, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := eval(ctx); err != nil {
		checkErr(t, err, failure.Repairable, failure.Fatal)
	}
	// The step limit ends any evaluation in well under a second unloaded; the bound
	// leaves room for -race on a loaded 2-core machine.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("evaluation took %v", d)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"{{ inputs.issue_key }}", "{{ summary | lower | replace(' ', '-') }}",
		"{{ namespace | default('default') }}", "Create branch {{ branch_name }}?",
		"{{ f'{a}-{b!r}' }}", "{{ x ** 2 ** 3 }}", "{{ a ~ b }}", "{% if %}", "{# c #}{{ 1 }}",
		"{{- x -}}", "{{ {'a': {'b': 1}} }}", "{{ '}}' }}", "{{ any(x for x in y) }}",
		"{{ -x | abs ** 2 | string }}", "{{ a.b[0] is not defined }}", "{{ s[::-1] ~ s[1] }}",
	} {
		f.Add(s)
	}
	// The Jinja2 conformance cases, each alone and with text around it.
	for _, c := range jinjaCases {
		f.Add("{{ " + c.src + " }}")
		f.Add("<{{ " + c.src + " }}>")
	}
	env := fuzzEnv()
	for k, v := range jinjaEnv() {
		env[k] = v
	}
	f.Fuzz(func(t *testing.T, src string) {
		tm, err := ParseTemplate(src, fuzzLimits, WithName("t"))
		if err != nil {
			checkErr(t, err, failure.Repairable)
			return
		}
		tm.Refs()
		tm.Reads()
		run(t, func(ctx context.Context) (any, error) { return tm.Eval(ctx, env) })
	})
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{
		"not check_existing_branch or '✅' not in str(check_existing_branch)",
		"failure_info and failure_info.get('needs_vpn')", "pods and len(pods) > 0",
		"x is not None", "{{ x | length > 0 }}", "a if b else c", "(x for x in y)",
		"inputs.items is defined and 2 - n | abs > 0", "len(s[1:]) == len('é')",
	} {
		f.Add(s)
	}
	for _, c := range jinjaCases {
		f.Add(c.src)
	}
	env := fuzzEnv()
	for k, v := range jinjaEnv() {
		env[k] = v
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src, fuzzLimits)
		if err != nil {
			checkErr(t, err, failure.Repairable)
			return
		}
		e.Refs()
		e.Reads()
		run(t, func(ctx context.Context) (any, error) { return e.Eval(ctx, env) })
		run(t, func(ctx context.Context) (any, error) { return e.EvalBool(ctx, env) })
	})
}

func FuzzProgram(f *testing.F) {
	for _, s := range []string{buildBranchName, detectFailure, failurePatterns, analyzePods, complexTemplate,
		"import json\nfrom math import floor as fl\nresult = fl(2.5)", "while True:\n    pass",
		"x = [0]\nwhile True:\n    x += x", "result = f\"{'a'!r:>3}\"", "def f(x):\n    return x ** 2\nresult = f(3)",
		"result = [c for c in 'héllo'][1] + 'héllo'[-1:] + str(len('é'))", "for c in s:\n    result = c",
		"result = inputs.items if inputs.items is defined else inputs.get('x')",
	} {
		f.Add(s)
	}
	env := fuzzEnv()
	f.Fuzz(func(t *testing.T, src string) {
		p, err := ParseProgram(src, fuzzLimits)
		if err != nil {
			checkErr(t, err, failure.Repairable)
			return
		}
		p.Refs()
		p.Reads()
		run(t, func(ctx context.Context) (any, error) { return p.Run(ctx, env) })
	})
}
