package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

// flakySkill calls the test's counting tool; in mode "broken" the tool fails fatally,
// as an API that renamed a field would.
const flakySkill = `name: flaky
description: Records an order through the counting tool.
version: VERSION
max_retries: 0
inputs:
  - name: order
    type: string
    required: true
steps:
  - id: record
    tool: count
    args:
      mode: MODE
      order: "{{ inputs.order }}"
outputs:
  mode: "{{ record.mode }}"
  order: "{{ record.order }}"
`

const ghostSkill = `name: ghost
description: Published only after a trigger asked for it.
version: 1.0.0
steps:
  - id: record
    tool: count
    args:
      mode: ghost
outputs:
  mode: "{{ record.mode }}"
`

// dlqSystem runs a registry, a router and a worker against a test server, and a tool
// service whose calls are counted by mode.
type dlqSystem struct {
	t     *testing.T
	ctx   context.Context
	env   cli.Env
	dir   string
	js    jetstream.JetStream
	mu    sync.Mutex
	calls map[string]*atomic.Int64
}

func (s *dlqSystem) counter(mode string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.calls[mode]
	if !ok {
		c = &atomic.Int64{}
		s.calls[mode] = c
	}
	return c
}

func (s *dlqSystem) skillbus(args ...string) (string, error) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	err := cli.Skillbus(ctx, args, s.env, &out, &out)
	return out.String(), err
}

// wantError runs the CLI with args and fails the test unless it exits with code
// and says want (in its error or its output).
func (s *dlqSystem) wantError(args []string, code int, want string) {
	s.t.Helper()
	out, err := s.skillbus(args...)
	if cli.ExitCode(err) != code || err == nil || !strings.Contains(err.Error()+out, want) {
		s.t.Errorf("skillbus %v: exit %d (%v), want %d and %q\n%s", args, cli.ExitCode(err), err, code, want, out)
	}
}

func (s *dlqSystem) writeSkill(name, text string) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Join(s.dir, name), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, name, "skill.yaml"), []byte(text), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// catalogVersion returns the version of a skill the catalog has as current, or "".
func (s *dlqSystem) catalogVersion(name string) string {
	kv, err := s.js.KeyValue(s.ctx, "skills")
	if err != nil {
		return ""
	}
	e, err := kv.Get(s.ctx, name)
	if err != nil {
		return ""
	}
	var sk skill.Skill
	_ = json.Unmarshal(e.Value(), &sk)
	return sk.Version
}

func (s *dlqSystem) service(main func(context.Context, []string, cli.Env, io.Writer, io.Writer) error, args ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	go func() { done <- main(ctx, append(args, "--log-format", "text"), s.env, w, w) }()
	s.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("%v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if s.t.Failed() {
			s.t.Logf("log:\n%s", logs.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

type dlqRow struct {
	ID         string          `json:"id"`
	Seq        uint64          `json:"seq"`
	Kind       string          `json:"kind"`
	Status     string          `json:"status"`
	Skill      string          `json:"skill"`
	Version    string          `json:"version"`
	DiedAt     time.Time       `json:"died_at"`
	Class      string          `json:"class"`
	Reason     string          `json:"reason"`
	StepID     string          `json:"step_id"`
	Deliveries uint64          `json:"deliveries"`
	Inputs     json.RawMessage `json:"inputs"`
	History    []struct {
		ExecutionID string `json:"execution_id"`
	} `json:"history"`
	Trigger struct {
		Seq uint64 `json:"seq"`
	} `json:"trigger"`
	Replays []struct {
		Replay      int    `json:"replay"`
		ExecutionID string `json:"execution_id"`
		TriggerID   string `json:"trigger_id"`
		Version     string `json:"version"`
		By          string `json:"by"`
		Outcome     string `json:"outcome"`
	} `json:"replays"`
}

func (s *dlqSystem) list(args ...string) []dlqRow {
	s.t.Helper()
	out, err := s.skillbus(append([]string{"dlq", "list", "--json"}, args...)...)
	if err != nil {
		s.t.Fatalf("dlq list --json %v: %v\n%s", args, err, out)
	}
	var rows []dlqRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		s.t.Fatalf("dlq list --json is not a JSON array of entries: %v\n%s", err, out)
	}
	return rows
}

func (s *dlqSystem) jobsLastSeq() uint64 {
	s.t.Helper()
	st, err := s.js.Stream(s.ctx, "SKILLBUS_JOBS")
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return info.State.LastSeq
}

// A skill that fails fatally lands in the DLQ; list and show say what, why and with
// which data; after the skill is fixed, a replay runs the fixed version once, and the
// same replay asked again publishes nothing; --again --pin runs the version that died.
// newDLQSystem is a dlqSystem on a fresh nats-server, whose CLI runs find it
// through $SKILLBUS_NATS_URL, with within for the whole test.
func newDLQSystem(t *testing.T, within time.Duration) (*dlqSystem, *natstest.Server) {
	t.Helper()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	url := srv.URL()
	s := &dlqSystem{t: t, ctx: ctx, dir: t.TempDir(), calls: map[string]*atomic.Int64{},
		env: func(k string) string {
			if k == "SKILLBUS_NATS_URL" {
				return url
			}
			return ""
		}}
	var err error
	if s.js, err = jetstream.New(srv.Conn(t)); err != nil {
		t.Fatal(err)
	}
	return s, srv
}

// A trigger for a skill that did not exist yet is replayed once the skill does.
func TestDLQ(t *testing.T) {
	t.Parallel()
	s, srv := newDLQSystem(t, 3*time.Minute)
	var err error
	count := tool.Func("count", func(_ context.Context, c tool.Call) (any, error) {
		mode, _ := c.Args["mode"].(string)
		s.counter(mode).Add(1)
		if mode == "broken" {
			return nil, failure.Fatalf("the orders API no longer has the field order_ref")
		}
		return map[string]any{"mode": mode, "order": c.Args["order"]}, nil
	})
	ts, err := bustool.Serve(srv.Conn(t), bustool.ServerConfig{Name: "counter"}, bustool.Def{Tool: count, Description: "counts calls by mode"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Shutdown(context.Background()) })

	s.writeSkill("flaky", strings.NewReplacer("VERSION", "1.0.0", "MODE", "broken").Replace(flakySkill))
	s.service(cli.Registry, "--skills", s.dir)
	natstest.Eventually(t, 20*time.Second, func() bool { return s.catalogVersion("flaky") == "1.0.0" }, "the registry did not publish flaky")
	s.service(cli.Router)
	s.service(cli.Worker, "--bus-tools-interval", "100ms", "--backoff-base", "10ms", "--concurrency", "4")

	// Nothing dead yet.
	if out, err := s.skillbus("dlq", "list"); err != nil || !strings.Contains(out, "no dead letters") {
		t.Fatalf("empty dlq list: %v\n%s", err, out)
	}
	if rows := s.list(); len(rows) != 0 {
		t.Fatalf("empty dlq list --json: %+v", rows)
	}

	out, err := s.skillbus("trigger", "--skill", "flaky", "--data", `{"order":"A-17"}`, "--wait", "--timeout", "30s")
	if cli.ExitCode(err) != 1 || !strings.Contains(out, "dead-lettered") {
		t.Fatalf("flaky: exit %d (%v), want 1 and a dead letter:\n%s", cli.ExitCode(err), err, out)
	}
	var rows []dlqRow
	natstest.Eventually(t, 10*time.Second, func() bool { rows = s.list(); return len(rows) == 1 }, "no dead letter listed")
	dead := rows[0]
	if dead.Kind != "job" || dead.Skill != "flaky" || dead.Version != "1.0.0" || dead.Class != "fatal" || dead.Status != "dead" ||
		!strings.Contains(dead.Reason, "no longer has the field order_ref") || dead.StepID != "record" || dead.Deliveries != 1 ||
		string(dead.Inputs) != `{"order":"A-17"}` || len(dead.ID) != 32 || time.Since(dead.DiedAt) > time.Minute {
		t.Fatalf("dead letter %+v", dead)
	}
	out, err = s.skillbus("dlq", "list")
	if err != nil || !strings.Contains(out, "SEQ") || !strings.Contains(out, dead.ID[:12]) || !strings.Contains(out, "fatal") ||
		!strings.Contains(out, "the orders API") || !strings.Contains(out, `{"order":"A-17"}`) || !strings.Contains(out, "dead") {
		t.Fatalf("dlq list:\n%s", out)
	}
	out, err = s.skillbus("dlq", "show", dead.ID[:10])
	t.Logf("show:\n%s", out)
	for _, want := range []string{dead.ID, "kind", "job", "flaky 1.0.0", "fatal", "order_ref", "step", "record", "1 delivery,",
		`"order": "A-17"`, "record", "dlq replay " + dead.ID} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("dlq show lacks %q (%v):\n%s", want, err, out)
		}
	}
	out, err = s.skillbus("dlq", "show", dead.ID, "--json")
	var shown map[string]any
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown["id"] != dead.ID || shown["log"] == nil {
		t.Fatalf("dlq show --json (want the entry with the execution log): %v\n%s", err, out)
	}
	if data, _ := shown["data"].(map[string]any); data["order"] != "A-17" {
		t.Errorf("dlq show --json: data %v, want the trigger's data", shown["data"])
	}

	// Filters.
	for _, tt := range []struct {
		args []string
		n    int
	}{
		{[]string{"--skill", "flaky"}, 1},
		{[]string{"--skill", "other"}, 0},
		{[]string{"--since", "1h"}, 1},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 0},
		{[]string{"--id", dead.ID[:8]}, 1},
		{[]string{"--id", "ffffffffff"}, 0},
		{[]string{"--skill", "_trigger"}, 0},
	} {
		if rows := s.list(tt.args...); len(rows) != tt.n {
			t.Errorf("dlq list %v: %d entries, want %d", tt.args, len(rows), tt.n)
		}
	}

	// Bad arguments.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dlq", "show", "0123456789abcdef"}, 1, "no such dead-letter entry"},
		{[]string{"dlq", "show", "abc"}, 1, "at least 6 characters"},
		{[]string{"dlq", "show", "7866"}, 1, "no entry has sequence number 7866 (SEQ in 'dlq list'), and the beginning of an id needs at least 6 characters"},
		{[]string{"dlq", "replay", "0123456789abcdef"}, 1, "no such dead-letter entry"},
		{[]string{"dlq", "list", "--since", "yesterday"}, 2, `--since "yesterday" is neither a duration`},
		{[]string{"dlq", "list", "--since", "-2h"}, 2, "negative"},
		{[]string{"dlq", "list", "--since", "2026-02-31"}, 2, "--since"},
		{[]string{"dlq", "list", "--skill", "a.b"}, 2, "--skill"},
		{[]string{"dlq", "list", "--limit", "0"}, 2, "--limit"},
		{[]string{"dlq", "replay"}, 2, "name what to replay"},
		{[]string{"dlq", "replay", dead.ID, "--skill", "flaky"}, 2, "an ID names one entry"},
		{[]string{"dlq", "show"}, 2, "accepts 1 arg"},
	} {
		s.wantError(tt.args, tt.code, tt.want)
	}

	// Fix the skill: the registry publishes version 1.1.0.
	s.writeSkill("flaky", strings.NewReplacer("VERSION", "1.1.0", "MODE", "fixed").Replace(flakySkill))
	natstest.Eventually(t, 20*time.Second, func() bool { return s.catalogVersion("flaky") == "1.1.0" }, "the registry did not publish the fixed flaky")

	out, err = s.skillbus("dlq", "replay", dead.ID, "--by", "ada")
	if err != nil || !strings.Contains(out, "published") || !strings.Contains(out, "1.1.0") {
		t.Fatalf("dlq replay: %v\n%s", err, out)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		rows = s.list()
		return len(rows) == 1 && len(rows[0].Replays) == 1 && rows[0].Replays[0].Outcome == "completed"
	}, "the replay did not complete: %+v", rows)
	rp := rows[0].Replays[0]
	if rows[0].Status != "replayed" || rp.By != "ada" || rp.Version != "1.1.0" || rp.Replay != 1 || rp.ExecutionID == dead.ID {
		t.Errorf("replayed entry %+v", rows[0])
	}
	if n := s.counter("fixed").Load(); n != 1 {
		t.Errorf("the fixed skill ran %d times, want 1", n)
	}
	out, err = s.skillbus("runs", "show", rp.ExecutionID)
	if err != nil || !strings.Contains(out, "A-17") || !strings.Contains(out, "completed") || !strings.Contains(out, "↻ replay #1 of dead letter "+dead.ID+", by ada") ||
		!strings.Contains(out, ", attempt 1, in ") {
		t.Errorf("runs show of the replayed execution: %v\n%s", err, out)
	}
	// runs list gives each run's version: the replay ran 1.1.0.
	if list, err := s.skillbus("runs", "list"); err != nil || !strings.Contains(list, "VERSION") ||
		!regexp.MustCompile(rp.ExecutionID+`\s+flaky\s+1\.1\.0\s+completed`).MatchString(list) {
		t.Errorf("runs list: %v\n%s", err, list)
	}
	// --skill and --status keep the runs asked for: the replay completed, the
	// first run failed.
	if list, err := s.skillbus("runs", "list", "--skill", "flaky", "--status", "completed,cancelled"); err != nil || !strings.Contains(list, rp.ExecutionID) || strings.Contains(list, "failed") {
		t.Errorf("runs list --skill flaky --status completed,cancelled: %v\n%s", err, list)
	}
	if list, err := s.skillbus("runs", "list", "--status", "failed"); err != nil || strings.Contains(list, rp.ExecutionID) || !strings.Contains(list, "failed") {
		t.Errorf("runs list --status failed: %v\n%s", err, list)
	}
	if list, err := s.skillbus("runs", "list", "--skill", "other"); err != nil || !strings.Contains(list, "no execution ended in the last 24h0m0s, nor paused, waiting, held or repairing now, matches") {
		t.Errorf("runs list --skill other: %v\n%s", err, list)
	}
	s.wantError([]string{"runs", "list", "--status", "done"}, 2, `--status "done": one of completed, failed`)
	// The beginning of an id names the execution, as runs list's ids are long.
	if short, err := s.skillbus("runs", "show", rp.ExecutionID[:8]); err != nil || short != out {
		t.Errorf("runs show of the id's first 8 characters: %v\n%s", err, short)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"runs", "show", "abc"}, 2, "too short"},
		{[]string{"runs", "show", "ffffffff"}, 1, "no execution among the last 100000 jobs, nor paused, held, repairing or ended in the last 7 days, whose id begins with ffffffff"},
		{[]string{"runs", "confirm", rp.ExecutionID}, 1, "is not waiting for a confirmation: it ended (completed)"},
		{[]string{"runs", "confirm", strings.Repeat("f", 32)}, 1, "no execution " + strings.Repeat("f", 32)},
		{[]string{"runs", "confirm", rp.ExecutionID[:8]}, 1, "no execution paused whose id begins with"},
	} {
		s.wantError(tt.args, tt.code, tt.want)
	}
	if out, err = s.skillbus("dlq", "list"); err != nil || !strings.Contains(out, "replayed (completed)") {
		t.Errorf("dlq list after the replay:\n%s", out)
	}
	if out, err = s.skillbus("dlq", "show", dead.ID); err != nil || !strings.Contains(out, "#1  execution "+rp.ExecutionID+" of flaky 1.1.0 by ada") ||
		!strings.Contains(out, "replayed already; to replay it once more: skillbus dlq replay "+dead.ID+" --again") {
		t.Errorf("dlq show after the replay:\n%s", out)
	}

	// The same replay again: nothing is published.
	jobs := s.jobsLastSeq()
	out, err = s.skillbus("dlq", "replay", dead.ID, "--json")
	var res []struct {
		EntryID  string `json:"entry_id"`
		Replayed struct {
			ExecutionID string `json:"execution_id"`
			Existing    bool   `json:"existing"`
		} `json:"replayed"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || !res[0].Replayed.Existing || res[0].Replayed.ExecutionID != rp.ExecutionID {
		t.Fatalf("second dlq replay: %v\n%s", err, out)
	}
	out, err = s.skillbus("dlq", "replay", "--skill", "flaky", "--since", "1h")
	t.Logf("replay again:\n%s", out)
	if err != nil || !strings.Contains(out, "replayed before") {
		t.Fatalf("replay by filter of a replayed entry: %v\n%s", err, out)
	}
	if got := s.jobsLastSeq(); got != jobs {
		t.Errorf("replaying the same entry again published %d jobs", got-jobs)
	}
	if n := s.counter("fixed").Load(); n != 1 {
		t.Errorf("the fixed skill ran %d times after replaying twice, want 1", n)
	}

	// Once more, pinned to the version that died: it dies again, as a new entry
	// whose history names the first.
	out, err = s.skillbus("dlq", "replay", dead.ID, "--again", "--pin")
	if err != nil || !strings.Contains(out, "#2") || !strings.Contains(out, "1.0.0 (pinned)") {
		t.Fatalf("dlq replay --again --pin: %v\n%s", err, out)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { rows = s.list("--skill", "flaky"); return len(rows) == 2 }, "the pinned replay did not die again")
	if again := rows[1]; again.Version != "1.0.0" || len(again.History) != 1 || again.History[0].ExecutionID != dead.ID || again.Status != "dead" {
		t.Errorf("the pinned replay's dead letter %+v", again)
	}
	if n := s.counter("broken").Load(); n != 2 {
		t.Errorf("the broken version ran %d times, want 2", n)
	}

	// A trigger for a skill that does not exist yet.
	out, err = s.skillbus("trigger", "--skill", "ghost", "--source", "/test", "--id", "ghost-1", "--wait", "--timeout", "30s")
	if err == nil {
		t.Fatalf("trigger for an unknown skill succeeded:\n%s", out)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { rows = s.list("--skill", "_trigger"); return len(rows) == 1 }, "the rejected trigger is not in the DLQ")
	tr := rows[0]
	if tr.Kind != "trigger" || tr.Class != "unknown_skill" || !strings.HasPrefix(tr.ID, "trigger.") || tr.Trigger.Seq == 0 {
		t.Fatalf("dead trigger %+v", tr)
	}
	s.writeSkill("ghost", ghostSkill)
	natstest.Eventually(t, 20*time.Second, func() bool { return s.catalogVersion("ghost") == "1.0.0" }, "the registry did not publish ghost")
	out, err = s.skillbus("dlq", "replay", tr.ID)
	if err != nil || !strings.Contains(out, "ghost-1.replay-1") {
		t.Fatalf("dlq replay of a trigger: %v\n%s", err, out)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return s.counter("ghost").Load() == 1 }, "the replayed trigger did not run ghost")
	if rows = s.list("--skill", "_trigger"); len(rows) != 1 || rows[0].Status != "replayed" || rows[0].Replays[0].TriggerID != "ghost-1.replay-1" {
		t.Errorf("replayed trigger %+v", rows)
	}
}
