package expr

import (
	"context"
	"testing"
)

func benchEnv() Env {
	return Env{
		"inputs":                map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"},
		"summary":               "Add Billing Export",
		"check_existing_branch": "❌ no such branch",
		"failure_info":          map[string]any{"needs_vpn": true, "needs_auth": false},
		"pods":                  []any{map[string]any{"name": "a", "status": "Running"}, map[string]any{"name": "b", "status": "Failed"}},
	}
}

func BenchmarkTemplateEval(b *testing.B) {
	ctx := context.Background()
	for _, bb := range []struct{ name, src string }{
		{"name", "{{ inputs.issue_key }}"},
		{"filters", "{{ summary | lower | replace(' ', '-') }}"},
		{"mixed", "{{ inputs.branch_prefix }}/{{ inputs.issue_key }}-{{ summary | lower | replace(' ', '-') }}"},
		{"literal", "main"},
	} {
		tm, err := ParseTemplate(bb.src)
		if err != nil {
			b.Fatal(err)
		}
		env := benchEnv()
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tm.Eval(ctx, env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExprEval(b *testing.B) {
	ctx := context.Background()
	for _, bb := range []struct{ name, src string }{
		{"name", "failure_info"},
		{"start_work", "not check_existing_branch or '✅' not in str(check_existing_branch)"},
		{"get", "failure_info and failure_info.get('needs_vpn')"},
		{"len", "pods and len(pods) > 0"},
	} {
		e, err := ParseExpr(bb.src)
		if err != nil {
			b.Fatal(err)
		}
		env := benchEnv()
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.EvalBool(ctx, env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProgramRun(b *testing.B) {
	p, err := ParseProgram(buildBranchName)
	if err != nil {
		b.Fatal(err)
	}
	env := Env{
		"inputs":     map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"},
		"issue_data": map[string]any{"summary": "Add billing/export", "type": "Story"},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Run(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValueEval(b *testing.B) {
	v, err := CompileValue(map[string]any{
		"issue_key": "{{ inputs.issue_key }}",
		"status":    "In Progress",
		"branch":    "{{ inputs.branch_prefix }}/{{ inputs.issue_key }}",
	})
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Eval(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTemplate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTemplate("{{ inputs.branch_prefix }}/{{ inputs.issue_key }}-{{ summary | lower | replace(' ', '-') }}"); err != nil {
			b.Fatal(err)
		}
	}
}
