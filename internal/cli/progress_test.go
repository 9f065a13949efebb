package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

const napperSkill = `name: napper
description: Counts, sleeps four seconds, counts again.
version: 1.0.0
max_retries: 0
steps:
  - id: first
    tool: count
    args: {mode: first}
  - id: nap
    sleep: 4s # trigger --wait must read the scheduled wake-up before the server fires and drops it
  - id: last
    tool: count
    args: {mode: last}
`

const payWaiterSkill = `name: pay-waiter
description: Counts, then waits for a payment.
version: 1.0.0
max_retries: 0
steps:
  - id: first
    tool: count
    args: {mode: first}
  - id: pay
    wait_for_event:
      type: com.example.paid
      timeout: 1h
`

// progressSystem runs a registry, a router and a worker with napperSkill and
// payWaiterSkill.
func progressSystem(t *testing.T) *dlqSystem {
	t.Helper()
	s, srv := newDLQSystem(t, 2*time.Minute)
	var err error
	count := tool.Func("count", func(_ context.Context, c tool.Call) (any, error) {
		mode, _ := c.Args["mode"].(string)
		s.counter(mode).Add(1)
		return map[string]any{"mode": mode}, nil
	})
	ts, err := bustool.Serve(srv.Conn(t), bustool.ServerConfig{Name: "counter"}, bustool.Def{Tool: count, Description: "counts calls by mode"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Shutdown(context.Background()) })
	s.writeSkill("napper", napperSkill)
	s.writeSkill("pay-waiter", payWaiterSkill)
	s.service(cli.Registry, "--skills", s.dir)
	natstest.Eventually(t, 20*time.Second, func() bool {
		return s.catalogVersion("napper") == "1.0.0" && s.catalogVersion("pay-waiter") == "1.0.0"
	}, "the registry did not publish the skills")
	s.service(cli.Router)
	s.service(cli.Worker, "--bus-tools-interval", "100ms", "--backoff-base", "10ms")
	return s
}

// executionOf returns the id of the one execution of skill that runs list shows.
func (s *dlqSystem) executionOf(skill string) string {
	s.t.Helper()
	return s.executionIn(skill, "")
}

// executionIn returns the id of an execution of skill that runs list shows with
// status ("": any).
func (s *dlqSystem) executionIn(skill, status string) string {
	s.t.Helper()
	var id string
	natstest.Eventually(s.t, 20*time.Second, func() bool {
		out, err := s.skillbus("runs", "list", "--json")
		if err != nil {
			return false
		}
		var rows []struct {
			ID     string `json:"execution_id"`
			Skill  string `json:"skill"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal([]byte(out), &rows)
		for _, r := range rows {
			if r.Skill == skill && (status == "" || r.Status == status) {
				id = r.ID
				return true
			}
		}
		return false
	}, "runs list never showed a %s run of %s", status, skill)
	return id
}

// twoTimes is a line of runs show with two timestamps: an event printed as
// nothing, the next one's time on its line.
var twoTimes = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} +\d\d:\d\d:\d\d\.\d{3}`)

// trigger --wait and runs show tell a sleep as it happens: the run parks until a
// time, wakes up and resumes, its earlier steps not reported again.
func TestSleepProgress(t *testing.T) {
	t.Parallel()
	s := progressSystem(t)
	out, err := s.skillbus("trigger", "--skill", "napper", "--wait", "--timeout", "60s")
	t.Logf("trigger --wait:\n%s", out)
	if err != nil {
		t.Fatalf("trigger --wait: exit %d (%v)", cli.ExitCode(err), err)
	}
	for _, want := range []string{"napper started (attempt 1)", "⏸ step nap sleeps until ", "▶ step nap woke up", "▶ napper resumed", "✓ last", "✔ napper completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("trigger --wait lacks %q", want)
		}
	}
	if n := strings.Count(out, "started (attempt"); n != 1 {
		t.Errorf("trigger --wait says the run started %d times, want 1 (then resumed)", n)
	}
	if n := strings.Count(out, "✓ first"); n != 1 {
		t.Errorf("trigger --wait reports step first %d times, want 1", n)
	}
	id := s.executionOf("napper")
	out, err = s.skillbus("runs", "show", id)
	t.Logf("runs show:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if twoTimes.MatchString(out) {
		t.Errorf("runs show has a line with two timestamps")
	}
	if !strings.Contains(out, "▶ step nap woke up") || strings.Count(out, "✓ first") != 1 {
		t.Errorf("runs show lacks the wake-up, or repeats step first")
	}
}

// A run cancelled while it waits for an event: trigger --wait said it waits,
// then says who cancelled it and why, and exits 6; runs show, while it waits and
// after, has no line with two timestamps, and its last line says the reason.
func TestCancelledWaitProgress(t *testing.T) {
	t.Parallel()
	s := progressSystem(t)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := s.skillbus("trigger", "--skill", "pay-waiter", "--wait", "--timeout", "60s")
		done <- result{out, err}
	}()
	id := s.executionOf("pay-waiter")
	var out string
	natstest.Eventually(t, 20*time.Second, func() bool {
		out, _ = s.skillbus("runs", "show", id)
		return strings.Contains(out, "waiting: step pay is")
	}, "runs show never said the run waits")
	t.Logf("runs show while it waits:\n%s", out)
	if twoTimes.MatchString(out) || !strings.Contains(out, "⏸ step pay waits for event com.example.paid until ") {
		t.Errorf("runs show of the waiting run: a line with two timestamps, or no line saying what it waits for")
	}
	if out, err := s.skillbus("runs", "cancel", id, "--by", "ada", "--reason", "wrong customer"); err != nil {
		t.Fatalf("runs cancel: %v\n%s", err, out)
	}
	var r result
	select {
	case r = <-done:
	case <-s.ctx.Done():
		t.Fatal("trigger --wait did not return after the cancel")
	}
	t.Logf("trigger --wait:\n%s", r.out)
	if cli.ExitCode(r.err) != 6 {
		t.Errorf("trigger --wait: exit %d (%v), want 6", cli.ExitCode(r.err), r.err)
	}
	for _, want := range []string{"⏸ step pay waits for event com.example.paid until ", "✘ pay-waiter cancelled by ada: wrong customer"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("trigger --wait lacks %q", want)
		}
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		out, _ = s.skillbus("runs", "show", id)
		return strings.Contains(out, "cancelled by ada: wrong customer, on worker")
	}, "runs show of the cancelled run never gave the reason in its last line")
	t.Logf("runs show:\n%s", out)
	if twoTimes.MatchString(out) || !strings.Contains(out, "✘ pay-waiter cancelled by ada: wrong customer") {
		t.Errorf("runs show of the cancelled run: a line with two timestamps, or no cancel line")
	}
}

// trigger --help lists the exit code of a cancelled run.
func TestTriggerHelpNamesTheCancelledExitCode(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := cli.Skillbus(context.Background(), []string{"trigger", "--help"}, noEnv, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "and 6 when it was cancelled") {
		t.Fatalf("trigger --help does not list exit 6 for a cancelled run:\n%s", out.String())
	}
}

// An event sent to resume a waiting run, which no skill takes: trigger --wait
// says that it ended the run's wait and exits 0, not 3 (not routed).
func TestEventThatEndsAWaitIsNotAFailure(t *testing.T) {
	t.Parallel()
	s := progressSystem(t)
	type result struct {
		out string
		err error
	}
	// A router that has not yet learnt of the wait when the event comes matches it
	// later, from the triggers stored since the wait began, once the event was
	// recorded as unmatched: that run ends too, and the event reports exit 3. The
	// window is the router's watch of the wait records; another run tries again.
	ended := false
	for try := 1; try <= 3 && !ended; try++ {
		done := make(chan result, 1)
		go func() {
			out, err := s.skillbus("trigger", "--skill", "pay-waiter", "--wait", "--timeout", "60s")
			done <- result{out, err}
		}()
		id := s.executionIn("pay-waiter", "waiting")
		out, err := s.skillbus("trigger", "com.example.paid", "--data", `{"amount":5}`, "--wait", "--timeout", "30s")
		switch {
		case err == nil && strings.Contains(out, "▶ no skill takes it, but it ended the wait of 1 run: "+id):
			ended = true
		case cli.ExitCode(err) == 3 && strings.Contains(out, "✗ not routed: no_skill"):
			t.Logf("try %d: the router matched the event to the wait after recording it as unmatched:\n%s", try, out)
		default:
			t.Fatalf("the paying event: exit %d (%v)\n%s", cli.ExitCode(err), err, out)
		}
		select {
		case r := <-done:
			if r.err != nil || !strings.Contains(r.out, "✔ pay-waiter completed") {
				t.Errorf("the waiting run: %v\n%s", r.err, r.out)
			}
		case <-s.ctx.Done():
			t.Fatal("the waiting run did not complete")
		}
	}
	if !ended {
		t.Fatal("in three tries, trigger --wait never said the event ended the wait")
	}
	// An event no skill takes and no run waits for is still exit 3.
	if out, err := s.skillbus("trigger", "com.example.paid", "--data", `{}`, "--wait", "--timeout", "30s"); cli.ExitCode(err) != 3 || !strings.Contains(out, "✗ not routed: no_skill") {
		t.Errorf("an event nothing waits for: exit %d\n%s", cli.ExitCode(err), out)
	}
}
