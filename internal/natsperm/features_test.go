package natsperm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

// The skills of TestFeaturesUnderTheShippedUsers, one per feature, each with the
// shortest durations the feature takes.
var featureSkills = map[string]string{
	// A sleep step: the worker parks the run, a scheduled message wakes it.
	"nap": `name: nap
description: Sleeps a second between two steps.
version: 1.0.0
steps:
  - id: rest
    sleep: 1s
  - id: after
    tool: echo
    args:
      said: rested
outputs:
  said: "{{ after.said }}"
`,
	// wait_for_event: the router matches the event and resumes the run.
	"await": `name: await
description: Waits for its order's payment.
version: 1.0.0
inputs:
  - name: order
    type: number
steps:
  - id: paid
    wait_for_event:
      type: com.example.invoice.paid
      match: event.data.order == inputs.order
      timeout: 1m
  - id: thank
    tool: echo
    args:
      said: "paid {{ paid.amount }}"
outputs:
  said: "{{ thank.said }}"
`,
	// wait_for_event's timeout: the scheduled message ends the wait.
	"patience": `name: patience
description: Waits a second for an event that never comes.
version: 1.0.0
steps:
  - id: never
    wait_for_event:
      type: com.example.never
      timeout: 1s
    on_error: continue
  - id: after
    tool: echo
    args:
      said: gave up
outputs:
  said: "{{ after.said }}"
`,
	// A confirmation nobody answers: its timeout denies it.
	"hasty": `name: hasty
description: Asks for a confirmation that times out.
version: 1.0.0
steps:
  - id: act
    tool: echo
    args:
      done: "yes"
confirmations:
  - step: act
    message: "Act now?"
    timeout: 1
`,
	// Its three triggers, sent one after another by three CLI processes, must
	// come within the period of each other on a loaded machine.
	"settle": `name: settle
description: One run per burst of triggers.
version: 1.0.0
debounce:
  period: 4s
inputs:
  - name: n
    type: number
steps:
  - id: say
    tool: echo
    args:
      n: "{{ inputs.n }}"
outputs:
  n: "{{ say.n }}"
`,
	"gather": `name: gather
description: Runs its triggers two at a time, or four seconds after the first.
version: 1.0.0
batch:
  key: data.k
  max_size: 2
  timeout: 4s
inputs:
  - name: events
    type: array
steps:
  - id: count
    compute: |
      result = len(inputs.events)
outputs:
  count: "{{ count }}"
`,
	// A debounced and a batched skill whose runs come due eight seconds after
	// their trigger: long enough for two runs cancel --skill, given at once, to
	// be recorded before they do, however slow the machine.
	"settle-later": `name: settle-later
description: One run per burst of triggers, eight seconds after the last.
version: 1.0.0
debounce:
  period: 8s
steps:
  - id: say
    tool: echo
    args:
      said: settled
`,
	"gather-later": `name: gather-later
description: Runs its triggers as a batch eight seconds after the first.
version: 1.0.0
batch:
  max_size: 100
  timeout: 8s
inputs:
  - name: events
    type: array
steps:
  - id: count
    compute: |
      result = len(inputs.events)
outputs:
  count: "{{ count }}"
`,
	// Runs beyond the rate wait longer than the worker's ack wait (2s): they are
	// set aside as scheduled messages, which the worker-throttle durable takes.
	// A period of 6s keeps the second run's wait past 2s even if the two
	// triggers land a few seconds apart on a loaded machine.
	"paced": `name: paced
description: Starts a run every 6 seconds at most.
version: 1.0.0
throttle:
  limit: 1
  period: 6s
steps:
  - id: say
    tool: echo
    args:
      said: paced
outputs:
  said: "{{ say.said }}"
`,
	"per-key": `name: per-key
description: One run of a key at once.
version: 1.0.0
concurrency:
  - key: data.k
    limit: 1
inputs:
  - name: k
    type: string
steps:
  - id: hold
    tool: gate
    args:
      k: "{{ inputs.k }}"
outputs:
  k: "{{ hold.k }}"
`,
	"solo": `name: solo
description: One run at once (max_concurrent).
version: 1.0.0
concurrency:
  - limit: 1
steps:
  - id: hold
    tool: gate
    args:
      k: solo
outputs:
  k: "{{ hold.k }}"
`,
	"picky": `name: picky
description: Runs only for large numbers.
version: 1.0.0
filter: data.n > 1
inputs:
  - name: n
    type: number
steps:
  - id: say
    tool: echo
    args:
      n: "{{ inputs.n }}"
`,
	"scarce": `name: scarce
description: Runs once a day at most.
version: 1.0.0
triggers: [com.example.scarce]
rate_limit: {limit: 1, period: 24h}
steps:
  - id: say
    tool: echo
    args:
      said: scarce
`,
	// Invalid files: the registry does not publish it, and a router asks the
	// registry why a trigger names a skill the catalog lacks.
	"broken": `name: broken
description: Reads an input it does not declare.
version: 1.0.0
steps:
  - id: say
    tool: echo
    args:
      n: "{{ inputs.n }}"
`,
	"ramped": rampedSkill("one"),
	"urgent": `name: urgent
description: Overtakes queued runs (a lane of its pool).
version: 1.0.0
queue_priority: 300
steps:
  - id: say
    tool: echo
    args:
      said: urgent
outputs:
  said: "{{ say.said }}"
`,
}

// rampedSkill is a skill whose versions say which they are.
func rampedSkill(said string) string {
	return `name: ramped
description: Says which version runs.
version: 1.0.0
steps:
  - id: say
    tool: echo
    args:
      said: ` + said + `
outputs:
  said: "{{ say.said }}"
`
}

// running is a CLI command running in the background, its output readable as it
// is written.
type running struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	code int
	done chan struct{}
}

func (r *running) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *running) out() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// start runs `skillbus args...` as role in the background.
func (f *fleet) start(role string, args ...string) *running {
	r := &running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		err := cli.Skillbus(f.ctx, args, f.env(role), r, r)
		r.mu.Lock()
		r.code = cli.ExitCode(err)
		r.mu.Unlock()
	}()
	return r
}

// wait waits for the command to end and returns its output and exit code.
func (r *running) wait(t *testing.T, what string) (string, int) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not end:\n%s", what, r.out())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String(), r.code
}

// printed waits until the command has printed s.
func (r *running) printed(t *testing.T, f *fleet, s, what string) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(r.out(), s) }, "%s: no %q in:\n%s\nviolations: %v", what, s, stringer(r.out), f.v.lines)
}

type runRow struct {
	ID     string `json:"execution_id"`
	Skill  string `json:"skill"`
	Status string `json:"status"`
}

// runs returns the rows of `runs list --json` of a skill.
func (f *fleet) runs(skill string) []runRow {
	out, err := f.cli("operator", "runs", "list", "--json", "--limit", "1000")
	if err != nil {
		return nil
	}
	var rows, of []runRow
	_ = json.Unmarshal([]byte(out), &rows)
	for _, r := range rows {
		if r.Skill == skill {
			of = append(of, r)
		}
	}
	return of
}

// TestFeaturesUnderTheShippedUsers runs each feature of skills and of the CLI
// that TestRolesRunTheWholeSystem does not, with the generated users: sleeps,
// waits for events and their timeouts, confirmation timeouts, debounce, batch,
// throttle, concurrency keys and max_concurrent, filters, rate limits,
// queue_priority, runs cancel/pause/resume, delayed triggers coming due, a
// trigger of a skill whose files are invalid and its replay from the DLQ, and
// version ramps. Each must do what it says, and the server must refuse nothing.
func TestFeaturesUnderTheShippedUsers(t *testing.T) {
	url, v := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := &fleet{t: t, ctx: ctx, url: url, v: v, ledger: &ledger{}, skills: t.TempDir()}
	copySkill(t, f.skills, "hello")
	for name, text := range featureSkills {
		writeSkill(t, f.skills, name, "skill.yaml", text)
	}
	f.service(cli.Registry, "registry", "--skills", f.skills)
	opJS, err := jetstream.New(f.conn("operator"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		kv, err := opJS.KeyValue(ctx, "skills")
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, "urgent")
		return err == nil
	}, "the registry did not publish the catalog")
	f.clean("registry", "create streams and buckets; publish the catalog")

	// gate holds each call until the test opens it.
	entered := make(chan string, 8)
	open := make(chan struct{})
	gate := tool.Func("gate", func(ctx context.Context, c tool.Call) (any, error) {
		k, _ := c.Args["k"].(string)
		entered <- k
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"k": k}, nil
	})
	srv, err := bustool.Serve(f.conn("tool"), bustool.ServerConfig{Name: "gatekeeper"}, bustool.Def{Tool: gate, Description: "holds calls"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	f.service(cli.Router, "router", "--ensure=false")
	f.service(cli.Worker, "worker", "--ensure=false", "--name", "w-features", "--bus-tools-interval", "100ms", "--backoff-base", "10ms", "--concurrency", "8", "--ack-wait", "2s")
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := f.cli("operator", "trigger", "--skill", "hello", "--wait", "--timeout", "5s")
		return err == nil
	}, "the fleet does not run hello (violations %v)", v.lines)
	f.clean("router", "start")
	f.clean("worker", "start")

	step := func(what string, fn func()) {
		t.Helper()
		start := time.Now()
		fn()
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	}

	// The features that wait on timers of a second or more run side by side:
	// a violation names its user and subject whichever feature made it.
	step("sleep, wait_for_event, confirmation timeout, debounce, batch, throttle, delayed trigger", func() {
		hellos := len(f.runs("hello"))
		nap := f.start("publisher", "trigger", "--skill", "nap", "--wait", "--timeout", "30s")
		patience := f.start("publisher", "trigger", "--skill", "patience", "--wait", "--timeout", "30s")
		hasty := f.start("publisher", "trigger", "--skill", "hasty", "--wait", "--timeout", "30s")
		paced := []*running{
			f.start("publisher", "trigger", "--skill", "paced", "--wait", "--timeout", "30s"),
			f.start("publisher", "trigger", "--skill", "paced", "--wait", "--timeout", "30s"),
		}
		f.must("publisher", "trigger --in 1s", "trigger", "--skill", "hello", "--id", "later-1", "--in", "1s")
		for i := 1; i <= 3; i++ {
			out, err := f.cli("publisher", "trigger", "--skill", "settle", "--data", fmt.Sprintf(`{"n":%d}`, i), "--wait", "--timeout", "30s")
			if cli.ExitCode(err) != 7 || !strings.Contains(out, "⏸ debounced") {
				t.Fatalf("settle %d: exit %d, want 7:\n%s\nviolations: %v", i, cli.ExitCode(err), out, v.take())
			}
		}
		f.clean("publisher", "trigger --wait a debounced skill")
		for _, k := range []string{"full", "full", "late"} {
			out, err := f.cli("publisher", "trigger", "--skill", "gather", "--data", `{"k":"`+k+`"}`, "--wait", "--timeout", "30s")
			if cli.ExitCode(err) != 7 || !strings.Contains(out, "⏸ batched") {
				t.Fatalf("gather %s: exit %d, want 7:\n%s\nviolations: %v", k, cli.ExitCode(err), out, v.take())
			}
		}
		f.clean("publisher", "trigger --wait a batched skill")

		r := f.start("publisher", "trigger", "--skill", "await", "--data", `{"order":7}`, "--wait", "--timeout", "30s")
		r.printed(t, f, "waits for event com.example.invoice.paid", "await")
		// A router that learns of the wait just after it routed the event ends
		// the wait by its look back at the triggers stored since the wait began,
		// and the event's sender heard "not routed" (exit 3).
		out, err := f.cli("publisher", "trigger", "com.example.invoice.paid", "--data", `{"order":7,"amount":12}`, "--wait", "--timeout", "30s")
		if code := cli.ExitCode(err); !(code == 0 && strings.Contains(out, "ended the wait of 1 run")) && !(code == 3 && strings.Contains(out, "no_skill")) {
			t.Fatalf("invoice.paid: exit %d:\n%s\nviolations: %v", code, out, v.take())
		}
		f.clean("publisher", "trigger the awaited event")
		out, code := r.wait(t, "await")
		if code != 0 || !strings.Contains(out, "paid 12") {
			t.Fatalf("await: exit %d:\n%s", code, out)
		}
		f.clean("router", "end a wait_for_event on a matching event, resume the run")
		f.clean("worker", "park a run waiting for an event")

		out, code = nap.wait(t, "nap")
		for _, s := range []string{"⏸ step rest sleeps until", "▶ step rest woke up", "rested"} {
			if code != 0 || !strings.Contains(out, s) {
				t.Fatalf("nap: exit %d, no %q in:\n%s\nviolations: %v", code, s, out, v.take())
			}
		}
		f.clean("worker", "park a sleeping run (checkpoint, scheduled wake-up)")
		f.clean("router", "wake a sleeping run")

		out, code = patience.wait(t, "patience")
		if code != 0 || !strings.Contains(out, "▶ step never timed out") || !strings.Contains(out, "gave up") {
			t.Fatalf("patience: exit %d:\n%s\nviolations: %v", code, out, v.take())
		}
		f.clean("router", "end a wait_for_event at its timeout")

		out, _ = hasty.wait(t, "hasty")
		if !strings.Contains(out, "waiting for confirmation of step act") || !strings.Contains(out, "denied") {
			t.Fatalf("hasty:\n%s\nviolations: %v", out, v.take())
		}
		f.clean("worker", "schedule a confirmation's timeout")
		f.clean("router", "deny a confirmation at its timeout")

		for _, r := range paced {
			if out, code := r.wait(t, "paced"); code != 0 || !strings.Contains(out, "paced") {
				t.Fatalf("paced: exit %d:\n%s\nviolations: %v", code, out, v.take())
			}
		}
		if !strings.Contains(paced[0].out()+paced[1].out(), "waits for its throttle") {
			t.Fatalf("no run of paced waited for its throttle:\n%s\n%s", paced[0].out(), paced[1].out())
		}
		f.clean("worker", "set aside a throttled run (scheduled message, durable worker-throttle), run it at its time")
		f.clean("publisher", "trigger --wait: execution.waiting (throttle)")

		natstest.Eventually(t, 20*time.Second, func() bool {
			runs := f.runs("settle")
			return len(runs) == 1 && runs[0].Status == "completed"
		}, "no debounced run (violations %v)", v.lines)
		f.clean("router", "fold a burst (scheduled message in EVENTS), start its run")
		natstest.Eventually(t, 20*time.Second, func() bool {
			runs := f.runs("gather")
			return len(runs) == 2 && runs[0].Status == "completed" && runs[1].Status == "completed"
		}, "the batches did not run: %v (violations %v)", stringer(func() string { return fmt.Sprint(f.runs("gather")) }), v.lines)
		f.clean("router", "gather a batch (a log in EVENTS), run it when full and at its timeout")
		natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs("hello")) == hellos+1 }, "the delayed trigger did not run (violations %v)", v.lines)
		f.clean("router", "publish a delayed trigger when due, delete it from KV delayed")
	})

	step("concurrency", func() {
		a := f.start("publisher", "trigger", "--skill", "per-key", "--data", `{"k":"x"}`, "--wait", "--timeout", "30s")
		s1 := f.start("publisher", "trigger", "--skill", "solo", "--wait", "--timeout", "30s")
		for range 2 {
			select {
			case <-entered:
			case <-time.After(30 * time.Second):
				t.Fatalf("the gate was not called:\n%s\n%s\nviolations: %v", a.out(), s1.out(), v.take())
			}
		}
		b := f.start("publisher", "trigger", "--skill", "per-key", "--data", `{"k":"x"}`, "--wait", "--timeout", "30s")
		s2 := f.start("publisher", "trigger", "--skill", "solo", "--wait", "--timeout", "30s")
		b.printed(t, f, "⧗ per-key waits for a concurrency slot", "per-key")
		s2.printed(t, f, "⧗ solo waits for a concurrency slot", "solo")
		close(open)
		for _, r := range []*running{a, b, s1, s2} {
			if out, code := r.wait(t, "a run of a concurrency limit"); code != 0 {
				t.Fatalf("exit %d:\n%s\nviolations: %v", code, out, v.take())
			}
		}
		f.clean("worker", "hold runs for a concurrency slot, release them")
		f.clean("router", "tell a max_concurrent run it waits (its pool's consumer info)")
		f.clean("publisher", "trigger --wait: execution.waiting (concurrency)")
	})

	step("filter, rate_limit, queue_priority", func() {
		out, err := f.cli("publisher", "trigger", "--skill", "picky", "--data", `{"n":0}`, "--wait", "--timeout", "30s")
		if cli.ExitCode(err) != 3 || !strings.Contains(out, "filtered") {
			t.Fatalf("picky n=0: exit %d, want 3:\n%s", cli.ExitCode(err), out)
		}
		f.must("publisher", "trigger a filtered skill", "trigger", "--skill", "picky", "--data", `{"n":2}`, "--wait", "--timeout", "30s")
		f.must("publisher", "trigger a rate-limited skill", "trigger", "--skill", "scarce", "--wait", "--timeout", "30s")
		out, err = f.cli("publisher", "trigger", "--skill", "scarce", "--wait", "--timeout", "30s")
		if cli.ExitCode(err) != 3 || !strings.Contains(out, "rate_limited") {
			t.Fatalf("scarce again: exit %d, want 3:\n%s", cli.ExitCode(err), out)
		}
		// The live router's explanation reads the window without counting.
		out, err = f.cli("operator", "route", "--explain", "--type", "com.example.scarce")
		if cli.ExitCode(err) != 3 || !strings.Contains(out, "rate limited") {
			t.Fatalf("route --explain of a full window: exit %d, want 3:\n%s\nviolations: %v", cli.ExitCode(err), out, v.take())
		}
		f.clean("operator", "route --explain against the live router")
		out = f.must("publisher", "trigger a skill with queue_priority", "trigger", "--skill", "urgent", "--wait", "--timeout", "30s")
		if !strings.Contains(out, "urgent") {
			t.Fatalf("urgent:\n%s", out)
		}
		f.clean("router", "filter, count a rate limit, route to a lane")
		f.clean("worker", "serve a pool's lanes (queue_priority)")
	})

	step("runs cancel, pause, resume", func() {
		r := f.start("publisher", "trigger", "--skill", "await", "--data", `{"order":8}`, "--wait", "--timeout", "30s")
		r.printed(t, f, "waits for event com.example.invoice.paid", "await")
		var exec string
		natstest.Eventually(t, 10*time.Second, func() bool {
			for _, row := range f.runs("await") {
				if row.Status == "waiting" {
					exec = row.ID
					return true
				}
			}
			return false
		}, "the waiting run is not listed")
		f.must("operator", "runs cancel a waiting run", "runs", "cancel", exec, "--reason", "test")
		if out, code := r.wait(t, "cancelled await"); code != 6 {
			t.Fatalf("await cancelled: exit %d, want 6:\n%s", code, out)
		}
		f.clean("router", "purge a cancelled run's scheduled timeout")
		f.clean("worker", "end a cancelled run")

		// By skill: it reads the JOBS stream for the skill's jobs (all ended here).
		f.must("operator", "runs cancel --skill", "runs", "cancel", "--skill", "per-key", "--since", "1h", "--reason", "test")

		f.must("operator", "runs pause", "runs", "pause", "--skill", "hello", "--reason", "test")
		var held *running
		natstest.Eventually(t, 20*time.Second, func() bool {
			// The workers see the hold a moment later: until then a run runs.
			r := f.start("publisher", "trigger", "--skill", "hello", "--wait", "--timeout", "30s")
			natstest.Eventually(t, 20*time.Second, func() bool {
				o := r.out()
				return strings.Contains(o, "is paused") || strings.Contains(o, "completed")
			}, "hello neither ran nor was held")
			if strings.Contains(r.out(), "is paused") {
				held = r
				return true
			}
			_, _ = r.wait(t, "hello")
			return false
		}, "no run of hello was held")
		f.clean("worker", "hold a paused skill's run")
		f.must("operator", "runs resume", "runs", "resume", "--skill", "hello")
		if out, code := held.wait(t, "held hello"); code != 0 || !strings.Contains(out, "Hello") {
			t.Fatalf("held hello: exit %d:\n%s", code, out)
		}
		f.clean("worker", "run a resumed skill's held run")
	})

	step("cancel what is pending: a delayed trigger, a debounced burst, a batch", func() {
		out := f.must("publisher", "trigger --in 1h", "trigger", "--skill", "hello", "--id", "later-2", "--in", "1h", "--json")
		var stored struct {
			ActivationID string `json:"activation_id"`
		}
		if err := json.Unmarshal([]byte(out), &stored); err != nil || stored.ActivationID == "" {
			t.Fatalf("trigger --in --json: %v\n%s", err, out)
		}
		if out := f.must("operator", "runs delayed", "runs", "delayed", "--json"); !strings.Contains(out, stored.ActivationID) {
			t.Fatalf("runs delayed does not list %s:\n%s", stored.ActivationID, out)
		}
		f.must("operator", "runs cancel a delayed trigger", "runs", "cancel", stored.ActivationID, "--reason", "test")
		if out := f.must("operator", "runs delayed", "runs", "delayed", "--json"); strings.Contains(out, stored.ActivationID) {
			t.Fatalf("runs delayed still lists the cancelled %s:\n%s", stored.ActivationID, out)
		}

		for _, skill := range []string{"settle-later", "gather-later"} {
			if out, err := f.cli("publisher", "trigger", "--skill", skill, "--wait", "--timeout", "30s"); cli.ExitCode(err) != 7 {
				t.Fatalf("%s: exit %d, want 7:\n%s", skill, cli.ExitCode(err), out)
			}
		}
		f.must("operator", "runs cancel --skill: a pending burst", "runs", "cancel", "--skill", "settle-later", "--since", "1h", "--reason", "test")
		f.must("operator", "runs cancel --skill: a pending batch", "runs", "cancel", "--skill", "gather-later", "--since", "1h", "--reason", "test")
		cancelled := func(skill string) bool {
			runs := f.runs(skill)
			return len(runs) == 1 && runs[0].Status == "cancelled"
		}
		natstest.Eventually(t, 20*time.Second, func() bool { return cancelled("settle-later") && cancelled("gather-later") },
			"the pending burst and batch were not cancelled: settle-later %v, gather-later %v (violations %v)",
			stringer(func() string { return fmt.Sprint(f.runs("settle-later")) }), stringer(func() string { return fmt.Sprint(f.runs("gather-later")) }), v.lines)
		f.clean("router", "cancel a pending burst's and batch's runs when due (KV runs skill.<name>.cancelled)")
	})

	step("dlq replay of a rejected trigger", func() {
		out, err := f.cli("publisher", "trigger", "--skill", "broken", "--wait", "--timeout", "30s")
		if cli.ExitCode(err) != 3 || !strings.Contains(out, "invalid_skill") || !strings.Contains(out, "unknown input n") {
			t.Fatalf("a trigger of an invalid skill: exit %d, want 3 and invalid_skill with the files' errors:\n%s\nviolations: %v", cli.ExitCode(err), out, v.take())
		}
		f.clean("router", "reject a trigger of an invalid skill with its errors (the registry's list)")
		var dead []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		natstest.Eventually(t, 10*time.Second, func() bool {
			out, err := f.cli("operator", "dlq", "list", "--json", "--skill", "_trigger")
			dead = nil
			return err == nil && json.Unmarshal([]byte(out), &dead) == nil && len(dead) == 1
		}, "no rejected trigger in the DLQ (violations %v)", v.lines)
		f.clean("router", "dead-letter a rejected trigger")
		f.must("operator", "dlq replay a rejected trigger", "dlq", "replay", dead[0].ID, "--by", "test")
		natstest.Eventually(t, 10*time.Second, func() bool {
			out, err := f.cli("operator", "dlq", "list", "--json", "--skill", "_trigger")
			dead = nil
			return err == nil && json.Unmarshal([]byte(out), &dead) == nil && len(dead) == 2
		}, "the replayed trigger was not routed (and rejected again) (violations %v)", v.lines)
		f.clean("router", "route a replayed trigger")
	})

	step("skills ramp, rollback", func() {
		writeSkill(t, f.skills, "ramped", "skill.yaml", rampedSkill("two"))
		var shown struct {
			Versions []struct {
				Digest  string
				Current bool
			}
		}
		var lastOut string
		var lastErr error
		natstest.Eventually(t, 30*time.Second, func() bool {
			lastOut, lastErr = f.cli("operator", "skills", "show", "ramped", "--json")
			return lastErr == nil && json.Unmarshal([]byte(lastOut), &shown) == nil && len(shown.Versions) == 2 && !shown.Versions[1].Current
		}, "the registry did not keep two versions of ramped: %+v (skills show: %v\n%s)\nviolations: %v", stringer(func() string { return fmt.Sprintf("%+v", shown) }),
			stringer(func() string { return fmt.Sprint(lastErr) }), stringer(func() string { return lastOut }), v.lines)
		old := shown.Versions[1].Digest
		if out := f.must("operator", "skills search", "skills", "search", "which version"); !strings.Contains(out, "ramped") {
			t.Fatalf("skills search:\n%s", out)
		}
		f.must("operator", "skills ramp", "skills", "ramp", "ramped", old, "100")
		natstest.Eventually(t, 20*time.Second, func() bool {
			out, err := f.cli("publisher", "trigger", "--skill", "ramped", "--wait", "--timeout", "30s")
			return err == nil && strings.Contains(out, `"one"`)
		}, "the ramped version does not run (violations %v)", v.lines)
		f.clean("router", "route to a ramped version")
		f.clean("worker", "run a ramped version")
		f.must("operator", "skills rollback", "skills", "rollback", "ramped")
		natstest.Eventually(t, 20*time.Second, func() bool {
			out, err := f.cli("publisher", "trigger", "--skill", "ramped", "--wait", "--timeout", "30s")
			return err == nil && strings.Contains(out, `"two"`)
		}, "the current version does not run after the rollback (violations %v)", v.lines)
	})

	step("console", func() {
		logged := f.service(func(ctx context.Context, args []string, env cli.Env, o, e io.Writer) error {
			return cli.Skillbus(ctx, append([]string{"console"}, args...), env, o, e)
		}, "operator", "--listen", "127.0.0.1:0")
		addr := regexp.MustCompile(`web console on (http://127\.0\.0\.1:\d+)`)
		natstest.Eventually(t, 20*time.Second, func() bool { return addr.MatchString(logged()) }, "the console did not start: %s", stringer(logged))
		base := addr.FindStringSubmatch(logged())[1]
		runs := f.runs("nap")
		if len(runs) == 0 {
			t.Fatal("no run of nap")
		}
		for _, page := range []string{"/", "/skills", "/waiting", "/dlq", "/repairs", "/runs/" + runs[0].ID} {
			resp, err := http.Get(base + page)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("console %s: %d %s\nviolations: %v", page, resp.StatusCode, body, v.take())
			}
		}
		f.clean("operator", "the console's pages")
	})
}
