package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
)

// The step reads "heading"; the value has "title" and "body". No name is close
// enough for the deterministic repairers: only the chat model can fix it.
const headingSkill = `name: issue-heading
description: posts an issue's heading
repair: auto
inputs:
  - name: name
    type: string
steps:
  - id: fetch
    compute: |
      result = {"title": "T " + inputs.name, "body": "b"}
  - id: post
    tool: echo
    args:
      text: "{{ fetch.heading }}"
outputs:
  posted: "{{ post.text }}"
`

// A skill that fails fatally: its failures are never repair jobs.
const fatalSkill = `name: always-fatal
description: fails fatally
steps:
  - id: only
    tool: exec
    args:
      command: ["false"]
`

// chatModel is a chat-completions server the test controls: the request of the
// worker whose API key is hold waits until that worker's connection is gone; every
// other request gets the fix.
type chatModel struct {
	srv  *httptest.Server
	hold string
	fix  string

	mu      sync.Mutex
	callers []string      // the API key of each request, in order
	held    chan struct{} // closed when the held request arrived
	dropped chan struct{} // closed when its caller went away
}

func newChatModel(t *testing.T, hold, fix string) *chatModel {
	m := &chatModel{hold: hold, fix: fix, held: make(chan struct{}), dropped: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *chatModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct{ Role, Content string }
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) != 2 || !strings.Contains(req.Messages[1].Content, `"name": "heading"`) {
		http.Error(w, "not a repair request", http.StatusBadRequest)
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	m.mu.Lock()
	m.callers = append(m.callers, key)
	first := len(m.callers) == 1
	m.mu.Unlock()
	if key == m.hold && first {
		close(m.held)
		<-r.Context().Done() // the caller was killed
		close(m.dropped)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "c1", "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": m.fix}}},
	})
}

func (m *chatModel) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.callers...)
}

// A repair service is SIGKILLed while its chat model is answering: the repair job
// comes back to another repair service, the skill is patched exactly once, and every
// parked execution completes exactly once on the repaired version, its outcome
// naming the repair. A fatal failure beside it never reaches the REPAIR stream.
func TestRepairWorkerKilledMidRepair(t *testing.T) {
	t.Parallel()
	const n, fatal = 20, 5
	dir := t.TempDir()
	for name, text := range map[string]string{"issue-heading": headingSkill, "always-fatal": fatalSkill} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "skill.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fix := repair.Diff(repair.Files{"skill.yaml": headingSkill}, repair.Files{"skill.yaml": strings.Replace(headingSkill, "fetch.heading", "fetch.title", 1)})
	model := newChatModel(t, "key-a", fix)

	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := "--nats-url=" + srv.URL()
	start(t, "registry", url, "--skills", dir)
	start(t, "router", url)
	start(t, "worker", url, "--repair", "--ack-wait=2s", "--concurrency=8", "--name=w")
	// The repair service runs apart from the workers, as its own process.
	repairArgs := []string{"repair", "serve", url, "--ack-wait=3s", "--llm-url", model.srv.URL + "/v1", "--llm-model", "fixer", "--llm-timeout=2m"}
	a := startEnv(t, []string{"SKILLBUS_LLM_API_KEY=key-a"}, "skillbus", repairArgs...)
	skills, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, err1 := skills.Get(ctx, "issue-heading")
		_, err2 := skills.Get(ctx, "always-fatal")
		_, err3 := b.JS.Consumer(ctx, b.StreamRepair(), "repair")
		_, err4 := b.JS.Consumer(ctx, b.StreamJobs(), "worker-default")
		return err1 == nil && err2 == nil && err3 == nil && err4 == nil
	}, "the fleet did not come up")
	var first map[string]any
	if e, err := skills.Get(ctx, "issue-heading"); err == nil {
		_ = json.Unmarshal(e.Value(), &first)
	}

	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	trigger := func(skill, id, data string) {
		m := nats.NewMsg("skillbus.trigger.skill." + skill)
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", id)
		m.Header.Set("ce-source", "/e2e")
		m.Header.Set("ce-type", "com.example.issue")
		m.Header.Set("Content-Type", "application/json")
		m.Data = []byte(data)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		trigger("issue-heading", fmt.Sprintf("kill-%d", i), fmt.Sprintf(`{"name":"n%d"}`, i))
	}
	for i := range fatal {
		trigger("always-fatal", fmt.Sprintf("fatal-%d", i), `{}`)
	}

	// Repair service a is asking the model, and every execution waits.
	select {
	case <-model.held:
	case <-ctx.Done():
		t.Fatal("no repair request reached the model")
	}
	act := service.Actions{Bus: b}
	var rec service.Summary
	natstest.Eventually(t, 60*time.Second, func() bool {
		list, err := act.List(ctx, "")
		if err != nil || len(list) != 1 {
			return false
		}
		rec = list[0]
		return rec.Executions == n
	}, "not every execution parked: %+v", rec)
	if rec.Status != service.StatusRequested {
		t.Fatalf("the repair is %s while its model has not answered", rec.Status)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.dropped:
	case <-ctx.Done():
		t.Fatal("the killed repair service's request never ended")
	}
	startEnv(t, []string{"SKILLBUS_LLM_API_KEY=key-b"}, "skillbus", repairArgs...)

	// Every execution ends, exactly once; those of issue-heading complete on the
	// repaired version.
	evs, err := b.JS.Stream(ctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]uint64{}
	natstest.Eventually(t, 120*time.Second, func() bool {
		info, err := evs.Info(ctx, jetstream.WithSubjectFilter("skillbus.events.*.execution.*"))
		if err != nil {
			return false
		}
		outcomes = map[string]uint64{}
		for subj, k := range info.State.Subjects {
			parts := strings.Split(subj, ".")
			if events.Outcome(events.Prefix + strings.Join(parts[3:], ".")) {
				outcomes[parts[2]] += k
			}
		}
		return len(outcomes) == n+fatal
	}, "executions ended: %v of %d; repair: %v", lazy(func() string { return fmt.Sprint(len(outcomes)) }), n+fatal,
		lazy(func() string { s, err := act.Show(ctx, rec.ID); return fmt.Sprintf("%+v %v", s, err) }))
	for id, k := range outcomes {
		if k != 1 {
			t.Fatalf("execution %s has %d outcomes", id, k)
		}
	}
	completed := map[string]events.ExecutionCompleted{}
	for id := range outcomes {
		m, err := evs.GetLastMsgForSubject(ctx, b.Subjects.Event(id, events.TypeExecutionCompleted))
		if err != nil {
			continue
		}
		var d events.ExecutionCompleted
		if err := json.Unmarshal(eventData(m.Header, m.Data), &d); err != nil {
			t.Fatal(err)
		}
		completed[id] = d
	}
	got, err := act.Show(ctx, rec.ID)
	if err != nil || got.Status != service.StatusApplied || got.NewDigest == "" || got.NewDigest == first["digest"] || got.By != "chat" {
		t.Fatalf("repair: %+v %v", got, err)
	}
	for i := range n {
		id := events.ExecutionID("/e2e", fmt.Sprintf("kill-%d", i), "issue-heading")
		d := completed[id]
		if d.Outputs["posted"] != fmt.Sprintf("T n%d", i) || d.RepairID != rec.ID || d.Digest != got.NewDigest {
			t.Fatalf("execution %d: outputs %v, repair %q on %q; want repair %s on %s", i, d.Outputs, d.RepairID, d.Digest, rec.ID, got.NewDigest)
		}
	}

	// Patched exactly once: the model was asked by the killed repair service and once
	// more by the one that took over; one attempt spent, one version published, one success.
	if calls := model.calls(); len(calls) != 2 || calls[0] != "key-a" || calls[1] != "key-b" {
		t.Fatalf("chat requests by %v, want key-a (killed) then key-b", calls)
	}
	full, _, err := service.Load(ctx, mustKV(t, b, b.BucketRepairs()), rec.ID)
	if err != nil || len(full.Attempts) != 0 || full.Spent != 0 {
		t.Fatalf("record: %+v %v", full, err)
	}
	hist, err := skills.History(ctx, "issue-heading")
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, e := range hist {
		var v map[string]any
		if json.Unmarshal(e.Value(), &v) == nil {
			digests[fmt.Sprint(v["digest"])] = true
		}
	}
	if len(digests) != 2 || !digests[got.NewDigest] {
		t.Fatalf("catalog versions of issue-heading: %v, want the first and %s", digests, got.NewDigest)
	}
	info, err := evs.Info(ctx, jetstream.WithSubjectFilter("skillbus.events."+rec.ID+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if p, s := info.State.Subjects["skillbus.events."+rec.ID+".repair.proposed"], info.State.Subjects["skillbus.events."+rec.ID+".repair.succeeded"]; p != 1 || s != 1 {
		t.Fatalf("repair.proposed %d, repair.succeeded %d; want one each (%v)", p, s, info.State.Subjects)
	}

	// The fatal failures never reached the REPAIR stream (a work queue: what it
	// ever held is its last sequence): the park requests, the repair job and its
	// automatic approval.
	rs, err := b.JS.Stream(ctx, b.StreamRepair())
	if err != nil {
		t.Fatal(err)
	}
	rinfo, err := rs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rinfo.State.LastSeq != n+2 {
		t.Fatalf("%d messages on the REPAIR stream, want %d park requests, the repair job and its approval", rinfo.State.LastSeq, n)
	}
	for i := range fatal {
		id := events.ExecutionID("/e2e", fmt.Sprintf("fatal-%d", i), "always-fatal")
		if outcomes[id] != 1 || completed[id].ExecutionID != "" {
			t.Fatalf("fatal execution %d: %d outcomes", i, outcomes[id])
		}
	}

	// runs show names the repair the execution ran after.
	id := events.ExecutionID("/e2e", "kill-0", "issue-heading")
	out, code := skillbus(t, "runs", "show", id, url)
	if code != 0 || !strings.Contains(out, "after repair "+rec.ID) {
		t.Fatalf("runs show: exit %d\n%s", code, out)
	}
}

// lazy is a value worked out when it is printed.
type lazy func() string

func (l lazy) String() string { return l() }

func mustKV(t *testing.T, b *bus.Bus, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := b.KV(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
