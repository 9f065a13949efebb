package e2e

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

// Seed 004's own start_work skill, exactly as printed, runs end to end: its Jira
// and git tools are test doubles served on the bus like any tool service; the
// create_branch confirmation pauses the run until `skillbus runs confirm`; the
// branch creation fails with a network error the first time, and the seed's
// auto-heal steps connect the VPN and retry.
func TestStartWorkAsPrinted(t *testing.T) {
	t.Parallel()
	_, port, _ := startDev(t, "--store", t.TempDir(), "--skills", "testdata/skills-fixtures/seeds/004/start_work")
	url := "nats://127.0.0.1:" + strconv.Itoa(port)

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	calls := map[string]int{}
	var creates atomic.Int64
	double := func(name string, fn func(tool.Call) (any, error)) bustool.Def {
		return bustool.Def{Tool: tool.Func(name, func(_ context.Context, c tool.Call) (any, error) {
			mu.Lock()
			calls[name]++
			mu.Unlock()
			return fn(c)
		})}
	}
	srv, err := bustool.Serve(nc, bustool.ServerConfig{Name: "jira-git-doubles"},
		double("jira_view_issue", func(c tool.Call) (any, error) {
			return map[string]any{"key": c.Args["issue_key"], "type": "Story", "summary": "Add billing export"}, nil
		}),
		double("git_branch_exists", func(tool.Call) (any, error) { return "❌ no such branch", nil }),
		double("git_create_branch", func(c tool.Call) (any, error) {
			if creates.Add(1) == 1 {
				return nil, failure.Retry("❌ fatal: unable to access origin: no route to host")
			}
			return "✅ created " + c.Args["branch"].(string), nil
		}),
		double("vpn_connect", func(tool.Call) (any, error) { return "✅ connected", nil }),
		double("kube_login", func(tool.Call) (any, error) { return "✅ logged in", nil }),
		double("jira_transition", func(c tool.Call) (any, error) { return "✅ " + c.Args["status"].(string), nil }),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	// trigger --wait follows the run through its pause; the test answers meanwhile.
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, code := skillbus(t, "trigger", "--skill", "start_work", "--id", "sw-1", "--data", `{"issue_key":"AAP-12345"}`, "--wait", "--timeout", "80s", "--nats-url", url)
		done <- result{out, code}
	}()
	execID := events.ExecutionID("skillbus-cli", "sw-1", "start_work")
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := b.KV(context.Background(), b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		select {
		case r := <-done:
			t.Fatalf("trigger ended before the pause: exit %d\n%s", r.code, r.out)
		default:
		}
		p, _, err := run.LoadPaused(context.Background(), runs, execID)
		return err == nil && p != nil && p.Step == "create_branch"
	}, "start_work did not pause for the create_branch confirmation")
	mu.Lock()
	before := calls["git_create_branch"]
	mu.Unlock()
	if before != 0 {
		t.Fatalf("git_create_branch ran %d times before it was confirmed", before)
	}
	// The beginning of the id is enough when it names one paused execution.
	if out, code := skillbus(t, "runs", "confirm", execID[:8], "--by", "ada", "--nats-url", url); code != 0 || !strings.Contains(out, "approved step create_branch of "+execID) {
		t.Fatalf("runs confirm: exit %d\n%s", code, out)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("trigger --wait did not return")
	}
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	for _, want := range []string{
		"waiting for confirmation of step create_branch: Create branch feature/AAP-12345-add-billing-export?",
		"step create_branch approved by ada",
		"auto-heal: create_branch failed (needs_vpn), running vpn_connect",
		"fix_auth skipped",
		`"branch": "feature/AAP-12345-add-billing-export"`,
		"start_work completed",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"jira_view_issue": 1, "git_branch_exists": 1, "git_create_branch": 2, "vpn_connect": 1, "jira_transition": 1}
	for name, n := range want {
		if calls[name] != n {
			t.Errorf("%s called %d times, want %d (all calls: %v)", name, calls[name], n, calls)
		}
	}
	if calls["kube_login"] != 0 {
		t.Errorf("kube_login called: the failure was a network one")
	}
}
