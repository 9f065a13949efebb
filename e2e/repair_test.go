package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair/service"
)

// The step reads "titel"; the value it reads has "title" (the API renamed it).
const renamedKeySkill = `name: issue-title
description: posts an issue's title
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
      text: "{{ fetch.titel }}"
outputs:
  posted: "{{ post.text }}"
`

// 200 executions fail on one renamed key, with separate registry, router, two
// workers and a repair service; one worker is SIGKILLed while executions are being
// parked. One repair job is made, its deterministic one-line diff is approved with
// `skillbus repair approve`, the registry publishes the new version, and every
// execution completes exactly once on it.
func TestRepairTwoHundred(t *testing.T) {
	t.Parallel()
	const n = 200
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "issue-title"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "issue-title", "skill.yaml")
	if err := os.WriteFile(file, []byte(renamedKeySkill), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := "--nats-url=" + srv.URL()
	start(t, "registry", url, "--skills", dir)
	start(t, "router", url)
	var workers []*proc
	for i := range 2 {
		workers = append(workers, start(t, "worker", url, "--repair", "--ack-wait=2s", "--concurrency=8", fmt.Sprintf("--name=w%d", i+1)))
	}
	start(t, "skillbus", "repair", "serve", url, "--ack-wait=3s")
	skills, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		e, err1 := skills.Get(ctx, "issue-title")
		_, err2 := b.JS.Consumer(ctx, b.StreamRepair(), "repair")
		_, err3 := b.JS.Consumer(ctx, b.StreamJobs(), "worker-default")
		return err1 == nil && e != nil && err2 == nil && err3 == nil
	}, "the fleet did not come up")
	var first map[string]any
	e, _ := skills.Get(ctx, "issue-title")
	_ = json.Unmarshal(e.Value(), &first)

	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	var futures []jetstream.PubAckFuture
	for i := range n {
		m := nats.NewMsg("skillbus.trigger.skill.issue-title")
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", fmt.Sprintf("rep-%d", i))
		m.Header.Set("ce-source", "/e2e")
		m.Header.Set("ce-type", "com.example.issue")
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("rep-%d", i))
		m.Data = []byte(fmt.Sprintf(`{"name":"n%d"}`, i))
		fu, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, fu)
	}
	for _, fu := range futures {
		select {
		case <-fu.Ok():
		case err := <-fu.Err():
			t.Fatal(err)
		}
	}

	act := service.Actions{Bus: b}
	var listErr error
	parked := func() (service.Summary, int) {
		list, err := act.List(ctx, "")
		if err != nil || len(list) == 0 {
			listErr = err
			return service.Summary{}, 0
		}
		if len(list) > 1 {
			t.Fatalf("%d repairs for one fault: %+v", len(list), list)
		}
		return list[0], list[0].Executions
	}
	natstest.Eventually(t, 60*time.Second, func() bool { _, k := parked(); return k >= 20 }, "executions are not being parked")
	// A worker dies holding jobs: they come back to the other one.
	if err := workers[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var rec service.Summary
	natstest.Eventually(t, 90*time.Second, func() bool {
		var k int
		rec, k = parked()
		return rec.Status == service.StatusProposed && k == n
	}, "not every execution parked on a proposal: %+v (last list error: %v; %s)", rec, listErr, stringerFunc(func() string {
		kv, err := b.KV(ctx, b.BucketRepairs())
		if err != nil {
			return err.Error()
		}
		l, err := kv.ListKeysFiltered(ctx, "r.*")
		if err != nil {
			return "list: " + err.Error()
		}
		var keys []string
		for k := range l.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				keys = append(keys, k+": "+err.Error())
			} else {
				keys = append(keys, k+": "+string(e.Value()))
			}
		}
		return fmt.Sprint(keys)
	}))
	if !strings.Contains(rec.Diff, "-      text: \"{{ fetch.titel }}\"\n+      text: \"{{ fetch.title }}\"\n") || strings.Count(rec.Diff, "\n+") != 2 {
		t.Fatalf("diff:\n%s", rec.Diff)
	}
	out, code := skillbus(t, "repair", "approve", rec.ID[:10], "--by", "e2e", url)
	if code != 0 || !strings.Contains(out, "approved by e2e") {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}

	// Every execution completes exactly once, on the repaired version.
	completed := map[string]events.ExecutionCompleted{}
	messages := 0
	natstest.Eventually(t, 120*time.Second, func() bool {
		completed, messages = map[string]events.ExecutionCompleted{}, 0
		c, err := b.JS.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"skillbus.events.*.execution.completed", "skillbus.events.*.execution.failed", "skillbus.events.*.execution.fallback"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for {
			batch, err := c.FetchNoWait(1000)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for m := range batch.Messages() {
				got++
				messages++
				var d events.ExecutionCompleted
				if strings.HasSuffix(m.Subject(), ".execution.completed") && json.Unmarshal(eventData(m.Headers(), m.Data()), &d) == nil {
					completed[d.ExecutionID] = d
				}
			}
			if got == 0 {
				return len(completed) == n
			}
		}
	}, "%d of %d executions completed", len(completed), n)
	if messages != n {
		t.Fatalf("%d outcome events for %d executions", messages, n)
	}
	got, err := act.Show(ctx, rec.ID)
	if err != nil || got.Status != service.StatusApplied || got.NewDigest == "" || got.NewDigest == first["digest"] {
		t.Fatalf("repair: %+v %v", got, err)
	}
	for i := range n {
		d := completed[events.ExecutionID("/e2e", fmt.Sprintf("rep-%d", i), "issue-title")]
		if d.Outputs["posted"] != fmt.Sprintf("T n%d", i) || d.RepairID != rec.ID || d.Digest != got.NewDigest {
			t.Fatalf("execution %d: outputs %v, repair %q on %q; want repair %s on %s", i, d.Outputs, d.RepairID, d.Digest, rec.ID, got.NewDigest)
		}
	}
	e, _ = skills.Get(ctx, "issue-title")
	var now map[string]any
	_ = json.Unmarshal(e.Value(), &now)
	if now["digest"] != got.NewDigest || now["repaired_by"] != rec.ID {
		t.Fatalf("catalog: digest %v repaired_by %v, want %s %s", now["digest"], now["repaired_by"], got.NewDigest, rec.ID)
	}
	disk, _ := os.ReadFile(file)
	if !strings.Contains(string(disk), "{{ fetch.title }}") {
		t.Fatalf("not written back:\n%s", disk)
	}
	st, _ := b.JS.Stream(ctx, b.StreamRepair())
	info, _ := st.Info(ctx)
	if info.State.LastSeq != n+2 { // a park request per execution (one, however often delivered), the repair job and the approval
		t.Fatalf("%d messages on the repair stream, want %d", info.State.LastSeq, n+2)
	}
}

type stringerFunc func() string

func (f stringerFunc) String() string { return f() }
