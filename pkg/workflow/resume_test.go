package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// counter is a tool that counts its calls per step and echoes its args.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	keys  []string
}

func (c *counter) tool(name string) tool.Tool {
	return tool.Func(name, func(_ context.Context, call tool.Call) (any, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[call.Step]++
		c.keys = append(c.keys, call.IdempotencyKey)
		return call.Args, nil
	})
}

func (c *counter) n(step string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[step]
}

// A worker dies in the middle of a run (here: its context is cancelled while the
// second step runs); the job is delivered again and the run resumes after the last
// saved step without calling its tool again.
func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	var cnt counter
	ctx, crash := context.WithCancel(deadline(t))
	var crashes atomic.Int64
	dies := tool.Func("dies_once", func(ctx context.Context, c tool.Call) (any, error) {
		if crashes.Add(1) == 1 {
			crash()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return "second time lucky", nil
	})
	s := wf([]skill.Step{
		{ID: "create", Tool: "count", Args: map[string]any{"name": "{{ inputs.name }}"}},
		{ID: "skipped", Tool: "count", Condition: "False"},
		{ID: "flaky", Tool: "dies_once"},
		{ID: "report", Compute: "result = create.name + ': ' + flaky"},
	})
	s.Digest = "feedfacefeedfacefeedface"
	store := &workflow.MemStore{}
	e := newEngine(t, workflow.Config{Checkpoints: store}, cnt.tool("count"), dies)
	run := workflow.Run{ExecutionID: "ex1", Skill: s, Inputs: map[string]any{"name": "Ada"}, Attempt: 1}

	_, err := e.Execute(ctx, run)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v", err)
	}
	saved, _ := store.Load(context.Background(), "ex1")
	if d := cmp.Diff([]string{"create", "skipped"}, keys(saved)); d != "" {
		t.Fatalf("checkpoints after the crash (-want +got)\n%s", d)
	}
	if c := saved["create"]; c.Status != workflow.StatusCompleted || c.Attempt != 1 || c.Skill != "t@feedfacefeed" {
		t.Errorf("checkpoint %+v", c)
	}

	j := &journal{}
	run.Attempt, run.Observer = 2, j
	out, l, err := e.ExecuteLog(deadline(t), run)
	if err != nil {
		t.Fatal(err)
	}
	if out["report"] != "Ada: second time lucky" || cnt.n("create") != 1 {
		t.Errorf("out %v, create called %d times", out, cnt.n("create"))
	}
	want := []string{"resumed create completed", "resumed skipped skipped", "start flaky tool", "done flaky", "start report compute", "done report"}
	if d := cmp.Diff(want, j.lines); d != "" {
		t.Errorf("events (-want +got)\n%s", d)
	}
	if s := l.Steps[0]; !s.Resumed || s.Attempt != 1 || s.Result != `{"name":"Ada"}` || l.Steps[2].Attempt != 2 {
		t.Errorf("log %+v", l.Steps)
	}
}

func keys(m map[string]workflow.Checkpoint) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slicesSort(out)
	return out
}

// A pre-filled store: steps with checkpoints are not run, their results are bound
// again (a step that failed and continued keeps its error text), and an Observer
// that is not a ResumeObserver hears of them as skipped.
func TestResumeFromStore(t *testing.T) {
	t.Parallel()
	var cnt counter
	s := wf([]skill.Step{
		{ID: "a", Tool: "count", Output: "issue"},
		{ID: "b", Tool: "count", OnError: "continue"},
		{ID: "c", Tool: "count", Condition: "issue.key == 'A-1' and '❌' in b", Args: map[string]any{"key": "{{ issue.key }}"}},
	})
	store := &workflow.MemStore{}
	at := time.Date(2026, 1, 26, 13, 0, 0, 0, time.UTC)
	_ = store.Save(context.Background(), "ex", "a", workflow.Checkpoint{Status: workflow.StatusCompleted, Result: map[string]any{"key": "A-1"}, Attempt: 1, Started: at, Finished: at})
	_ = store.Save(context.Background(), "ex", "b", workflow.Checkpoint{Status: workflow.StatusContinued, Result: "❌ boom", Error: "boom", Class: failure.Retryable, Attempt: 1})
	rec := &recorder{}
	out, err := newEngine(t, workflow.Config{}, cnt.tool("count")).Execute(deadline(t), workflow.Run{
		ExecutionID: "ex", Skill: s, Attempt: 2, Observer: rec, Checkpoints: store,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cnt.n("a")+cnt.n("b") != 0 || cnt.n("c") != 1 {
		t.Errorf("calls %v", cnt.calls)
	}
	if d := cmp.Diff(map[string]any{"key": "A-1"}, out["c"]); d != "" {
		t.Errorf("c (-want +got)\n%s", d)
	}
	if d := cmp.Diff([]string{"skip a", "skip b", "start c tool", "done c"}, rec.lines); d != "" {
		t.Errorf("events (-want +got)\n%s", d)
	}
}

// Checkpoints written by another version of the skill are not trusted.
func TestResumeIgnoresOtherVersions(t *testing.T) {
	t.Parallel()
	var cnt counter
	s := wf([]skill.Step{{ID: "a", Tool: "count"}})
	s.Digest = "0123456789abcdef"
	store := &workflow.MemStore{}
	_ = store.Save(context.Background(), "ex", "a", workflow.Checkpoint{Status: workflow.StatusCompleted, Result: "old", Skill: "t@ffffffffffff"})
	out, err := newEngine(t, workflow.Config{Checkpoints: store}, cnt.tool("count")).Execute(deadline(t), workflow.Run{ExecutionID: "ex", Skill: s})
	if err != nil || cnt.n("a") != 1 || out["a"] == "old" {
		t.Fatalf("out %v err %v calls %d", out, err, cnt.n("a"))
	}
}

type failingStore struct{ workflow.MemStore }

func (f *failingStore) Save(context.Context, string, string, workflow.Checkpoint) error {
	return errors.New("kv: connection closed")
}

// A step whose checkpoint cannot be saved fails, retryably, and is not reported as
// completed: nothing depends on a result that is not durable.
func TestCheckpointSaveFails(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	_, err := newEngine(t, workflow.Config{Checkpoints: &failingStore{}}).Execute(deadline(t), workflow.Run{
		ExecutionID: "ex", Skill: wf([]skill.Step{{ID: "a", Tool: "echo"}, {ID: "b", Tool: "echo"}}), Observer: rec,
	})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "a" || failure.ClassOf(err) != failure.Retryable || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("err = %v (%s)", err, failure.ClassOf(err))
	}
	if d := cmp.Diff([]string{"start a tool", "fail a"}, rec.lines); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// Side-effecting calls carry <executionid>/<step>, and /<i> for loop items, the same
// on every attempt.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	var cnt counter
	s := wf([]skill.Step{
		{ID: "one", Tool: "count"},
		{ID: "each", Tool: "count", Loop: "{{ [1, 2] }}", LoopVar: "n", Args: map[string]any{"n": "{{ n }}"}},
	})
	if _, err := newEngine(t, workflow.Config{}, cnt.tool("count")).Execute(deadline(t), workflow.Run{ExecutionID: "ex9", Skill: s}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"ex9/one", "ex9/each/0", "ex9/each/1"}, cnt.keys); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
