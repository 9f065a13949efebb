package service_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// chatModel is a chat model speaking the OpenAI protocol that answers every request
// with answer.
func chatModel(t *testing.T, answer string) *llm.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "c1", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}},
		})
	}))
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Config{URL: srv.URL + "/v1", Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// trigger publishes one job of skill name with inputs, pinned to its current version.
func (f *fixture) trigger(name, id, inputs string) {
	f.t.Helper()
	if err := f.cat.Wait(f.ctx, func(c *catalog.Catalog) bool { _, ok := c.Get(name); return ok }); err != nil {
		f.t.Fatal(err)
	}
	s, _ := f.cat.Get(name)
	job := events.Job{ExecutionID: id, ActivationID: "act" + id, Skill: events.SkillRef{Name: name, Digest: s.Digest, Version: s.Version, Pool: skill.DefaultPool, ExecutionID: id},
		Trigger: events.TriggerRef{Subject: "test"}, Inputs: json.RawMessage(inputs)}
	b := f.b.Batch()
	b.PublishEvent(f.b.Subjects.Exec(skill.DefaultPool, name, job.ActivationID, events.StagePlan), bus.Event{ID: id + ".job", Source: "/test", Type: events.TypeJob, Meta: bus.Meta{CorrelationID: "c", ExecutionID: id}, Data: job})
	if err := b.Wait(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// held waits for the one repair to be proposed and checks that it waits for a
// person although the skill says repair: auto, saying why (want), with nothing
// published and the skill's file as it was.
func (f *fixture) held(name, file string, want ...string) *service.Record {
	f.t.Helper()
	var sum service.Summary
	f.eventually("the repair proposed", func() (bool, string) {
		list, err := f.act.List(f.ctx, "")
		if err != nil || len(list) != 1 {
			return false, fmt.Sprint(list, err)
		}
		sum = list[0]
		return sum.Status != service.StatusRequested, fmt.Sprintf("%+v", sum)
	})
	rec, _, err := service.Load(f.ctx, f.kv, sum.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	if rec.Status != service.StatusProposed || rec.Auto || rec.Patch == nil {
		f.t.Fatalf("the repair is %s (auto %v), want proposed and waiting for approval: %+v", rec.Status, rec.Auto, rec)
	}
	for _, w := range want {
		if !strings.Contains(rec.Patch.Summary, w) {
			f.t.Fatalf("the proposal's summary %q does not say %q", rec.Patch.Summary, w)
		}
	}
	if n := f.pub.calls.Load(); n != 0 {
		f.t.Fatalf("the patch was published %d times without approval", n)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, name, "skill.yaml")); err != nil || string(b) != file {
		f.t.Fatalf("skill.yaml changed on disk without approval (%v):\n%s", err, b)
	}
	return rec
}

// The reviewer's case: the trigger's payload is a string of JSON that the skill
// decodes itself, its key spelt with an escape. The repair that renames title to
// the sender's titel waits for a person although the skill says repair: auto.
func TestAutoRepairOfANameHiddenInAStringOfJSONWaitsForApproval(t *testing.T) {
	t.Parallel()
	const autofix = `name: autofix
description: posts what it was sent
repair: auto
inputs:
  - name: payload
steps:
  - id: fetch
    tool: mirror
    args:
      data: "{{ inputs.payload | fromjson }}"
  - id: post
    tool: echo
    args:
      text: "{{ fetch.title }}"
outputs:
  posted: "{{ post.text }}"
`
	f := setup(t, map[string]string{"autofix": autofix})
	f.trigger("autofix", "af1", `{"payload":"{\"t\\u0069tel\":\"x\"}"}`)
	rec := f.held("autofix", autofix, "titel", "taken from the trigger's data")
	if !strings.Contains(rec.Patch.Diff, "+      text: \"{{ fetch.titel }}\"") {
		t.Fatalf("the patch is not the rename: %s", rec.Patch.Diff)
	}
}

// A chat model's patch that widens the skill's permissions (a prompt in the data
// could ask for it) waits for a person although the skill says repair: auto.
func TestAutoRepairThatWidensPermissionsWaitsForApproval(t *testing.T) {
	t.Parallel()
	broken := fmt.Sprintf(brokenSkill, "widen", "\nrepair: auto")
	fixed := strings.Replace(strings.Replace(broken, "fetch.titel", "fetch.title", 1),
		"repair: auto\n", "repair: auto\npermissions:\n  network:\n    outbound: true\n", 1)
	diff := repair.Diff(repair.Files{"skill.yaml": broken}, repair.Files{"skill.yaml": fixed})
	f := setupWith(t, map[string]string{"widen": broken}, []repair.Repairer{&repair.Chat{Model: chatModel(t, diff)}})
	f.trigger("widen", "wd1", `{}`)
	rec := f.held("widen", broken, "permissions", "only a person may change")
	if _, err := f.act.Approve(f.ctx, rec.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the execution completed on the approved patch", func() (bool, string) {
		recs, _ := f.outcomes([]string{"wd1"})
		return len(recs) == 1, fmt.Sprint(recs)
	})
}
