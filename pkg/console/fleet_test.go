package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// The skills the console's tests run: one that echoes its text (a skill's output
// is hostile input: the tests give it a script tag), one that waits for a person,
// one that always fails (it is dead-lettered), one that needs a repair, one that
// sleeps for an hour, and one whose files are invalid (the skills page shows
// file:line).
var testSkills = map[string]string{
	"shout/skill.yaml": `name: shout
description: Says the text it is given, loudly.
version: 1.2.0
triggers:
  - com.example.shout
inputs:
  - name: text
    type: string
    required: true
steps:
  - id: say
    tool: echo
    args:
      message: "{{ inputs.text }}"
outputs:
  said: "{{ say.message }}"
`,
	"gated/skill.yaml": `name: gated
description: Ships the text, after a person approves.
version: 0.3.0
triggers:
  - com.example.ship
inputs:
  - name: text
    type: string
    required: true
steps:
  - id: ship
    tool: echo
    args:
      shipped: "{{ inputs.text }}"
confirmations:
  - step: ship
    message: "Ship {{ inputs.text }}?"
outputs:
  shipped: "{{ ship.shipped }}"
`,
	"fails/skill.yaml": `name: fails
description: Always fails.
version: 1.0.0
max_retries: 0
triggers:
  - com.example.fail
steps:
  - id: explode
    compute: |
      fail("the upstream said no")
`,
	"issue-title/skill.yaml": `name: issue-title
description: Posts an issue's title; reads a key its tool renamed (titel → title), so it needs a repair.
version: 1.0.0
triggers:
  - com.example.issue
steps:
  - id: fetch
    tool: fetch
  - id: post
    tool: echo
    args:
      text: "{{ fetch.titel }}"
outputs:
  posted: "{{ post.text }}"
`,
	"napper/skill.yaml": `name: napper
description: Says the text it is given after a long sleep.
version: 1.0.0
triggers:
  - com.example.nap
inputs:
  - name: text
    type: string
    required: true
steps:
  - id: nap
    sleep: 1h
  - id: say
    tool: echo
    args:
      message: "{{ inputs.text }}"
`,
	"broken/skill.yaml": `name: broken
description: Has a step with neither tool nor compute.
steps:
  - id: nothing
    foo: 1
`,
}

type fleet struct {
	t   *testing.T
	ctx context.Context
	b   *bus.Bus
	c   *Console
	srv *httptest.Server
}

// startFleet starts a real nats-server, a registry with testSkills, a router, a
// worker and a console (configured by edit) served by an httptest server.
func startFleet(t *testing.T, edit func(*Config)) *fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := natstest.Start(t)
	b := ns.Bus(t, bus.Config{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	for name, text := range testSkills {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(registry.Config{Bus: b, Roots: []string{dir}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	watch := func() *catalog.Catalog {
		cat, err := catalog.Watch(ctx, kv, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cat.Stop)
		return cat
	}
	r, err := router.New(router.Config{Bus: b, Catalog: watch(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	tools, err := tool.NewSet(tool.Echo(), tool.Func("fetch", func(context.Context, tool.Call) (any, error) {
		return map[string]any{"title": "Fix the build"}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := workflow.New(workflow.Config{Tools: tools, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cat := watch()
	w, err := worker.New(worker.Config{Bus: b, Catalog: cat, Engine: eng, Log: log, Name: "test-worker", Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	files, err := catalog.NewFiles(catalog.FilesConfig{Stores: b, Bucket: catalog.FilesBucket(b)})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := service.New(service.Config{Bus: b, Catalog: cat, Files: files, Publisher: reg,
		Validate: registry.RepairValidator(skill.LoadOptions{}), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Stop(context.Background()) })
	cfg := Config{Bus: b, Log: log, FlushInterval: 50 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &fleet{t: t, ctx: ctx, b: b, c: c, srv: srv}
}

// trigger publishes a trigger of type typ and returns the execution id of the skill
// expected to run it.
func (f *fleet) trigger(typ, skill, text string) string {
	f.t.Helper()
	id := uuid.NewString()
	data := `{"text":` + jsonString(text) + `}`
	act, err := client.New(f.b).Publish(f.ctx, client.Trigger{Type: typ, Source: "/console-test", ID: id, Data: []byte(data),
		Meta: bus.Meta{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return events.ExecutionID(act.Source, act.EventID, skill)
}

// state waits until the console's index has the run in state.
func (f *fleet) state(exec, state string) {
	f.t.Helper()
	natstest.Eventually(f.t, 30*time.Second, func() bool {
		r, ok := f.c.Index().Get(exec)
		return ok && r.State == state
	}, "run %s never reached %s: %+v", exec, state, func() Run { r, _ := f.c.Index().Get(exec); return r }())
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
