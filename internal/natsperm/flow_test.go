package natsperm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/events/registryapi"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natsperm"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

// violations collects the server's permission-violation log lines.
type violations struct {
	mu    sync.Mutex
	lines []string
	next  chan struct{} // closed when the next line is logged
}

func (v *violations) log(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.Contains(line, "Violation") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		if v.next != nil {
			close(v.next)
			v.next = nil
		}
		v.mu.Unlock()
	}
}

// logged is closed when the next violation is logged.
func (v *violations) logged() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.next == nil {
		v.next = make(chan struct{})
	}
	return v.next
}
func (v *violations) Noticef(string, ...any)            {}
func (v *violations) Debugf(string, ...any)             {}
func (v *violations) Tracef(string, ...any)             {}
func (v *violations) Warnf(format string, args ...any)  { v.log(format, args...) }
func (v *violations) Errorf(format string, args ...any) { v.log(format, args...) }
func (v *violations) Fatalf(format string, args ...any) { v.log(format, args...) }

// take returns the lines logged so far and forgets them.
func (v *violations) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	l := v.lines
	v.lines = nil
	return l
}

func (v *violations) has(user, subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, l := range v.lines {
		if strings.Contains(l, "user:"+user+`"`) && strings.Contains(l, subject) {
			return true
		}
	}
	return false
}

func password(role string) string { return "pw-" + role }

// startServer starts nats-server from a configuration that includes the generated
// deploy/base/nats-accounts.conf as shipped.
func startServer(t *testing.T) (string, *violations) {
	t.Helper()
	dir := t.TempDir()
	accounts, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "base", "nats-accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), accounts, 0o644); err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "listen: \"127.0.0.1:-1\"\nmax_payload: 8MB\njetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	for _, r := range natsperm.Roles("skillbus") {
		t.Setenv(r.PasswordVar(), password(r.Name)) // nats-server reads them from the environment, as in a pod
	}
	conf.WriteString("include \"accounts.conf\"\n")
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the generated nats-accounts.conf does not load: %v", err)
	}
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	v := &violations{}
	s.SetLoggerV2(v, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL(), v
}

// ledger is the (role, action, allowed/denied) list the test proves.
type ledger struct {
	mu   sync.Mutex
	rows []string
}

func (l *ledger) add(role, action string, allowed bool) {
	verdict := "denied"
	if allowed {
		verdict = "allowed"
	}
	l.mu.Lock()
	l.rows = append(l.rows, fmt.Sprintf("%-9s  %-8s  %s", role, verdict, action))
	l.mu.Unlock()
}

type fleet struct {
	t      *testing.T
	ctx    context.Context
	url    string
	v      *violations
	ledger *ledger
	skills string
}

func (f *fleet) env(role string) cli.Env {
	m := map[string]string{"SKILLBUS_NATS_URL": f.url, "SKILLBUS_NATS_USER": role, "SKILLBUS_NATS_PASSWORD": password(role)}
	return func(k string) string { return m[k] }
}

func (f *fleet) conn(role string) *nats.Conn {
	f.t.Helper()
	nc, err := nats.Connect(f.url, nats.UserInfo(role, password(role)), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	return nc
}

// cli runs `skillbus args...` as role and returns its output.
func (f *fleet) cli(role string, args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Skillbus(f.ctx, args, f.env(role), &out, &out)
	return out.String(), err
}

// must runs a CLI command that must succeed with no permission refused.
func (f *fleet) must(role, action string, args ...string) string {
	f.t.Helper()
	out, err := f.cli(role, args...)
	if err != nil {
		f.t.Fatalf("%s: skillbus %s: %v\n%s\nviolations: %v", role, strings.Join(args, " "), err, out, f.v.take())
	}
	f.clean(role, action)
	return out
}

// clean records an allowed action, failing if the server refused anything so far.
func (f *fleet) clean(role, action string) {
	f.t.Helper()
	if v := f.v.take(); len(v) > 0 {
		f.t.Fatalf("%s: %s: the server refused:\n%s", role, action, strings.Join(v, "\n"))
	}
	f.ledger.add(role, action, true)
}

// denied records an action that must have been refused with a violation on subject.
func (f *fleet) denied(role, action, subject string, err error) {
	f.t.Helper()
	if err == nil {
		f.t.Errorf("%s: %s: succeeded, want a permission error", role, action)
	}
	natstest.Eventually(f.t, 5*time.Second, func() bool { return f.v.has(role, subject) }, "%s: %s: no violation logged for %s", role, action, subject)
	f.v.take()
	f.ledger.add(role, action, false)
}

// service runs a service main (registry, router, worker) until the test ends.
func (f *fleet) service(main func(context.Context, []string, cli.Env, io.Writer, io.Writer) error, role string, args ...string) (logged func() string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	go func() {
		done <- main(ctx, append(args, "--log-format", "text", "--log-level", "info"), f.env(role), w, w)
	}()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("%s: %v", role, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if logs.Len() > 0 && f.t.Failed() {
			f.t.Logf("%s log:\n%s", role, logs.String())
		}
	})
	return func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

const approveSkill = `name: approve
description: Acts only after a person approves.
version: 1.0.0
steps:
  - id: act
    tool: echo
    args:
      done: "yes"
outputs:
  done: "{{ act.done }}"
confirmations:
  - step: act
    message: "Act now?"
    timeout: 300
`

const loudSkill = `name: loud
description: Shouts through a tool served on the bus by another process.
version: 1.0.0
rate_limit: {limit: 1000, period: 1m} # the router counts its triggers in KV ratelimits
inputs:
  - name: text
    type: string
    default: hi
steps:
  - id: shout
    tool: shout
    args:
      text: "{{ inputs.text }}"
outputs:
  said: "{{ shout.said }}"
`

const doomedSkill = `name: doomed
description: Always fails, so its job ends in the dead-letter queue.
version: 1.0.0
max_retries: 0
steps:
  - id: fail
    tool: exec
    args:
      command: ["sh", "-c", "echo doomed >&2; exit 1"]
`

// renamedSkill reads "titel" where the value has "title": a repairable fault.
const renamedSkill = `name: renamed
description: Posts a title under a misspelt key, for the repair service to fix.
version: 1.0.0
inputs:
  - name: name
    type: string
steps:
  - id: fetch
    compute: |
      result = {"title": "T " + inputs.name}
  - id: post
    tool: echo
    args:
      text: "{{ fetch.titel }}"
outputs:
  posted: "{{ post.text }}"
`

// remindSkill runs until an order.paid event of its order cancels it; it
// calls the bus tool shout with "remind" once it runs.
const remindSkill = `name: remind
description: Reminds a customer of an unpaid order until it is paid.
version: 1.0.0
cancel_on:
  - type: com.example.order.paid
    match: event.data.order == trigger.data.order
    timeout: 1h
steps:
  - id: started
    tool: shout
    args:
      text: remind
  - id: wait
    tool: exec
    args:
      command: ["sleep", "120"]
`

// delegateSkill invokes hello through the skill tool: the worker publishes the
// child call from skillbus's own source, on the subject only its roles may.
const delegateSkill = `name: delegate
description: Invokes hello through the skill tool.
version: 1.0.0
inputs:
  - name: who
    type: string
    required: true
steps:
  - id: ask
    tool: skill
    args:
      name: hello
      inputs:
        name: "{{ inputs.who }}"
outputs:
  relayed: "{{ ask.greeting }}"
`

// tickSkill runs every second: the router's scheduler publishes each tick from
// skillbus's own source.
const tickSkill = `name: tick
description: Shouts every second.
version: 1.0.0
schedule: "@every 1s"
steps:
  - id: say
    tool: shout
    args:
      text: tick
`

const lateSkill = `name: late
description: Added while everything runs, to prove the catalog reloads.
version: 1.0.0
steps:
  - id: say
    tool: echo
    args:
      said: "late"
outputs:
  said: "{{ say.said }}"
`

func writeSkill(t *testing.T, dir, name, file, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, file), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copySkill(t *testing.T, dir, name string) {
	t.Helper()
	src := filepath.Join(repoRoot(), "testdata", "skills", name)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeSkill(t, dir, name, e.Name(), string(b))
	}
}

// TestRolesRunTheWholeSystem starts a server with the generated users and runs the
// registry, a router, a worker and a tool service each as its own user, then every
// user-facing command as a publisher or an operator. Nothing may be refused; then
// each role tries what it must not do, and must be refused.
func TestRolesRunTheWholeSystem(t *testing.T) {
	url, v := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := &fleet{t: t, ctx: ctx, url: url, v: v, ledger: &ledger{}, skills: t.TempDir()}
	defer func() {
		sort.Strings(f.ledger.rows)
		t.Logf("(role, verdict, action), %d pairs:\n%s", len(f.ledger.rows), strings.Join(f.ledger.rows, "\n"))
	}()
	for _, s := range []string{"hello", "reserve-stock", "queue-backorder"} {
		copySkill(t, f.skills, s)
	}
	writeSkill(t, f.skills, "approve", "skill.yaml", approveSkill)
	writeSkill(t, f.skills, "loud", "skill.yaml", loudSkill)
	writeSkill(t, f.skills, "doomed", "skill.yaml", doomedSkill)
	writeSkill(t, f.skills, "renamed", "skill.yaml", renamedSkill)
	writeSkill(t, f.skills, "remind", "skill.yaml", remindSkill)
	writeSkill(t, f.skills, "delegate", "skill.yaml", delegateSkill)
	writeSkill(t, f.skills, "tick", "skill.yaml", tickSkill)

	// The registry creates the streams and buckets and publishes the catalog.
	f.service(cli.Registry, "registry", "--skills", f.skills)
	op := f.conn("operator")
	opJS, _ := jetstream.New(op)
	natstest.Eventually(t, 20*time.Second, func() bool {
		kv, err := opJS.KeyValue(ctx, "skills")
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, "doomed")
		return err == nil
	}, "the registry did not publish the catalog")
	f.clean("registry", "create streams, buckets, object store; publish the catalog")

	// A tool service on the bus, as its own user.
	remindRuns, ticks := make(chan struct{}, 1), make(chan struct{}, 1)
	toolNC := f.conn("tool")
	shout := tool.Func("shout", func(_ context.Context, c tool.Call) (any, error) {
		s, _ := c.Args["text"].(string)
		ch := map[string]chan struct{}{"remind": remindRuns, "tick": ticks}[s]
		if ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		return map[string]any{"said": strings.ToUpper(s)}, nil
	})
	srv, err := bustool.Serve(toolNC, bustool.ServerConfig{Name: "shouter"}, bustool.Def{Tool: shout, Description: "shouts"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	f.clean("tool", "serve a tool as a micro service")

	f.service(cli.Router, "router", "--ensure=false")
	f.service(cli.Worker, "worker", "--ensure=false", "--name", "w-flow", "--bus-tools-interval", "100ms", "--backoff-base", "10ms", "--concurrency", "4", "--repair")
	f.service(func(ctx context.Context, args []string, env cli.Env, o, e io.Writer) error {
		return cli.Skillbus(ctx, append([]string{"repair", "serve"}, args...), env, o, e)
	}, "repair", "--ensure=false")

	// Micro-service discovery, as `nats micro ls` does it: every kind of service
	// answers a fleet-wide ping (the router and worker once they have started).
	fleetAnswers := func() map[string]bool {
		fleet := map[string]bool{}
		pings, err := op.SubscribeSync(op.NewRespInbox())
		if err != nil {
			t.Fatal(err)
		}
		defer pings.Unsubscribe()
		if err := op.PublishRequest("$SRV.PING", pings.Subject, nil); err != nil {
			t.Fatal(err)
		}
		for len(fleet) < 4 {
			msg, err := pings.NextMsg(time.Second)
			if err != nil {
				break
			}
			var ping struct{ Name string }
			_ = json.Unmarshal(msg.Data, &ping)
			fleet[ping.Name] = true
		}
		return fleet
	}
	var fleet map[string]bool
	natstest.Eventually(t, 30*time.Second, func() bool {
		fleet = fleetAnswers()
		return fleet["skillbus-registry"] && fleet["skillbus-router"] && fleet[cli.WorkerServiceName] && fleet["shouter"]
	}, "$SRV.PING: answers from %v only (violations %v)", fleet, v.lines)
	for _, subj := range []string{"$SRV.PING", "$SRV.INFO.skillbus-registry", "$SRV.STATS.skillbus-registry", "$SRV.INFO.shouter",
		"$SRV.PING.skillbus-router", "$SRV.STATS.skillbus-router", "$SRV.INFO.skillbus-worker", "$SRV.STATS.skillbus-worker"} {
		msg, err := op.Request(subj, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("operator: %s: %v (violations %v)", subj, err, v.take())
		}
		if !bytes.Contains(msg.Data, []byte(`"name"`)) {
			t.Fatalf("%s answered %s", subj, msg.Data)
		}
	}
	msg, err := op.Request("skillbus.worker.w-flow.status", nil, 5*time.Second)
	if err != nil || !bytes.Contains(msg.Data, []byte(`"worker-default"`)) {
		t.Fatalf("worker status: %v %s (violations %v)", err, msgData(msg), v.take())
	}
	f.clean("router", "answer $SRV.PING/INFO/STATS (micro service)")
	f.clean("worker", "answer $SRV.PING/INFO/STATS and its status endpoint (micro service)")
	f.clean("registry", "answer $SRV.PING/INFO/STATS (micro service)")
	f.clean("tool", "answer $SRV.INFO (micro service)")
	f.clean("operator", "$SRV.PING, $SRV.INFO, $SRV.STATS (nats micro ls)")

	out := f.must("operator", "skills list", "skills", "list")
	if !strings.Contains(out, "hello") || !strings.Contains(out, "doomed") {
		t.Fatalf("skills list:\n%s", out)
	}
	f.must("operator", "skills show hello", "skills", "show", "hello")
	f.must("operator", "skills validate --remote", "skills", "validate", "--remote", filepath.Join(f.skills, "hello"))

	out = f.must("publisher", "trigger --skill hello --wait", "trigger", "--skill", "hello", "--data", `{"name":"Ada"}`, "--wait", "--timeout", "30s")
	if !strings.Contains(out, "Hello, Ada!") {
		t.Fatalf("trigger hello:\n%s", out)
	}
	f.clean("router", "route a trigger, publish the plan and the job")
	f.clean("worker", "run a job, publish its events and result, write KV runs")

	out = f.must("publisher", "trigger a skill that invokes another (skill tool)", "trigger", "--skill", "delegate", "--data", `{"who":"Lin"}`, "--wait", "--timeout", "30s")
	if !strings.Contains(out, "Hello, Lin!") {
		t.Fatalf("trigger delegate:\n%s", out)
	}
	f.clean("worker", "invoke a skill (skill tool: a trigger from skillbus's own source)")
	select {
	case <-ticks:
	case <-time.After(20 * time.Second):
		t.Fatalf("no scheduled run of tick (violations %v)", v.take())
	}
	f.clean("router", "fire a schedule (a tick from skillbus's own source)")

	out = f.must("operator", "trigger <type> --wait", "trigger", "com.example.greet", "--data", `{"name":"Grace"}`, "--wait", "--timeout", "30s")
	if !strings.Contains(out, "Hello, Grace!") {
		t.Fatalf("trigger com.example.greet:\n%s", out)
	}

	out = f.must("publisher", "trigger, fallback to the next skill", "trigger", "com.example.order.created", "--data", `{"order_id":"A-1","quantity":20}`, "--wait", "--timeout", "30s")
	if !strings.Contains(out, "backordered") {
		t.Fatalf("fallback:\n%s", out)
	}
	f.clean("worker", "fall back: publish the next skill's job")

	out = f.must("publisher", "trigger a skill calling a bus tool", "trigger", "--skill", "loud", "--data", `{"text":"hey"}`, "--wait", "--timeout", "30s")
	if !strings.Contains(out, "HEY") {
		t.Fatalf("bus tool:\n%s", out)
	}
	f.clean("worker", "discover and call a tool on the bus")

	out, err = f.cli("publisher", "trigger", "--skill", "doomed", "--wait", "--timeout", "30s")
	if cli.ExitCode(err) != 1 || !strings.Contains(out, "dead-lettered") {
		t.Fatalf("doomed: exit %d, want 1, and a dead letter:\n%s", cli.ExitCode(err), out)
	}
	f.clean("worker", "dead-letter a failed job")
	dlq, err := opJS.Stream(ctx, "SKILLBUS_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	// The dead letter is written just after the failed outcome that trigger --wait
	// returns on.
	var dlqErr error
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, dlqErr = dlq.GetLastMsgForSubject(ctx, "skillbus.dead.doomed")
		return dlqErr == nil
	}, "operator: read the DLQ: %v", dlqErr)
	f.clean("operator", "read the DLQ (nats stream get SKILLBUS_DLQ)")
	if out := f.must("operator", "repair list", "repair", "list", "--json"); !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("repair list --json:\n%s", out)
	}
	out = f.must("operator", "dlq list", "dlq", "list", "--json", "--skill", "doomed")
	var dead []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &dead); err != nil || len(dead) != 1 {
		t.Fatalf("dlq list --json: %v\n%s", err, out)
	}
	f.must("operator", "dlq show", "dlq", "show", dead[0].ID)
	f.must("operator", "dlq replay (publish the job again, record the replay)", "dlq", "replay", dead[0].ID, "--by", "test")
	// doomed still fails: its replay is a dead letter of its own, written by the worker.
	natstest.Eventually(t, 20*time.Second, func() bool {
		out, err := f.cli("operator", "dlq", "list", "--json", "--skill", "doomed")
		return err == nil && strings.Count(out, `"kind":"job"`) == 2
	}, "the replayed job did not run (and die again)")
	f.clean("worker", "run a replayed job")

	// A confirmation: the worker pauses, the operator approves, the router resumes.
	waited := make(chan string, 1)
	go func() {
		out, err := f.cli("publisher", "trigger", "--skill", "approve", "--wait", "--timeout", "60s")
		if err != nil {
			out += "\nerror: " + err.Error()
		}
		waited <- out
	}()
	var paused string
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, err := f.cli("operator", "runs", "list", "--json")
		if err != nil {
			return false
		}
		var rows []map[string]any
		_ = json.Unmarshal([]byte(out), &rows)
		for _, r := range rows {
			if r["status"] == "paused" {
				paused, _ = r["execution_id"].(string)
				return true
			}
		}
		return false
	}, "no paused execution in runs list")
	f.clean("operator", "runs list")
	f.clean("worker", "pause for a confirmation (checkpoint, scheduled timeout)")
	f.must("operator", "runs show", "runs", "show", paused)
	f.must("operator", "runs confirm", "runs", "confirm", paused, "--by", "test")
	select {
	case out := <-waited:
		if !strings.Contains(out, `"yes"`) {
			t.Fatalf("approve after confirmation:\n%s", out)
		}
	case <-ctx.Done():
		t.Fatal("the confirmed execution did not finish")
	}
	f.clean("router", "resume a confirmed run: read and delete KV runs, purge the timeout")
	f.clean("publisher", "trigger --wait through a confirmation")

	// cancel_on: an event cancels a running run as the router. The router's
	// cancel asks for nothing it may not do: a refused JetStream request would be
	// answered only at the API timeout (5 s), stalling every such event that long.
	reminded := make(chan string, 1)
	go func() {
		out, err := f.cli("publisher", "trigger", "--skill", "remind", "--id", "remind-7", "--data", `{"order":7}`, "--wait", "--timeout", "90s")
		reminded <- fmt.Sprintf("%s\nexit %d", out, cli.ExitCode(err))
	}()
	select {
	case out := <-reminded:
		t.Fatalf("remind ended before it was cancelled:\n%s", out)
	case <-remindRuns:
	case <-ctx.Done():
		t.Fatal("remind did not start")
	}
	start := time.Now()
	out, err = f.cli("publisher", "trigger", "com.example.order.paid", "--data", `{"order":7}`, "--wait", "--timeout", "30s")
	if cli.ExitCode(err) != 0 || !strings.Contains(out, "▶ no skill takes it, but it cancelled 1 run: ") {
		t.Fatalf("order.paid: exit %d, want 0 (no skill runs it, and it cancelled remind's run):\n%s\nviolations: %v", cli.ExitCode(err), out, v.take())
	}
	// The router has routed order.paid, so any request of its cancel was made:
	// clean fails on its violation.
	t.Logf("order.paid routed, its run cancelled, in %v", time.Since(start))
	f.clean("router", "cancel a running run by a skill's cancel_on")
	select {
	case out := <-reminded:
		if !strings.Contains(out, "cancel") || !strings.Contains(out, "exit 6") { // trigger --wait's code for a cancelled run
			t.Fatalf("remind after order.paid:\n%s", out)
		}
	case <-ctx.Done():
		t.Fatal("the run cancelled by order.paid did not end")
	}
	f.clean("worker", "stop a run cancelled by an event")

	// A repair: the worker asks the repair service to park the execution, the
	// service proposes a patch, the operator approves it, the registry publishes it
	// and the parked execution completes on it.
	f.must("publisher", "trigger a skill with a repairable fault", "trigger", "--skill", "renamed", "--data", `{"name":"Rep"}`)
	var proposed []struct{ ID, Status string }
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, err := f.cli("operator", "repair", "list", "--json")
		proposed = nil
		_ = json.Unmarshal([]byte(out), &proposed)
		return err == nil && len(proposed) == 1 && proposed[0].Status == "proposed"
	}, "no proposed repair: %+v (violations %v)", proposed, v.lines)
	f.clean("worker", "park a repairable failure (a park request to the repair service)")
	f.must("operator", "repair approve", "repair", "approve", proposed[0].ID, "--by", "test")
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, err := f.cli("operator", "repair", "show", proposed[0].ID, "--json")
		return err == nil && strings.Contains(out, `"status": "applied"`) && strings.Contains(out, `"executions": 0`)
	}, "the approved repair was not applied (violations %v)", v.lines)
	var ran []map[string]any
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, err := f.cli("operator", "runs", "list", "--json")
		ran = nil
		_ = json.Unmarshal([]byte(out), &ran)
		for _, r := range ran {
			if r["skill"] == "renamed" && r["status"] == "completed" {
				return err == nil
			}
		}
		return false
	}, "the repaired run did not complete: %v", ran)
	f.clean("repair", "park executions, propose a patch, publish the approved repair, release the parked run")
	f.clean("registry", "publish an approved repair (checked against KV repairs)")

	// The HTTP gateway publishes, follows and records webhook bodies as the gateway.
	gwLog := f.service(func(ctx context.Context, args []string, env cli.Env, o, e io.Writer) error {
		return cli.Skillbus(ctx, append([]string{"gateway"}, args...), env, o, e)
	}, "gateway", "--listen", "127.0.0.1:0", "--hooks", hooksFile(t))
	addr := regexp.MustCompile(`listening" addr=(127\.0\.0\.1:\d+)`)
	natstest.Eventually(t, 20*time.Second, func() bool { return addr.MatchString(gwLog()) }, "the gateway did not start: %s", stringer(gwLog))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr.FindStringSubmatch(gwLog())[1]+"/events?wait=30s", strings.NewReader(`{"name":"Web"}`))
	for k, val := range map[string]string{"ce-specversion": "1.0", "ce-id": "web-1", "ce-source": "/curl", "ce-type": "com.example.greet", "Content-Type": "application/json"} {
		req.Header.Set(k, val)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Hello, Web!") {
		t.Fatalf("gateway: %d %s", resp.StatusCode, body)
	}
	f.clean("gateway", "HTTP gateway: POST /events?wait, publish and follow")
	// A webhook body is recorded in KV hooks; sent again with another id, it is the
	// first delivery.
	for _, id := range []string{"hook-1", "hook-2"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr.FindStringSubmatch(gwLog())[1]+"/hooks/plain", strings.NewReader(`{"name":"Hook"}`))
		req.Header.Set("X-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"id":"hook-1"`) {
			t.Fatalf("webhook %s: %d %s", id, resp.StatusCode, body)
		}
	}
	f.clean("gateway", "HTTP gateway: a webhook and its replay (KV hooks)")

	// Hot reload: a skill added while everything runs.
	writeSkill(t, f.skills, "late", "skill.yaml", lateSkill)
	natstest.Eventually(t, 20*time.Second, func() bool {
		out, err := f.cli("operator", "skills", "list")
		return err == nil && strings.Contains(out, "late")
	}, "the registry did not publish a new skill")
	out = f.must("publisher", "trigger a skill added while running", "trigger", "--skill", "late", "--wait", "--timeout", "30s")
	if !strings.Contains(out, "late") {
		t.Fatalf("late:\n%s", out)
	}
	f.clean("registry", "hot reload: publish a new skill")

	// What each role must not do.
	debouncedRun := events.Subjects{Prefix: "skillbus"}.TriggerDebounced("hello")
	ownTrigger := events.Subjects{Prefix: "skillbus"}.TriggerInternal("hello")
	wk := f.conn("worker")
	wkJS, _ := jetstream.New(wk)
	// short bounds an action the server must refuse. A refused publish is never
	// acknowledged: the action ends once the server has logged the violation that
	// denied then checks for, rather than after waiting out its second.
	short := func(role, subject string) (context.Context, context.CancelFunc) {
		c, cc := context.WithTimeout(ctx, time.Second)
		go func() {
			for {
				logged := v.logged()
				if v.has(role, subject) {
					cc()
					return
				}
				select {
				case <-c.Done():
					return
				case <-logged:
				}
			}
		}()
		return c, cc
	}
	c, cc := short("worker", "$KV.skills.hello")
	_, err = wkJS.Publish(c, "$KV.skills.hello", []byte(`{}`))
	cc()
	f.denied("worker", "write the catalog (KV skills)", "$KV.skills.hello", err)
	c, cc = short("worker", "$O.skill-files.C.x")
	_, err = wkJS.Publish(c, "$O.skill-files.C.x", []byte(`x`))
	cc()
	f.denied("worker", "write skill files (object store)", "$O.skill-files.C.x", err)
	c, cc = short("worker", "$JS.API.CONSUMER.CREATE.SKILLBUS_TRIGGERS.router")
	_, err = wkJS.CreateOrUpdateConsumer(c, "SKILLBUS_TRIGGERS", jetstream.ConsumerConfig{Durable: "router"})
	cc()
	f.denied("worker", "change the router's consumer", "$JS.API.CONSUMER.CREATE.SKILLBUS_TRIGGERS.router", err)
	c, cc = short("worker", "$JS.API.STREAM.DELETE.SKILLBUS_JOBS")
	err = wkJS.DeleteStream(c, "SKILLBUS_JOBS")
	cc()
	f.denied("worker", "delete a stream", "$JS.API.STREAM.DELETE.SKILLBUS_JOBS", err)
	// Only routers start a debounced burst's run: a router takes it past the
	// debounce, so anyone else publishing one would skip the debounce.
	c, cc = short("worker", debouncedRun)
	_, err = wkJS.Publish(c, debouncedRun, []byte(`{}`))
	cc()
	f.denied("worker", "publish a debounced run", debouncedRun, err)

	// Nothing holding a worker's credentials can approve a repair: not by writing
	// an approved record to KV repairs (the registry publishes what a record there
	// approves), nor by publishing a decision or a repair job, nor by asking the
	// registry to publish.
	forged, _ := json.Marshal(map[string]any{"id": "forged", "skill": "hello", "status": "approved", "decided_by": "nobody",
		"patch": map[string]any{"diff": "--- a/skill.yaml\n+++ b/skill.yaml\n"}})
	for _, subj := range []string{"$KV.repairs.r.forged", "$KV.repairs.w.forged.x", "skillbus.repair.hello.decided", "skillbus.repair.hello"} {
		c, cc = short("worker", subj)
		_, err = wkJS.Publish(c, subj, forged)
		cc()
		f.denied("worker", "forge a repair: publish "+subj, subj, err)
	}
	repairEndpoint := events.Subjects{Prefix: "skillbus"}.Registry(registryapi.EndpointRepair)
	_, err = wk.Request(repairEndpoint, forged, time.Second)
	f.denied("worker", "ask the registry to publish a repair", repairEndpoint, err)

	pub := f.conn("publisher")
	pubJS, _ := jetstream.New(pub)
	for _, subj := range []string{"skillbus.exec.default.hello", "skillbus.events.x.execution.completed", "skillbus.dead.hello", "skillbus.repair.hello", "$KV.runs.x.result", debouncedRun, ownTrigger} {
		c, cc = short("publisher", subj)
		_, err = pubJS.Publish(c, subj, []byte(`{}`))
		cc()
		f.denied("publisher", "publish "+subj, subj, err)
	}
	// Only the gateway records webhook bodies.
	c, cc = short("publisher", "$KV.hooks.x")
	_, err = pubJS.Publish(c, "$KV.hooks.x", []byte(`{}`))
	cc()
	f.denied("publisher", "write KV hooks", "$KV.hooks.x", err)
	gw := f.conn("gateway")
	gwJS, _ := jetstream.New(gw)
	for _, subj := range []string{"skillbus.exec.default.hello", "skillbus.events.x.execution.completed", "skillbus.dead.hello", "$KV.runs.x.result", "$KV.skills.hello", "$KV.repairs.x", debouncedRun, ownTrigger} {
		c, cc = short("gateway", subj)
		_, err = gwJS.Publish(c, subj, []byte(`{}`))
		cc()
		f.denied("gateway", "publish "+subj, subj, err)
	}
	c, cc = short("gateway", "$JS.API.CONSUMER.CREATE.SKILLBUS_JOBS")
	_, err = gwJS.CreateOrUpdateConsumer(c, "SKILLBUS_JOBS", jetstream.ConsumerConfig{Durable: "thief"})
	cc()
	f.denied("gateway", "consume jobs", "$JS.API.CONSUMER.CREATE.SKILLBUS_JOBS", err)
	c, cc = short("gateway", "$JS.API.STREAM.DELETE.KV_hooks")
	err = gwJS.DeleteKeyValue(c, "hooks")
	cc()
	f.denied("gateway", "delete the hooks bucket", "$JS.API.STREAM.DELETE.KV_hooks", err)
	c, cc = short("publisher", "$JS.API.CONSUMER.CREATE.SKILLBUS_JOBS")
	_, err = pubJS.CreateOrUpdateConsumer(c, "SKILLBUS_JOBS", jetstream.ConsumerConfig{Durable: "thief"})
	cc()
	f.denied("publisher", "consume jobs", "$JS.API.CONSUMER.CREATE.SKILLBUS_JOBS", err)
	c, cc = short("publisher", "$JS.API.CONSUMER.CREATE.SKILLBUS_EVENTS.router-confirmations")
	_, err = pubJS.CreateOrUpdateConsumer(c, "SKILLBUS_EVENTS", jetstream.ConsumerConfig{Durable: "router-confirmations"})
	cc()
	f.denied("publisher", "change the router's confirmations consumer", "$JS.API.CONSUMER.CREATE.SKILLBUS_EVENTS.router-confirmations", err)

	// The operator publishes jobs (dlq replay) but no dead letters, results or progress.
	for _, subj := range []string{"skillbus.dead.hello", "skillbus.events.x.execution.completed", "skillbus.repair.hello", debouncedRun} {
		c, cc = short("operator", subj)
		_, err = opJS.Publish(c, subj, []byte(`{}`))
		cc()
		f.denied("operator", "publish "+subj, subj, err)
	}
	c, cc = short("operator", "$KV.runs.x.result")
	_, err = opJS.Publish(c, "$KV.runs.x.result", []byte(`{}`))
	cc()
	f.denied("operator", "write a run record", "$KV.runs.x.result", err)

	err = toolNC.Publish("skillbus.trigger.skill.hello", nil)
	if err == nil {
		err = toolNC.Flush()
	}
	if err == nil {
		err = errors.New("core publish gives no error; the violation log is the proof")
	}
	f.denied("tool", "publish a trigger", "skillbus.trigger.skill.hello", err)
}

// TestShippedConfigLoads loads deploy/base/nats.conf as the pods do: with the generated
// accounts next to it, TLS files where the Secret nats-tls is mounted (here: test
// certificates), and the passwords and pod name in the environment.
func TestShippedConfigLoads(t *testing.T) {
	dir := t.TempDir()
	certs := natstest.NewCerts(t)
	conf, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "base", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "base", "nats-accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(
		"/etc/nats/tls/tls.crt", certs.ServerCert, "/etc/nats/tls/tls.key", certs.ServerKey, "/etc/nats/tls/ca.crt", certs.CA,
		`"/data"`, fmt.Sprintf("%q", filepath.Join(dir, "data")),
	).Replace(string(conf))
	for _, p := range []string{"/etc/nats/tls/", "/data"} {
		if !strings.Contains(string(conf), p) {
			t.Fatalf("nats.conf no longer mentions %s; update this test", p)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-accounts.conf"), accounts, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "nats-0")
	for _, r := range natsperm.Roles("skillbus") {
		t.Setenv(r.PasswordVar(), password(r.Name))
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("deploy/base/nats.conf does not load: %v", err)
	}
	if opts.ServerName != "nats-0" || opts.TLSConfig == nil || !opts.JetStream || opts.Cluster.Name != "skillbus" || len(opts.Routes) != 3 || len(opts.Users) != len(natsperm.Roles("skillbus")) {
		t.Fatalf("nats.conf: name %q, tls %v, jetstream %v, cluster %q, %d routes, %d users", opts.ServerName, opts.TLSConfig != nil, opts.JetStream, opts.Cluster.Name, len(opts.Routes), len(opts.Users))
	}
	if _, err := server.NewServer(opts); err != nil {
		t.Fatalf("nats-server rejects deploy/base/nats.conf: %v", err)
	}
}

// stringer defers a log's reading to when a failure message is printed.
type stringer func() string

func (s stringer) String() string { return s() }

func msgData(m *nats.Msg) []byte {
	if m == nil {
		return nil
	}
	return m.Data
}

// hooksFile writes a hooks file of one webhook, plain, whose id is the X-Id header.
func hooksFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "hooks.yaml")
	if err := os.WriteFile(p, []byte("hooks:\n  plain:\n    type: com.example.greet\n    id_header: X-Id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
