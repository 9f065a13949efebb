package worker

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/skillbus/skillbus/pkg/skill"
)

// The limits that count are the skill's current ones.
//
// A run runs the version its plan pinned, but the limits it waits on, its
// concurrency and its throttle, are those of its skill's current version (the
// catalog's latest): a limit changed while runs wait applies to them as to the
// runs that come after. A worker keeps the catalog's current versions by name
// (from the catalog watch it follows for solo pools: a map swapped whole, so a
// job pays one atomic load and one map lookup); a skill removed from the catalog
// keeps the limits of the version its runs were pinned to, as its runs keep
// their version. When a skill's concurrency changes, every worker releases as
// many of each of its gates' waiting runs, oldest first, as the new limits leave
// slots free (a raise frees slots no run ends to free), and a freed slot
// releases a run only while its gate holds fewer runs than the current limit (a
// lowered limit is met as the runs above it end, and the runs waiting keep their
// order). See throttle.go for a changed throttle.

// setCurrent records the catalog's current versions and returns the names of
// the skills whose concurrency or throttle changed since the last call (none on
// the first).
func (w *Worker) setCurrent(all []*skill.Skill) (conc, throttle []string) {
	m := make(map[string]*skill.Skill, len(all))
	for _, s := range all {
		m[s.Name] = s
	}
	old := w.current.Swap(&m)
	if old == nil {
		return nil, nil
	}
	for name, s := range m {
		o := (*old)[name]
		if o == nil || !slices.Equal(o.Concurrency, s.Concurrency) {
			conc = append(conc, name)
		}
		if o == nil || !sameThrottle(o.Throttle, s.Throttle) {
			throttle = append(throttle, name)
		}
	}
	return conc, throttle
}

func sameThrottle(a, b *skill.Throttle) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// flowSkill is the version whose limits j's run waits on: its skill's current
// version, or the version it was pinned to when the catalog has no such skill.
func (w *Worker) flowSkill(j *job) *skill.Skill {
	if m := w.current.Load(); m != nil {
		if s, ok := (*m)[j.data.Skill.Name]; ok {
			return s
		}
	}
	return j.skill
}

// keysRead reports whether the throttle key and the concurrency keys of fs,
// another version than j's own, read on j's run. Only runs of a version other
// than the current one ask: a version change is rare, a run of one cheap.
func (w *Worker) keysRead(j *job, fs *skill.Skill) bool {
	ev, err := keyEvent(j)
	if err != nil {
		return true // its own version fails the same way, saying so
	}
	if fs.Throttle != nil {
		if p := w.throttleProgOf(fs); p.err == nil && p.key != nil {
			if _, err := p.key.KeyOf(ev); err != nil {
				return false
			}
		}
	}
	if len(fs.Concurrency) > 0 {
		if p := w.gateProgsOf(fs); p.err == nil {
			for _, e := range p.entries {
				if _, err := e.key.KeyOf(ev); err != nil {
					return false
				}
			}
		}
	}
	return true
}

// noLimit is the limit of a gate whose skill's current version no longer has
// its concurrency entry: every waiting run is released.
const noLimit = 1 << 30

// currentLimit is the limit of gate in its skill's current version; ok is false
// when the catalog has no such skill (the waiting records' limit then counts).
func (w *Worker) currentLimit(gate string) (limit int, ok bool) {
	m := w.current.Load()
	if m == nil {
		return 0, false
	}
	// conc.<skill>.<entry>.<key hash>
	parts := strings.Split(gate, ".")
	if len(parts) != 4 {
		return 0, false
	}
	s, found := (*m)[parts[1]]
	if !found {
		return 0, false
	}
	i, err := strconv.Atoi(parts[2])
	if err != nil || i < 0 || i >= len(s.Concurrency) || s.Concurrency[i].Key == "" {
		return noLimit, true
	}
	return s.Concurrency[i].Limit, true
}

// gateLimit is the limit a gate's waiting runs wait under now. Callers hold
// w.gates.mu.
func (w *Worker) gateLimit(gate string) int {
	if l, ok := w.currentLimit(gate); ok {
		return l
	}
	return w.gates.limits[gate]
}

// limitsChanged releases, for each skill named whose concurrency changed, as
// many of each of its gates' waiting runs as the gate's current limit leaves
// slots free.
func (w *Worker) limitsChanged(names []string) {
	if len(names) == 0 {
		return
	}
	g := &w.gates
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ready || g.ctx == nil {
		return
	}
	for gate, ws := range g.waiting {
		parts := strings.Split(gate, ".")
		if len(parts) != 4 || !slices.Contains(names, parts[1]) {
			continue
		}
		for range min(len(ws), w.gateLimit(gate)-len(g.slots[gate])) {
			w.releaseNext(g.ctx, gate)
		}
	}
}

// syncCurrent records the catalog's current versions and applies changed limits
// to the runs waiting.
func (w *Worker) syncCurrent(ctx context.Context, all []*skill.Skill) {
	conc, throttle := w.setCurrent(all)
	w.limitsChanged(conc)
	w.throttlesChanged(ctx, throttle)
}
