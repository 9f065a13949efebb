package workflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func loadSeed(t *testing.T, name string) *skill.Skill {
	t.Helper()
	s, ds := skill.LoadPath(filepath.Join("..", "..", "testdata", "skills-fixtures", "seeds", "004", name))
	for _, d := range ds {
		if d.Severity == skill.SeverityError {
			t.Fatalf("%s: %v", name, d)
		}
	}
	return s
}

// outside are test doubles of the services seed 004's start_work calls, served as
// real tools.
type outside struct {
	mu    sync.Mutex
	calls []string // tool idempotency-key
}

func (o *outside) tools() []tool.Tool {
	f := func(name string, fn func(c tool.Call, n int) (any, error)) tool.Tool {
		return tool.Func(name, func(_ context.Context, c tool.Call) (any, error) {
			o.mu.Lock()
			o.calls = append(o.calls, name+" "+c.IdempotencyKey)
			n := 0
			for _, l := range o.calls {
				if strings.HasPrefix(l, name+" ") {
					n++
				}
			}
			o.mu.Unlock()
			return fn(c, n)
		})
	}
	return []tool.Tool{
		f("jira_view_issue", func(c tool.Call, _ int) (any, error) {
			return map[string]any{"key": c.Args["issue_key"], "type": "Story", "summary": "Add billing export"}, nil
		}),
		f("git_branch_exists", func(c tool.Call, _ int) (any, error) {
			return "Branch " + c.Args["branch"].(string) + " does not exist", nil
		}),
		f("git_create_branch", func(c tool.Call, n int) (any, error) {
			if n == 1 {
				return nil, failure.Retry("❌ git push origin %s: dial tcp 10.0.0.7:443: connect: no route to host", c.Args["branch"])
			}
			return "✅ Created branch " + c.Args["branch"].(string) + " from " + c.Args["from_branch"].(string), nil
		}),
		f("vpn_connect", func(tool.Call, int) (any, error) { return "✅ VPN connected", nil }),
		f("kube_login", func(tool.Call, int) (any, error) { return "✅ logged in", nil }),
		f("jira_transition", func(c tool.Call, _ int) (any, error) {
			return "✅ " + c.Args["issue_key"].(string) + " → " + c.Args["status"].(string), nil
		}),
	}
}

// Seed 004's start_work, as printed: it asks before creating the branch; once
// approved, the branch creation fails with a network error, the auto-heal steps
// detect it, connect the VPN (autoheal.triggered) and retry, and the issue moves on.
func TestSeedStartWork(t *testing.T) {
	t.Parallel()
	s := loadSeed(t, "start_work")
	var svc outside
	store := &workflow.MemStore{}
	e := newEngine(t, workflow.Config{Checkpoints: store}, svc.tools()...)
	run := workflow.Run{ExecutionID: "ex", Skill: s, Inputs: map[string]any{"issue_key": "AAP-12345"}, Attempt: 1}

	_, err := e.Execute(deadline(t), run)
	var p *workflow.PausedError
	if !errors.As(err, &p) || p.Step != "create_branch" || p.Message != "Create branch feature/AAP-12345-add-billing-export?" || !p.Default {
		t.Fatalf("err = %#v, want a pause at create_branch", err)
	}

	j := &journal{}
	run.Attempt, run.Observer = 2, j
	run.Confirmations = map[string]workflow.Answer{"create_branch": {Approved: true, By: "ada"}}
	out, l, err := e.ExecuteLog(deadline(t), run)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := map[string]any{
		"branch":  "feature/AAP-12345-add-billing-export",
		"issue":   map[string]any{"key": "AAP-12345", "type": "Story", "summary": "Add billing export"},
		"success": true,
	}
	if d := cmp.Diff(wantOut, out); d != "" {
		t.Errorf("outputs (-want +got)\n%s", d)
	}
	wantEvents := []string{
		"resumed get_issue completed",
		"resumed build_branch_name completed",
		"resumed check_existing_branch completed",
		"start create_branch tool",
		"continued create_branch",
		"start detect_failure compute",
		"done detect_failure",
		"heal create_branch by fix_vpn (vpn_connect, needs_vpn)",
		"start fix_vpn tool",
		"done fix_vpn",
		"skip fix_auth: condition is false: failure_info and failure_info.get('needs_auth')",
		"start retry_create_branch tool",
		"done retry_create_branch",
		"start transition_issue tool",
		"done transition_issue",
	}
	if d := cmp.Diff(wantEvents, j.lines); d != "" {
		t.Errorf("events (-want +got)\n%s", d)
	}
	wantHeal := workflow.AutoHeal{
		Step: "create_branch", HealStep: "fix_vpn", Action: "vpn_connect", FailureType: "needs_vpn",
		Error: "❌ git push origin feature/AAP-12345-add-billing-export: dial tcp 10.0.0.7:443: connect: no route to host",
	}
	if d := cmp.Diff([]workflow.AutoHeal{wantHeal}, j.heals); d != "" {
		t.Errorf("auto-heal (-want +got)\n%s", d)
	}
	wantCalls := []string{
		"jira_view_issue ex/get_issue",
		"git_branch_exists ex/check_existing_branch",
		"git_create_branch ex/create_branch",
		"vpn_connect ex/fix_vpn",
		"git_create_branch ex/retry_create_branch",
		"jira_transition ex/transition_issue",
	}
	if d := cmp.Diff(wantCalls, svc.calls); d != "" {
		t.Errorf("tool calls (-want +got)\n%s", d)
	}

	var buf bytes.Buffer
	if err := workflow.Format(&buf, l); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	for _, want := range []string{
		"start_work 1.0 · execution ex · attempt 2 · completed · steps ",
		"get_issue ", "resumed from attempt 1",
		"create_branch ", "continued", "retryable: ❌ git push origin",
		"auto-heal of create_branch (needs_vpn)",
		"retry of create_branch",
		"fix_auth ", "skipped", "condition is false",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("Format output lacks %q", want)
		}
	}
}

// When the branch already exists, nothing is created and nothing heals.
func TestSeedStartWorkBranchExists(t *testing.T) {
	t.Parallel()
	s := loadSeed(t, "start_work")
	exists := tool.Func("git_branch_exists", func(context.Context, tool.Call) (any, error) { return "✅ Branch exists", nil })
	var svc outside
	var ts []tool.Tool
	for _, t := range svc.tools() {
		if t.Name() != "git_branch_exists" {
			ts = append(ts, t)
		}
	}
	j := &journal{}
	_, err := newEngine(t, workflow.Config{}, append(ts, exists)...).Execute(deadline(t), workflow.Run{
		ExecutionID: "ex", Skill: s, Inputs: map[string]any{"issue_key": "AAP-1", "branch_prefix": "fix"}, Observer: j,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"create_branch", "detect_failure", "fix_vpn", "fix_auth", "retry_create_branch"} {
		if got := j.of(id); !cmp.Equal(got, []string{"skip"}) {
			t.Errorf("%s: %v, want skipped", id, got)
		}
	}
	if len(j.heals) != 0 {
		t.Errorf("heals %v", j.heals)
	}
}

// Seed 004's parallel and caching examples as printed.
func TestSeedParallelCache(t *testing.T) {
	t.Parallel()
	s := loadSeed(t, "parallel_cache")
	var cnt counter
	store := &workflow.MemStore{}
	// step_a and step_b must run together: both join a meeting of two.
	var both tool.Tool
	together := func(ctx context.Context, c tool.Call) (any, error) {
		return both.Call(ctx, tool.Call{Step: c.Step, Args: meet("ab", 2)})
	}
	e := newEngine(t, workflow.Config{Cache: store}, cnt.tool("tool_c"), cnt.tool("get_app_config"),
		tool.Func("tool_a", together), tool.Func("tool_b", together))
	for i := range 2 {
		j := &journal{}
		both = meeting()
		if _, err := e.Execute(deadline(t), workflow.Run{ExecutionID: fmt.Sprint("run", i), Skill: s, Observer: j}); err != nil {
			t.Fatal(err)
		}
		if j.index("done step_a") > j.index("start step_c tool") || j.index("done step_b") > j.index("start step_c tool") {
			t.Errorf("step_c started too early: %v", j.lines)
		}
	}
	if cnt.n("get_config") != 1 || cnt.n("step_c") != 2 {
		t.Errorf("calls %v: get_config should be cached on the second run", cnt.calls)
	}
}
