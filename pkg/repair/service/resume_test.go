package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// Three steps: a tool with a side effect (it counts its calls), a compute block, and
// a step reading a key the compute block does not return under that name.
const threeSteps = `name: %s
description: fetches, shapes and posts an issue's title
repair: auto
steps:
  - id: fetch
    tool: count
  - id: shape
    compute: |
      result = {"title": fetch["title"]}
  - id: post
    tool: echo
    args:
      text: "{{ shape.titel }}"
outputs:
  posted: "{{ post.text }}"
`

// rewriter is a repairer that proposes fixed replacements in skill.yaml.
type rewriter []string // old, new, old, new, ...

func (rewriter) Name() string { return "rewriter" }

func (r rewriter) Propose(_ context.Context, _ *repair.Diagnosis, files repair.Files) (string, string, error) {
	after := files.Clone()
	for i := 0; i+1 < len(r); i += 2 {
		after["skill.yaml"] = strings.Replace(after["skill.yaml"], r[i], r[i+1], 1)
	}
	return repair.Diff(files, after), "rewritten", nil
}

// completions reads the execution.completed event of each execution.
func (f *fixture) completions(ids []string) map[string]events.ExecutionCompleted {
	f.t.Helper()
	st, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]events.ExecutionCompleted{}
	for _, id := range ids {
		m, err := st.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(id, events.TypeExecutionCompleted))
		if err != nil {
			continue
		}
		var d events.ExecutionCompleted
		e, err := bus.DecodeFast(bus.FromNATS(&nats.Msg{Header: m.Header, Data: m.Data}))
		if err == nil {
			err = json.Unmarshal(e.Data, &d)
		}
		if err != nil {
			f.t.Fatal(err)
		}
		out[id] = d
	}
	return out
}

// repairedRuns runs n executions of a three-step skill whose last step fails
// repairably, lets the repair (auto) apply, and returns the executions' completions
// and the repair.
func repairedRuns(t *testing.T, name string, n int, repairers []repair.Repairer) (*fixture, map[string]events.ExecutionCompleted, *service.Record) {
	f := setupWith(t, map[string]string{name: fmt.Sprintf(threeSteps, name)}, repairers)
	ids := f.run(name, n)
	var done map[string]events.ExecutionCompleted
	f.eventually("every execution completed", func() (bool, string) {
		done = f.completions(ids)
		return len(done) == n, fmt.Sprintf("%d of %d", len(done), n)
	})
	_, counts := f.outcomes(ids)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Fatalf("%s: %d outcomes", id, counts[id])
		}
	}
	list, err := f.act.List(f.ctx, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("repairs: %+v %v", list, err)
	}
	rec, _, err := service.Load(f.ctx, f.kv, list[0].ID)
	if err != nil || rec.Status != service.StatusApplied {
		t.Fatalf("repair: %+v %v", rec, err)
	}
	for id, d := range done {
		if d.Outputs["posted"] != "Fix the build" || d.RepairID != rec.ID || d.Digest != rec.NewDigest || d.Version != rec.NewVersion {
			t.Fatalf("%s: outputs %v, repair %q digest %q version %q; want repair %s on %s (%s)", id, d.Outputs, d.RepairID, d.Digest, d.Version, rec.ID, rec.NewDigest, rec.NewVersion)
		}
	}
	return f, done, rec
}

// resumed returns which steps of a completion's log were taken from checkpoints.
func resumed(t *testing.T, d events.ExecutionCompleted) map[string]bool {
	t.Helper()
	var l workflow.Log
	if err := json.Unmarshal(d.Log, &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range l.Steps {
		if s.Status != workflow.StatusCompleted {
			t.Fatalf("%s: step %s %s", d.ExecutionID, s.ID, s.Status)
		}
		out[s.ID] = s.Resumed
	}
	return out
}

// A repair of the last step: released executions resume from the first step's
// checkpoint (its side effect is not repeated) and run the repaired step on the new
// version; their outcome names the repair and the version.
func TestRepairedRunResumesFromCheckpoints(t *testing.T) {
	t.Parallel()
	const n = 6
	f, done, _ := repairedRuns(t, "three", n, nil)
	if got := f.fetches.Load(); got != n {
		t.Fatalf("the first step ran %d times for %d executions", got, n)
	}
	for _, d := range done {
		if got := resumed(t, d); !got["fetch"] || got["shape"] || got["post"] {
			t.Fatalf("%s: resumed steps %v, want only fetch", d.ExecutionID, got)
		}
	}
}

// A repair that changes the first step as well: every step runs again.
func TestRepairChangingTheFirstStepRunsItAgain(t *testing.T) {
	t.Parallel()
	const n = 4
	fix := rewriter{"    tool: count\n", "    tool: count\n    args:\n      fresh: true\n", "shape.titel", "shape.title"}
	f, done, _ := repairedRuns(t, "three", n, []repair.Repairer{fix})
	if got := f.fetches.Load(); got != 2*n {
		t.Fatalf("the first step ran %d times for %d executions, want twice each", got, n)
	}
	for _, d := range done {
		if got := resumed(t, d); got["fetch"] || got["shape"] || got["post"] {
			t.Fatalf("%s: resumed steps %v, want none", d.ExecutionID, got)
		}
	}
}

// Two faults, one after the other: the first repair's released executions resume
// from the first step and fail at the third; the second repair's resume from the
// first two. Each step with a side effect runs once per execution, although the first
// step's checkpoint was written by the first version and reused by the second.
func TestTwoRepairsInARowReuseCheckpoints(t *testing.T) {
	t.Parallel()
	const n = 4
	text := `name: chain
description: two misspelt keys, found one after the other
repair: auto
steps:
  - id: fetch
    tool: count
  - id: mark
    tool: count
    args:
      title: "{{ fetch.titel }}"
  - id: post
    tool: echo
    args:
      text: "{{ fetch.bodi }}"
outputs:
  posted: "{{ post.text }}"
`
	f := setupWith(t, map[string]string{"chain": text}, nil)
	ids := f.run("chain", n)
	var done map[string]events.ExecutionCompleted
	f.eventually("every execution completed", func() (bool, string) {
		done = f.completions(ids)
		return len(done) == n, fmt.Sprintf("%d of %d", len(done), n)
	})
	list, err := f.act.List(f.ctx, service.StatusApplied)
	if err != nil || len(list) != 2 {
		t.Fatalf("applied repairs: %+v %v", list, err)
	}
	second := list[0] // newest first
	if second.Name != "bodi" {
		t.Fatalf("repairs %+v", list)
	}
	if got := f.fetches.Load(); got != 2*n {
		t.Fatalf("the tool steps ran %d times for %d executions of two tool steps each", got, n)
	}
	for _, d := range done {
		if d.Outputs["posted"] != "it is red" || d.RepairID != second.ID || d.Digest != second.NewDigest {
			t.Fatalf("%s: outputs %v, repair %q on %q; want %s on %s", d.ExecutionID, d.Outputs, d.RepairID, d.Digest, second.ID, second.NewDigest)
		}
		if got := resumed(t, d); !got["fetch"] || !got["mark"] || got["post"] {
			t.Fatalf("%s: resumed steps %v, want fetch and mark", d.ExecutionID, got)
		}
	}
	if _, counts := f.outcomes(ids); len(counts) != n {
		t.Fatalf("outcomes %v", counts)
	} else {
		for id, c := range counts {
			if c != 1 {
				t.Fatalf("%s: %d outcomes", id, c)
			}
		}
	}
}
