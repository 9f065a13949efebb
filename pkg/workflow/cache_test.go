package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

type brokenCache struct{}

func (brokenCache) Get(context.Context, string) (any, bool, error) {
	return nil, false, errors.New("kv down")
}
func (brokenCache) Put(context.Context, string, any, time.Duration) error {
	return errors.New("kv down")
}

func TestCache(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 26, 13, 0, 0, 0, time.UTC)
	type setup struct {
		cnt   *counter
		store *workflow.MemStore
		e     *workflow.Engine
	}
	newSetup := func(t *testing.T, cache workflow.Cache) setup {
		var cnt counter
		store := &workflow.MemStore{Now: func() time.Time { return now }}
		if cache == nil {
			cache = store
		}
		return setup{&cnt, store, newEngine(t, workflow.Config{Cache: cache}, cnt.tool("get_app_config"))}
	}
	s := func(app string) *skill.Skill {
		return wf([]skill.Step{{ID: "get_config", Tool: "get_app_config", Cache: skill.Duration(300 * time.Second), Args: map[string]any{"app": app}}})
	}
	run := func(t *testing.T, su setup, sk *skill.Skill) (*journal, *workflow.Log) {
		j := &journal{}
		_, l, err := su.e.ExecuteLog(deadline(t), workflow.Run{ExecutionID: t.Name(), Skill: sk, Observer: j})
		if err != nil {
			t.Fatal(err)
		}
		return j, l
	}
	t.Run("a second run with the same args hits", func(t *testing.T) {
		su := newSetup(t, nil)
		run(t, su, s("shop"))
		j, l := run(t, su, s("shop"))
		if su.cnt.n("get_config") != 1 || j.index("cached get_config 1") < 0 || !l.Steps[0].Cached {
			t.Errorf("calls %d, events %v, log %+v", su.cnt.n("get_config"), j.lines, l.Steps[0])
		}
	})
	t.Run("other args miss", func(t *testing.T) {
		su := newSetup(t, nil)
		run(t, su, s("shop"))
		run(t, su, s("blog"))
		if su.cnt.n("get_config") != 2 {
			t.Errorf("calls %d", su.cnt.n("get_config"))
		}
	})
	t.Run("expired entries miss", func(t *testing.T) {
		su := newSetup(t, nil)
		run(t, su, s("shop"))
		su.store.Now = func() time.Time { return now.Add(301 * time.Second) }
		run(t, su, s("shop"))
		if su.cnt.n("get_config") != 2 {
			t.Errorf("calls %d", su.cnt.n("get_config"))
		}
	})
	t.Run("a broken cache only costs the call", func(t *testing.T) {
		su := newSetup(t, brokenCache{})
		run(t, su, s("shop"))
		run(t, su, s("shop"))
		if su.cnt.n("get_config") != 2 {
			t.Errorf("calls %d", su.cnt.n("get_config"))
		}
	})
	t.Run("steps without cache are not cached", func(t *testing.T) {
		su := newSetup(t, nil)
		sk := s("shop")
		sk.Workflow.Steps[0].Cache = 0
		run(t, su, sk)
		run(t, su, sk)
		if su.cnt.n("get_config") != 2 {
			t.Errorf("calls %d", su.cnt.n("get_config"))
		}
	})
}

func TestCacheKey(t *testing.T) {
	t.Parallel()
	a := workflow.CacheKey("s", "step", "tool", map[string]any{"x": int64(1), "y": []any{"a"}})
	b := workflow.CacheKey("s", "step", "tool", map[string]any{"y": []any{"a"}, "x": 1.0})
	if a != b || len(a) != 67 || a[:3] != "wf." {
		t.Errorf("keys %q %q", a, b)
	}
	for _, other := range []string{
		workflow.CacheKey("s2", "step", "tool", map[string]any{"x": 1, "y": []any{"a"}}),
		workflow.CacheKey("s", "step2", "tool", map[string]any{"x": 1, "y": []any{"a"}}),
		workflow.CacheKey("s", "step", "tool2", map[string]any{"x": 1, "y": []any{"a"}}),
		workflow.CacheKey("s", "step", "tool", map[string]any{"x": 2, "y": []any{"a"}}),
	} {
		if other == a {
			t.Errorf("%q collides", other)
		}
	}
	if k := workflow.CacheKey("s", "step", "tool", map[string]any{"f": func() {}}); k != "" {
		t.Errorf("unencodable args give %q", k)
	}
}
