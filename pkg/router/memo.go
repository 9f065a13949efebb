package router

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

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
// the same answer. A skill whose only flow control is a filter is asked again:
// the filter is a function of the trigger alone, and a decision whose filters
// answer as they did is the same decision. A decision that asked about a skill
// with any other flow control (a rate limit, a debounce, a batch, a queue
// priority, cancel_on) is not remembered: admitting it counts or folds the
// trigger.
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
	gen uint64 // the router's catalog generation of every decision in m (Router.gen)
	m   map[string]memoWays

	// seen holds a hash of questions asked once, each in the slot its hash
	// names: a question is remembered the second time it is asked, so that
	// triggers whose questions do not repeat (data whose keys vary) pay nothing
	// for the memo but a hash.
	seen [memoSeen]atomic.Uint64
}

const memoSeen = 256

var memoSeed = maphash.MakeSeed()

// again reports whether key was asked before, by the last question whose hash
// took its slot; it records key as asked.
func (m *decisions) again(key []byte) bool {
	h := maphash.Bytes(memoSeed, key) | 1 // never the empty slot's 0
	slot := &m.seen[h%memoSeen]
	if slot.Load() == h {
		return true
	}
	slot.Store(h)
	return false
}

// memoWays are the decisions remembered for one question, the latest first:
// several, for a question whose filters answer triggers one way or another, or
// whose success counts moved back and forth.
type memoWays [4]*memoEntry

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

// get returns a decision remembered for key at catalog generation gen whose
// every question env answers as it did then; nil when there is none, and then
// whether the decision the selector makes is to be remembered: the question
// was asked before. It asks env's Admit again about a skill with a filter
// alone, which notes the filter's verdict in verdicts as the selector's asking
// did: verdicts holds the notes of the decision returned, and none when it
// returns nil.
func (m *decisions) get(gen uint64, key []byte, env selector.Env, flows map[string]*compiledFlow, verdicts *flowVerdicts) (d *selector.Decision, remember bool) {
	var ways memoWays
	m.mu.RLock()
	if m.gen == gen {
		ways = m.m[string(key)]
	}
	m.mu.RUnlock()
	if ways[0] == nil {
		return nil, m.again(key)
	}
	for _, e := range ways {
		if e == nil {
			break
		}
		if e.answered(env, flows) {
			return e.d, false
		}
		*verdicts = flowVerdicts{}
	}
	return nil, true
}

// answered reports whether env answers every question e asked as it did.
func (e *memoEntry) answered(env selector.Env, flows map[string]*compiledFlow) bool {
	for _, a := range e.asked {
		switch a.kind {
		case askSuccess:
			if env.Success == nil {
				return false
			}
			if ok, total := env.Success(a.name, a.version); ok != a.ok || total != a.total {
				return false
			}
		case askLive:
			if env.PoolLive == nil || env.PoolLive(a.name) != a.live {
				return false
			}
		case askAdmit:
			if plainAdmit(a.skill, flows) {
				continue
			}
			if !filterOnly(a.skill) || env.Admit == nil {
				return false
			}
			if ok, why := env.Admit(a.skill); boolInt(ok) != a.ok || why != a.why {
				return false
			}
		}
	}
	return true
}

// put remembers d, the decision for key at catalog generation gen, reached by
// asking asked. A decision of an older generation than those remembered (its
// trigger was decided while the catalog changed) is not kept.
func (m *decisions) put(gen uint64, key []byte, d *selector.Decision, asked []asked) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case gen < m.gen:
		return
	case gen > m.gen || len(m.m) >= memoMax:
		m.gen, m.m = gen, nil
	}
	if m.m == nil {
		m.m = make(map[string]memoWays)
	}
	ways := m.m[string(key)]
	copy(ways[1:], ways[:len(ways)-1])
	ways[0] = &memoEntry{d: d, asked: asked}
	m.m[string(key)] = ways
}

// plainAdmit reports whether admit takes s for any trigger, saying nothing and
// changing nothing: s has no flow control.
func plainAdmit(s *skill.Skill, flows map[string]*compiledFlow) bool {
	return flows[s.Name] == nil && !hasFlow(s)
}

// filterOnly reports whether s's only flow control is a filter: admit's answer
// about s is the filter's verdict on the trigger, and it changes nothing but
// the trigger's own notes of verdicts.
func filterOnly(s *skill.Skill) bool {
	return s.Filter != "" && s.RateLimit == nil && s.Debounce == nil && s.Batch == nil && len(s.CancelOn) == 0 && s.QueuePriority == ""
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

// pure reports whether the decision can be taken again by a trigger that asks
// the same: admit was asked only about skills without flow control, which it
// took saying nothing, or with a filter alone, which get asks again; nothing of
// ToolServed, which the router does not ask.
func (ns *notes) pure(env selector.Env, flows map[string]*compiledFlow) bool {
	if ns.over || env.ToolServed != nil {
		return false
	}
	for _, a := range ns.asked[:ns.n] {
		if a.kind != askAdmit {
			continue
		}
		if plainAdmit(a.skill, flows) {
			if a.ok != 1 || a.why != "" {
				return false
			}
			continue
		}
		if !filterOnly(a.skill) {
			return false
		}
	}
	return true
}
