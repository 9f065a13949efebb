package workflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// journal is an Observer with every optional capability. It takes no lock: the
// engine serialises Observer calls, and the race detector checks that it does.
type journal struct {
	lines []string
	heals []workflow.AutoHeal
	// on, if set, sees each line as it is written, inside the Observer call.
	on func(line string)
}

func (j *journal) add(format string, args ...any) {
	l := fmt.Sprintf(format, args...)
	j.lines = append(j.lines, l)
	if j.on != nil {
		j.on(l)
	}
}

func (j *journal) StepStarted(st *skill.Step, kind string) { j.add("start %s %s", st.ID, kind) }
func (j *journal) StepCompleted(st *skill.Step, _ any, err error, _ time.Duration) {
	if err != nil {
		j.add("continued %s", st.ID)
		return
	}
	j.add("done %s", st.ID)
}
func (j *journal) StepSkipped(st *skill.Step, reason string) { j.add("skip %s: %s", st.ID, reason) }
func (j *journal) StepFailed(st *skill.Step, err error, _ time.Duration) {
	j.add("fail %s", st.ID)
}
func (j *journal) StepResumed(st *skill.Step, c workflow.Checkpoint) {
	j.add("resumed %s %s", st.ID, c.Status)
}
func (j *journal) StepCached(st *skill.Step, hits int) { j.add("cached %s %d", st.ID, hits) }
func (j *journal) AutoHealTriggered(h workflow.AutoHeal) {
	j.heals = append(j.heals, h)
	j.add("heal %s by %s (%s, %s)", h.Step, h.HealStep, h.Action, h.FailureType)
}

// of returns the lines about one step, in order.
func (j *journal) of(id string) []string {
	var out []string
	for _, l := range j.lines {
		if f := strings.Fields(l); len(f) > 1 && strings.TrimSuffix(f[1], ":") == id {
			out = append(out, f[0])
		}
	}
	return out
}

// index returns the position of a line, or -1.
func (j *journal) index(line string) int { return slices.Index(j.lines, line) }

func newEngine(t testing.TB, cfg workflow.Config, extra ...tool.Tool) *workflow.Engine {
	t.Helper()
	set, err := tool.NewSet(append([]tool.Tool{tool.Echo(), tool.Noop()}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools = set
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e, err := workflow.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// deadline is a context that fails a test that would otherwise hang.
func deadline(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wait receives from ch or fails the test when ctx ends.
func wait[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func slicesSort(s []string) { slices.Sort(s) }
