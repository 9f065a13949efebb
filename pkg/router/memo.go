package router

import (
	"slices"
	"sync"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A trigger without routing text — one whose type its subscribers take, or whose
// subject names its skill — asks the selector the same question as the trigger
// before it: which skills its type (or its name) recalls, scored by the data's
// keys, the skills' success rates and their pools' liveness, and admitted by
// their flow control. decisions remembers the selector's answer to such a
// question together with every question the selector asked of the running
// system (Env) to reach it; a later trigger that asks the same gets the same
// decision, without the selector, when every one of those questions still has
// the same answer. A decision that asked about a skill with flow control is not
// remembered: admitting such a skill depends on the trigger itself.
//
// A remembered decision is shared by the triggers it decides: nothing that reads
// a decision writes to it.

// memoMax bounds the decisions remembered; past it they are forgotten all at
// once (a fleet's text-less triggers ask few distinct questions).
const memoMax = 1024

// memoDataKeys bounds the data a remembered question may hold: its keys are part
// of the question.
const (
	memoDataKeys  = 16
	memoKeyLength = 512
)

type decisions struct {
	mu  sync.RWMutex
	rev uint64 // the catalog revision of every decision in m
	m   map[string]*memoEntry
}

// memoEntry is a remembered decision and what the selector asked to reach it.
type memoEntry struct {
	d     *selector.Decision
	asked []asked
}

// asked is one question the selector asked of Env, and its answer.
type asked struct {
	kind          askKind
	name, version string       // success: the skill version; live: the pool
	skill         *skill.Skill // admit
	ok, total     int          // success; ok is 1 for a skill admit took
	live          bool
	why           string // admit
}

type askKind uint8

const (
	askSuccess askKind = iota
	askLive
	askAdmit
)

// memoKey appends the question a trigger asks the selector to b: its skill, its
// type and the keys of its data, each length-prefixed. ok is false for a request
// that is not to be remembered: one with text or recalled candidates, or with
// data too large to be part of a key.
func memoKey(b []byte, req *selector.Request) (_ []byte, ok bool) {
	if req.Text != "" || len(req.Recalled) > 0 || len(req.Data) > memoDataKeys {
		return nil, false
	}
	var keysArr [memoDataKeys]string
	keys := keysArr[:0]
	for k := range req.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = appendPart(appendPart(b, req.Skill), req.Type)
	for _, k := range keys {
		b = appendPart(b, k)
	}
	return b, len(b) <= memoKeyLength
}

func appendPart(b []byte, s string) []byte {
	n := len(s)
	return append(append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n)), s...)
}

// get returns the decision remembered for key at catalog revision rev if env
// answers every question it asked as it did then; nil otherwise.
func (m *decisions) get(rev uint64, key []byte, env selector.Env, flows map[string]*compiledFlow) *selector.Decision {
	m.mu.RLock()
	var e *memoEntry
	if m.rev == rev {
		e = m.m[string(key)]
	}
	m.mu.RUnlock()
	if e == nil {
		return nil
	}
	for _, a := range e.asked {
		switch a.kind {
		case askSuccess:
			if env.Success == nil {
				return nil
			}
			if ok, total := env.Success(a.name, a.version); ok != a.ok || total != a.total {
				return nil
			}
		case askLive:
			if env.PoolLive == nil || env.PoolLive(a.name) != a.live {
				return nil
			}
		case askAdmit:
			if !plainAdmit(a.skill, flows) {
				return nil
			}
		}
	}
	return e.d
}

// put remembers d, the decision for key at catalog revision rev, reached by
// asking asked.
func (m *decisions) put(rev uint64, key []byte, d *selector.Decision, asked []asked) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev != rev || len(m.m) >= memoMax {
		m.rev, m.m = rev, nil
	}
	if m.m == nil {
		m.m = make(map[string]*memoEntry)
	}
	m.m[string(key)] = &memoEntry{d: d, asked: asked}
}

// plainAdmit reports whether admit takes s for any trigger, saying nothing and
// changing nothing: s has no flow control.
func plainAdmit(s *skill.Skill, flows map[string]*compiledFlow) bool {
	return flows[s.Name] == nil && !hasFlow(s)
}

// recording asks env, and notes each question and its answer in notes. Both
// live on their caller's stack, apart: anything on the heap holding env, or
// read from a struct holding it, would take there the trigger env.Admit reads.
type recording struct {
	env   selector.Env
	notes *notes
}

// notes are the questions a selector asked, and their answers.
type notes struct {
	asked [maxAsked]asked
	n     int
	over  bool // more were asked than it holds: not to be remembered
}

// maxAsked bounds the questions of a decision that is remembered: a text-less
// trigger's candidates are its type's subscribers, usually one.
const maxAsked = 8

func (r *recording) note(a asked) {
	ns := r.notes
	if ns.n == len(ns.asked) {
		ns.over = true
		return
	}
	ns.asked[ns.n] = a
	ns.n++
}

func (r *recording) success(name, version string) (int, int) {
	ok, total := r.env.Success(name, version)
	r.note(asked{kind: askSuccess, name: name, version: version, ok: ok, total: total})
	return ok, total
}

func (r *recording) poolLive(pool string) bool {
	live := r.env.PoolLive(pool)
	r.note(asked{kind: askLive, name: pool, live: live})
	return live
}

func (r *recording) admit(s *skill.Skill) (bool, string) {
	ok, why := r.env.Admit(s)
	r.note(asked{kind: askAdmit, name: s.Name, skill: s, ok: boolInt(ok), why: why})
	return ok, why
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pure reports whether the decision asked nothing whose answer depends on the
// trigger: admit only about skills without flow control, which it took
// saying nothing; nothing of ToolServed, which the router does not ask.
func (ns *notes) pure(env selector.Env, flows map[string]*compiledFlow) bool {
	if ns.over || env.ToolServed != nil {
		return false
	}
	for _, a := range ns.asked[:ns.n] {
		if a.kind == askAdmit && (a.ok != 1 || a.why != "" || !plainAdmit(a.skill, flows)) {
			return false
		}
	}
	return true
}
