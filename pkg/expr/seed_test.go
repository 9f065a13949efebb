package expr

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The examples of seed 004 (docs/architecture/skill-engine.md), verbatim.

const (
	buildBranchName = `issue_type = issue_data.get("type", "task").lower()
summary = issue_data.get("summary", "work")[:40]
slug = summary.lower().replace(" ", "-").replace("/", "-")
result = f"{inputs.branch_prefix}/{inputs.issue_key}-{slug}"
`
	detectFailure = `error_text = str(create_branch)[:300].lower()
result = {
  "needs_vpn": any(x in error_text for x in ['no route', 'timeout', 'network']),
  "needs_auth": any(x in error_text for x in ['unauthorized', '401', 'forbidden']),
}
`
	failurePatterns = `error_text = str(tool_result)[:500].lower()
result = {
  # Network failures
  "needs_vpn": any(x in error_text for x in [
    'no route', 'timeout', 'connection refused', 'network unreachable'
  ]),
  # Authentication failures
  "needs_auth": any(x in error_text for x in [
    'unauthorized', '401', '403', 'forbidden', 'token expired'
  ]),
  # Quota/limit failures
  "quota_exceeded": 'quota' in error_text or 'limit' in error_text,
  # Resource not found
  "not_found": '404' in error_text or 'not found' in error_text,
}
`
	analyzePods = `healthy = [p for p in pods if p.get("status") == "Running"]
unhealthy = [p for p in pods if p.get("status") != "Running"]
result = {
  "healthy_count": len(healthy),
  "unhealthy_count": len(unhealthy),
  "unhealthy_pods": [p["name"] for p in unhealthy]
}
`
	// The seed's "Complex Templates" block, without its datetime import, which
	// compute blocks cannot have (see TestSeedComplexTemplateImport).
	complexTemplate = `# Full Python is available in compute blocks
import json

result = {
  "summary": f"Processed {len(items)} items",
  "data": json.dumps(items)
}
`
)

func TestSeedComputeBlocks(t *testing.T) {
	t.Parallel()
	pods := []any{
		map[string]any{"name": "web-1", "status": "Running"},
		map[string]any{"name": "web-2", "status": "CrashLoopBackOff"},
		map[string]any{"name": "db-0", "status": "Running"},
		map[string]any{"name": "job-9", "status": "Pending"},
	}
	tests := []struct {
		name string
		src  string
		env  Env
		want any
	}{
		{
			name: "build_branch_name",
			src:  buildBranchName,
			env: Env{
				"inputs":     map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"},
				"issue_data": map[string]any{"summary": "Add billing/export", "type": "Story"},
			},
			want: "feature/AAP-12345-add-billing-export",
		},
		{
			name: "build_branch_name truncates the summary to 40",
			src:  buildBranchName,
			env: Env{
				"inputs":     map[string]any{"issue_key": "AAP-1", "branch_prefix": "fix"},
				"issue_data": map[string]any{"summary": "Make the export of billing data work for very large accounts"},
			},
			want: "fix/AAP-1-make-the-export-of-billing-data-work-for",
		},
		{
			name: "build_branch_name with defaults",
			src:  buildBranchName,
			env: Env{
				"inputs":     map[string]any{"issue_key": "AAP-2", "branch_prefix": "chore"},
				"issue_data": map[string]any{},
			},
			want: "chore/AAP-2-work",
		},
		{
			name: "detect_failure network",
			src:  detectFailure,
			env:  Env{"create_branch": "❌ fatal: unable to access: Failed to connect: No route to host"},
			want: map[string]any{"needs_vpn": true, "needs_auth": false},
		},
		{
			name: "detect_failure auth in a map result",
			src:  detectFailure,
			env:  Env{"create_branch": map[string]any{"error": "❌ HTTP 401 Unauthorized"}},
			want: map[string]any{"needs_vpn": false, "needs_auth": true},
		},
		{
			name: "failure detection patterns",
			src:  failurePatterns,
			env:  Env{"tool_result": "Error: quota exceeded for project; 403 Forbidden"},
			want: map[string]any{"needs_vpn": false, "needs_auth": true, "quota_exceeded": true, "not_found": false},
		},
		{
			name: "failure detection patterns not found",
			src:  failurePatterns,
			env:  Env{"tool_result": map[string]any{"status": 404, "message": "Not Found"}},
			want: map[string]any{"needs_vpn": false, "needs_auth": false, "quota_exceeded": false, "not_found": true},
		},
		{
			name: "analyze_pods",
			src:  analyzePods,
			env:  Env{"pods": pods},
			want: map[string]any{
				"healthy_count":   int64(2),
				"unhealthy_count": int64(2),
				"unhealthy_pods":  []any{"web-2", "job-9"},
			},
		},
		{
			name: "complex template",
			src:  complexTemplate,
			env:  Env{"items": []any{"a", map[string]any{"b": 1.0}}},
			want: map[string]any{"summary": "Processed 2 items", "data": `["a", {"b": 1}]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParseProgram(tt.src)
			if err != nil {
				t.Fatalf("ParseProgram: %v", err)
			}
			got, err := p.Run(context.Background(), tt.env)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSeedComplexTemplateImport(t *testing.T) {
	t.Parallel()
	src := `# Full Python is available in compute blocks
import json
from datetime import datetime

result = {
  "timestamp": datetime.now().isoformat(),
  "summary": f"Processed {len(items)} items",
  "data": json.dumps(items)
}
`
	_, err := ParseProgram(src, WithName("steps.report.compute"))
	want := "steps.report.compute:3:1: import of \"datetime\" is not supported: compute blocks have no clock"
	if err == nil || !hasPrefix(err.Error(), want) {
		t.Fatalf("ParseProgram error = %v, want prefix %q", err, want)
	}
}

func TestSeedConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cond string
		env  Env
		want bool
	}{
		// start_work
		{"not check_existing_branch or '✅' not in str(check_existing_branch)", Env{"check_existing_branch": nil}, true},
		{"not check_existing_branch or '✅' not in str(check_existing_branch)", Env{}, true},
		{"not check_existing_branch or '✅' not in str(check_existing_branch)", Env{"check_existing_branch": "✅ Branch feature/x exists"}, false},
		{"not check_existing_branch or '✅' not in str(check_existing_branch)", Env{"check_existing_branch": "❌ no such branch"}, true},
		{"create_branch and '❌' in str(create_branch)", Env{"create_branch": "❌ fatal: timeout"}, true},
		{"create_branch and '❌' in str(create_branch)", Env{"create_branch": "✅ created"}, false},
		{"create_branch and '❌' in str(create_branch)", Env{}, false},
		{"failure_info and failure_info.get('needs_vpn')", Env{"failure_info": map[string]any{"needs_vpn": true, "needs_auth": false}}, true},
		{"failure_info and failure_info.get('needs_auth')", Env{"failure_info": map[string]any{"needs_vpn": true, "needs_auth": false}}, false},
		{"failure_info and failure_info.get('needs_vpn')", Env{}, false},
		{"failure_info", Env{"failure_info": map[string]any{"needs_vpn": false}}, true},
		{"failure_info", Env{}, false},
		// Step types
		{"pod_analysis.unhealthy_count > 0", Env{"pod_analysis": map[string]any{"unhealthy_count": int64(2)}}, true},
		{"pod_analysis.unhealthy_count > 0", Env{"pod_analysis": map[string]any{"unhealthy_count": 0.0}}, false},
		// Conditional expressions
		{"pods and len(pods) > 0", Env{"pods": []any{"a"}}, true},
		{"pods and len(pods) > 0", Env{"pods": []any{}}, false},
		{"status == 'running' and health.ready", Env{"status": "running", "health": map[string]any{"ready": true}}, true},
		{"status == 'running' and health.ready", Env{"status": "pending", "health": map[string]any{"ready": true}}, false},
		{"not (error and 'fatal' in error)", Env{"error": "fatal: boom"}, false},
		{"not (error and 'fatal' in error)", Env{"error": "warning"}, true},
		{"not (error and 'fatal' in error)", Env{}, true},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.cond)
		if err != nil {
			t.Fatalf("ParseExpr(%q): %v", tt.cond, err)
		}
		got, err := e.EvalBool(context.Background(), tt.env)
		if err != nil {
			t.Fatalf("EvalBool(%q, %v): %v", tt.cond, tt.env, err)
		}
		if got != tt.want {
			t.Errorf("EvalBool(%q, %v) = %v, want %v", tt.cond, tt.env, got, tt.want)
		}
		v, err := e.Eval(context.Background(), tt.env)
		if err != nil {
			t.Fatalf("Eval(%q, %v): %v", tt.cond, tt.env, err)
		}
		if Truthy(v) != tt.want {
			t.Errorf("Truthy(Eval(%q, %v)) = Truthy(%#v), want %v", tt.cond, tt.env, v, tt.want)
		}
	}
}

func TestSeedTemplates(t *testing.T) {
	t.Parallel()
	env := Env{
		"inputs":      map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"},
		"get_issue":   map[string]any{"branch": "feature/AAP-12345-x"},
		"issue_data":  map[string]any{"fields": map[string]any{"customfield_123": "epic-7"}, "summary": "Add billing"},
		"summary":     "Add Billing Export",
		"branch_name": "feature/AAP-12345-add-billing",
		"pod_analysis": map[string]any{
			"unhealthy_pods": []any{"web-2", "job-9"},
		},
		"issues": []any{map[string]any{"key": "AAP-1"}, map[string]any{"key": "AAP-2"}},
		"issue":  map[string]any{"key": "AAP-1"},
	}
	tests := []struct {
		src  string
		want any
	}{
		{"{{ inputs.issue_key }}", "AAP-12345"},
		{"{{ get_issue.branch }}", "feature/AAP-12345-x"},
		{"{{ issue_data.fields.customfield_123 }}", "epic-7"},
		{"{{ namespace | default('default') }}", "default"},
		{"{{ summary | lower | replace(' ', '-') }}", "add-billing-export"},
		{"{{ branch_name }}", "feature/AAP-12345-add-billing"},
		{"{{ pod_analysis.unhealthy_pods }}", []any{"web-2", "job-9"}},
		{"{{ issues }}", []any{map[string]any{"key": "AAP-1"}, map[string]any{"key": "AAP-2"}}},
		{"{{ issue.key }}", "AAP-1"},
		{"{{ issue_data }}", env["issue_data"]},
		{"Create branch {{ branch_name }}?", "Create branch feature/AAP-12345-add-billing?"},
		{"app=myapp", "app=myapp"},
	}
	for _, tt := range tests {
		tm, err := ParseTemplate(tt.src)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", tt.src, err)
		}
		got, err := tm.Eval(context.Background(), env)
		if err != nil {
			t.Fatalf("Eval(%q): %v", tt.src, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Eval(%q) (-want +got):\n%s", tt.src, diff)
		}
	}
}

// TestSeedStartWork evaluates the whole start_work skill's steps in order, as an
// engine would, on the happy path and the auto-heal path.
func TestSeedStartWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	steps := []struct {
		id, condition, compute, output string
		args                           map[string]any
	}{
		{id: "get_issue", args: map[string]any{"issue_key": "{{ inputs.issue_key }}"}, output: "issue_data"},
		{id: "build_branch_name", compute: buildBranchName, output: "branch_name"},
		{id: "check_existing_branch", args: map[string]any{"branch": "{{ branch_name }}"}},
		{id: "create_branch", condition: "not check_existing_branch or '✅' not in str(check_existing_branch)",
			args: map[string]any{"branch": "{{ branch_name }}", "from_branch": "main"}},
		{id: "detect_failure", condition: "create_branch and '❌' in str(create_branch)", compute: detectFailure, output: "failure_info"},
		{id: "fix_vpn", condition: "failure_info and failure_info.get('needs_vpn')"},
		{id: "fix_auth", condition: "failure_info and failure_info.get('needs_auth')", args: map[string]any{"cluster": "ephemeral"}},
		{id: "retry_create_branch", condition: "failure_info", args: map[string]any{"branch": "{{ branch_name }}", "from_branch": "main"}, output: "create_branch_retry"},
		{id: "transition_issue", args: map[string]any{"issue_key": "{{ inputs.issue_key }}", "status": "In Progress"}},
	}
	outputs, err := CompileValue(map[string]any{
		"branch": "{{ branch_name }}", "issue": "{{ issue_data }}", "success": true,
	}, WithName("outputs"))
	if err != nil {
		t.Fatal(err)
	}

	run := func(tools map[string]any) (ran []string, calls map[string]any, out any) {
		env := Env{"inputs": map[string]any{"issue_key": "AAP-12345", "branch_prefix": "feature"}}
		calls = map[string]any{}
		for _, s := range steps {
			if s.condition != "" {
				c, err := ParseExpr(s.condition, WithName(s.id+".condition"))
				if err != nil {
					t.Fatal(err)
				}
				ok, err := c.EvalBool(ctx, env)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					continue
				}
			}
			ran = append(ran, s.id)
			var result any
			if s.compute != "" {
				p, err := ParseProgram(s.compute, WithName(s.id+".compute"))
				if err != nil {
					t.Fatal(err)
				}
				if result, err = p.Run(ctx, env); err != nil {
					t.Fatal(err)
				}
			} else {
				args, err := CompileValue(s.args, WithName(s.id+".args"))
				if err != nil {
					t.Fatal(err)
				}
				a, err := args.Eval(ctx, env)
				if err != nil {
					t.Fatal(err)
				}
				calls[s.id] = a
				result = tools[s.id]
			}
			env[s.id] = result
			if s.output != "" {
				env[s.output] = result
			}
		}
		out, err := outputs.Eval(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return ran, calls, out
	}

	issue := map[string]any{"summary": "Add billing/export", "type": "Story"}
	ran, calls, out := run(map[string]any{
		"get_issue":             issue,
		"check_existing_branch": "❌ branch does not exist",
		"create_branch":         "✅ Created branch",
	})
	if diff := cmp.Diff([]string{"get_issue", "build_branch_name", "check_existing_branch", "create_branch", "transition_issue"}, ran); diff != "" {
		t.Errorf("happy path steps (-want +got):\n%s", diff)
	}
	wantCalls := map[string]any{
		"get_issue":             map[string]any{"issue_key": "AAP-12345"},
		"check_existing_branch": map[string]any{"branch": "feature/AAP-12345-add-billing-export"},
		"create_branch":         map[string]any{"branch": "feature/AAP-12345-add-billing-export", "from_branch": "main"},
		"transition_issue":      map[string]any{"issue_key": "AAP-12345", "status": "In Progress"},
	}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("happy path tool args (-want +got):\n%s", diff)
	}
	wantOut := map[string]any{"branch": "feature/AAP-12345-add-billing-export", "issue": issue, "success": true}
	if diff := cmp.Diff(wantOut, out); diff != "" {
		t.Errorf("happy path outputs (-want +got):\n%s", diff)
	}

	ran, _, _ = run(map[string]any{
		"get_issue":     issue,
		"create_branch": "❌ ssh: connect to host: Connection timed out (timeout)",
	})
	if diff := cmp.Diff([]string{"get_issue", "build_branch_name", "check_existing_branch", "create_branch",
		"detect_failure", "fix_vpn", "retry_create_branch", "transition_issue"}, ran); diff != "" {
		t.Errorf("auto-heal steps (-want +got):\n%s", diff)
	}
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
