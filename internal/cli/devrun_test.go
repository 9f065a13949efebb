package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// startDev runs `skillbus dev` on a free port and a fresh store with the example
// skills and args, until the test ends (then it must stop without an error), and
// returns its output.
func startDev(t *testing.T, args ...string) *natstest.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &natstest.Buffer{}
	done := make(chan error, 1)
	all := append([]string{"dev", "--port", "-1", "--store", t.TempDir(), "--skills", filepath.Join("..", "..", "testdata", "skills"), "--log-level", "warn"}, args...)
	go func() { done <- cli.Skillbus(ctx, all, noEnv, logs, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	return logs
}

// devLine waits for dev's output to have a line matching re (what its banner says
// once it runs) and returns the match's groups.
func devLine(t *testing.T, logs *natstest.Buffer, re string) []string {
	t.Helper()
	r := regexp.MustCompile(re)
	natstest.Eventually(t, 60*time.Second, func() bool { return r.MatchString(logs.String()) }, "dev's output has no %s:\n%s", re, logs)
	return r.FindStringSubmatch(logs.String())
}

// devWithSkill runs dev (startDev) with one more skill, a skill.yaml of name in a
// directory of its own, and returns the dev's NATS URL and the file.
func devWithSkill(t *testing.T, name, yaml string) (url, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, name, "skill.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := startDev(t, "--skills", dir)
	return devLine(t, logs, `NATS\s+(nats://127\.0\.0\.1:\d+)`)[1], file
}

// A skill whose file turned invalid keeps serving its last good version; trigger
// --wait says so beside the routing, with what is wrong, from the decision (the
// registry marks the catalog's entry; the router puts it in the candidate's
// reason), so a publisher, who may not ask the registry, hears it too.
func TestTriggerWaitSaysTheSkillsFileIsInvalid(t *testing.T) {
	t.Parallel()
	good := "name: shout\ndescription: Says it louder.\nversion: 1.0.0\ninputs:\n  - name: text\n    type: string\nsteps:\n  - id: up\n    compute: |\n      result = inputs.text.upper()\n    output: loud\noutputs:\n  loud: \"{{ loud }}\"\n"
	url, file := devWithSkill(t, "shout", good)
	trigger := func() string {
		var out bytes.Buffer
		err := cli.Skillbus(context.Background(), []string{"trigger", "--nats-url", url, "--skill", "shout", "--data", `{"text":"hi"}`, "--wait", "--timeout", "30s"}, noEnv, &out, &out)
		if err != nil {
			t.Fatalf("trigger: %v\n%s", err, &out)
		}
		return out.String()
	}
	if out := trigger(); !strings.Contains(out, "HI") || strings.Contains(out, "invalid") {
		t.Fatalf("valid skill:\n%s", out)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(good, "steps:", "steps: [", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		var out bytes.Buffer
		_ = cli.Skillbus(context.Background(), []string{"skills", "list", "--nats-url", url}, noEnv, &out, &out)
		return regexp.MustCompile(`shout\s+\S+\s+workflow\s+\S+\s+invalid`).MatchString(out.String())
	}, "shout never became invalid")
	// The router sees the registry's mark a moment after skills list does.
	var out string
	natstest.Eventually(t, 30*time.Second, func() bool {
		out = trigger()
		return strings.Contains(out, "shout's files are invalid now, so its last good version runs: ")
	}, "trigger --wait never said shout's files are invalid:\n%s", out)
	if !strings.Contains(out, "HI") || !strings.Contains(out, "skill.yaml:") {
		t.Errorf("invalid skill:\n%s", out)
	}
}

// A trigger a debounced skill folds into its burst was taken, not refused:
// trigger --wait says so, and that its run comes later as its own activation,
// and exits 7, not 3 (no skill took it); the burst's run then completes.
func TestTriggerWaitOnADebouncedSkillSaysItRunsLater(t *testing.T) {
	t.Parallel()
	yaml := "name: settle\ndescription: Settles a burst of updates once they stop.\nversion: 1.0.0\ndebounce:\n  period: 1s\ninputs:\n  - name: n\n    type: integer\nsteps:\n  - id: last\n    compute: |\n      result = inputs.n\n    output: n\noutputs:\n  n: \"{{ n }}\"\n"
	url, _ := devWithSkill(t, "settle", yaml)
	var out bytes.Buffer
	err := cli.Skillbus(context.Background(), []string{"trigger", "--nats-url", url, "--skill", "settle", "--data", `{"n":7}`, "--wait", "--timeout", "30s"}, noEnv, &out, &out)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("err %v, want exit code 7\n%s", err, &out)
	}
	if s := out.String(); !strings.Contains(s, "⏸ debounced: settle: debounce 1s") || !strings.Contains(s, "as its own activation: 'skillbus runs list' shows it") || strings.Contains(s, "not routed") {
		t.Fatalf("output:\n%s", s)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		var list bytes.Buffer
		_ = cli.Skillbus(context.Background(), []string{"runs", "list", "--nats-url", url}, noEnv, &list, &list)
		return regexp.MustCompile(`settle\s.*completed`).MatchString(list.String())
	}, "the burst's run never completed")
}

// A run set aside for a slot of its skill's keyed concurrency is not silent:
// trigger --wait says it waits, and for which limit, before it starts. The first
// run holds the slot in an http call the test answers only once the second run
// has said it waits, so the second always finds the slot taken.
func TestTriggerWaitSaysARunWaitsForAConcurrencySlot(t *testing.T) {
	t.Parallel()
	called, release := make(chan struct{}, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	yaml := "name: one-at-a-time\ndescription: Syncs one account at a time.\nversion: 1.0.0\nconcurrency:\n  - key: data.k\n    limit: 1\npermissions:\n  network:\n    outbound: true\ninputs:\n  - name: k\n    type: string\nsteps:\n  - id: sync\n    tool: http\n    args:\n      url: " + srv.URL + "\n      timeout: 60\n"
	url, _ := devWithSkill(t, "one-at-a-time", yaml)
	outs := make([]natstest.Buffer, 2)
	errs := make(chan error, 2)
	trigger := func(i int) {
		errs <- cli.Skillbus(context.Background(), []string{"trigger", "--nats-url", url, "--skill", "one-at-a-time", "--source", "/t", "--id", fmt.Sprint("run-", i),
			"--data", `{"k":"acme"}`, "--wait", "--timeout", "60s"}, noEnv, &outs[i], &outs[i])
	}
	// runs show tells what a run that has not ended is doing, given the first
	// characters of its id, as runs list prints it: its job is what knows it.
	show := func(i int) string {
		var out bytes.Buffer
		if err := cli.Skillbus(context.Background(), []string{"runs", "show", "--nats-url", url, events.ExecutionID("/t", fmt.Sprint("run-", i), "one-at-a-time")[:12]}, noEnv, &out, &out); err != nil {
			t.Errorf("runs show: %v\n%s", err, &out)
		}
		return out.String()
	}
	go trigger(0)
	select { // the first run holds the slot
	case <-called:
	case err := <-errs:
		t.Fatalf("first trigger: %v\n%s", err, &outs[0])
	case <-time.After(60 * time.Second):
		t.Fatalf("the first run never called the server:\n%s", &outs[0])
	}
	go trigger(1)
	const waits = "⧗ one-at-a-time waits for a concurrency slot (1 at once per data.k); it holds no worker meanwhile"
	natstest.Eventually(t, 60*time.Second, func() bool { return strings.Contains(outs[1].String(), waits) },
		"the second run never said it waits:\n%s", &outs[1])
	if s := show(1); !strings.Contains(s, "waiting: for a concurrency slot of one-at-a-time (1 at once)") {
		t.Errorf("runs show of the waiting run:\n%s", s)
	}
	if s := show(0); !strings.Contains(s, "queued or running") {
		t.Errorf("runs show of the running run:\n%s", s)
	}
	free()
	for range outs {
		if err := <-errs; err != nil {
			t.Fatalf("trigger: %v\n%s\n%s", err, &outs[0], &outs[1])
		}
	}
	if strings.Contains(outs[0].String(), waits) {
		t.Errorf("the first run, which found the slot free, said it waited:\n%s", &outs[0])
	}
	if len(called) != 1 { // the second run's call, after the first's
		t.Errorf("%d more calls, want 1", len(called))
	}
}

// A run of a paused skill is held, not lost nor invisible: runs show says so and
// how to resume, and it runs once the skill is resumed.
func TestRunsShowSaysARunIsHeldByItsPausedSkill(t *testing.T) {
	t.Parallel()
	yaml := "name: shout\ndescription: Says it louder.\nversion: 1.0.0\ninputs:\n  - name: text\n    type: string\nsteps:\n  - id: up\n    compute: |\n      result = inputs.text.upper()\n    output: loud\noutputs:\n  loud: \"{{ loud }}\"\n"
	url, _ := devWithSkill(t, "shout", yaml)
	run := func(args ...string) string {
		var out bytes.Buffer
		if err := cli.Skillbus(context.Background(), append(args, "--nats-url", url), noEnv, &out, &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, &out)
		}
		return out.String()
	}
	run("runs", "pause", "--skill", "shout")
	// trigger --wait gives up with the execution's id, for runs show.
	id := events.ExecutionID("/t", "held-1", "shout")
	var out bytes.Buffer
	err := cli.Skillbus(context.Background(), []string{"trigger", "--skill", "shout", "--source", "/t", "--id", "held-1", "--data", `{"text":"hi"}`,
		"--wait", "--timeout", "3s", "--nats-url", url}, noEnv, &out, &out)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 4 || !strings.Contains(err.Error(), "execution "+id+" has not ended (see 'skillbus runs show "+id+"'") {
		t.Fatalf("trigger --wait on a paused skill: %v\n%s", err, &out)
	}
	var s string
	natstest.Eventually(t, 30*time.Second, func() bool {
		var out bytes.Buffer
		_ = cli.Skillbus(context.Background(), []string{"runs", "show", id[:12], "--nats-url", url}, noEnv, &out, &out)
		s = out.String()
		return strings.Contains(s, "held: shout is paused")
	}, "runs show never said the run is held:\n%s", &s)
	if !strings.Contains(s, "skillbus runs resume --skill shout") {
		t.Errorf("runs show of a held run:\n%s", s)
	}
	// runs list shows it too, and --status held picks it.
	if l := run("runs", "list", "--status", "held"); !strings.Contains(l, id) || !strings.Contains(l, "shout is paused") {
		t.Errorf("runs list --status held:\n%s", l)
	}
	run("runs", "resume", "--skill", "shout")
	natstest.Eventually(t, 30*time.Second, func() bool {
		var out bytes.Buffer
		_ = cli.Skillbus(context.Background(), []string{"runs", "show", id, "--nats-url", url}, noEnv, &out, &out)
		s = out.String()
		return strings.Contains(s, "completed by worker")
	}, "the held run never completed after resume:\n%s", &s)
}

// A throttled run says when it starts, not that its skill is paused.
func TestRunsShowSaysARunIsThrottled(t *testing.T) {
	t.Parallel()
	yaml := "name: slowly\ndescription: Syncs at most once a minute.\nversion: 1.0.0\nthrottle:\n  limit: 1\n  period: 60s\ninputs:\n  - name: n\n    type: integer\nsteps:\n  - id: echo\n    compute: |\n      result = inputs.n\n    output: n\noutputs:\n  n: \"{{ n }}\"\n"
	url, _ := devWithSkill(t, "slowly", yaml)
	for i := range 2 {
		var out bytes.Buffer
		if err := cli.Skillbus(context.Background(), []string{"trigger", "--skill", "slowly", "--source", "/t", "--id", fmt.Sprint("thr-", i), "--data", fmt.Sprintf(`{"n":%d}`, i), "--nats-url", url}, noEnv, &out, &out); err != nil {
			t.Fatalf("trigger: %v\n%s", err, &out)
		}
	}
	ids := []string{events.ExecutionID("/t", "thr-0", "slowly"), events.ExecutionID("/t", "thr-1", "slowly")}
	show := func(id string) string {
		var out bytes.Buffer
		_ = cli.Skillbus(context.Background(), []string{"runs", "show", id, "--nats-url", url}, noEnv, &out, &out)
		return out.String()
	}
	// One of the two runs first; the other waits its turn, about a minute.
	var s string
	natstest.Eventually(t, 30*time.Second, func() bool {
		a, b := show(ids[0]), show(ids[1])
		s = a + "\n----\n" + b
		return strings.Contains(a, "completed by worker") && strings.Contains(b, "throttled: it starts at ") ||
			strings.Contains(b, "completed by worker") && strings.Contains(a, "throttled: it starts at ")
	}, "runs show never said one run is throttled:\n%s", &s)
	if strings.Contains(s, "paused") {
		t.Errorf("a throttled run reads as paused:\n%s", s)
	}
	// The throttled run is cancelled by the first characters of its id, as runs
	// list and trigger print it: its job is all that knows it yet.
	throttled := ids[0]
	if strings.Contains(show(ids[0]), "completed by worker") {
		throttled = ids[1]
	}
	var out bytes.Buffer
	if err := cli.Skillbus(context.Background(), []string{"runs", "cancel", throttled[:12], "--reason", "not now", "--nats-url", url}, noEnv, &out, &out); err != nil || !strings.Contains(out.String(), throttled) {
		t.Fatalf("runs cancel %s: %v\n%s", throttled[:12], err, &out)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { s = show(throttled); return strings.Contains(s, "cancelled") },
		"the throttled run cancelled by its short id never read as cancelled:\n%s", &s)
	// The activation id a sender is given names its execution.
	act := events.ActivationID("/t", "thr-0")
	out.Reset()
	err := cli.Skillbus(context.Background(), []string{"runs", "show", act, "--nats-url", url}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), act+" is an activation") || !strings.Contains(err.Error(), "its executions: "+ids[0]+" (slowly). skillbus runs show "+ids[0]) {
		t.Errorf("runs show of an activation id: %v\n%s", err, &out)
	}
}
