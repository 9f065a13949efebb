package selector

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Recall sources, in Candidate.Source.
const (
	SourceForced   = "forced"   // invoked by name
	SourceRule     = "rule"     // the event type, or a trigger phrase in the text
	SourceLexical  = "lexical"  // the keyword index
	SourceSemantic = "semantic" // embeddings
	SourceLLM      = "llm"      // a chat model's recall
	SourceAlways   = "always"   // activation: always
)

// Strategies say how a skill is activated.
const (
	StrategySemantic = "semantic" // by score (the default)
	StrategyExplicit = "explicit" // only when invoked by name
	StrategyAlways   = "always"   // joins every plan of its trigger types
)

// ErrNoMatch means no skill was recalled, or none scored above the threshold.
var ErrNoMatch = errors.New("no skill matches")

// UnknownSkillError is an explicit invocation (subject or extension) of a skill the
// catalog does not hold.
// Suggest, if set, is the catalog's skill with the closest name.
type UnknownSkillError struct{ Name, Suggest string }

func (e *UnknownSkillError) Error() string {
	if e.Suggest != "" {
		return fmt.Sprintf("skill %q is not in the catalog; did you mean %s?", e.Name, e.Suggest)
	}
	return fmt.Sprintf("skill %q is not in the catalog", e.Name)
}

// ScoreWeights weigh the components of a candidate's score. They are the routing
// spec's weights and sum to 1.
type ScoreWeights struct {
	Intent   float64 `json:"intent"`
	Trigger  float64 `json:"trigger"`
	Success  float64 `json:"success"`
	Context  float64 `json:"context"`
	Cost     float64 `json:"cost"`
	Conflict float64 `json:"conflict"`
}

// DefaultScoreWeights: intent .40, trigger .20, success rate .15, context readiness
// .10, cost .10, conflict .05.
var DefaultScoreWeights = ScoreWeights{Intent: .40, Trigger: .20, Success: .15, Context: .10, Cost: .10, Conflict: .05}

// DefaultThreshold is the score a candidate needs to be selected.
const DefaultThreshold = 0.65

// Config configures a Selector. The zero value is the documented default.
type Config struct {
	// Weights of the score components; zero means DefaultScoreWeights.
	Weights ScoreWeights
	// Threshold a candidate's score must reach; 0 means DefaultThreshold.
	Threshold float64
	// MaxActive bounds the skills a plan selects by score or name (primary, parallel
	// partners and fallbacks); always-skills join on top. 0 means 3.
	MaxActive int
	// MaxParallel bounds a parallel group; 0 means 2.
	MaxParallel int
	// Generic is a skill appended to every fallback chain, if the catalog holds it.
	Generic string
	// Index weighs the fields of the keyword index; zero means DefaultWeights.
	Index Weights
	// Recall bounds the keyword index's hits per request; 0 means 10.
	Recall int
	// UnknownWeight, TypoDiscount and SynonymWeight tune the keyword index (see
	// Query).
	UnknownWeight, TypoDiscount, SynonymWeight float64
	// Feedback is the weight of pseudo-relevance feedback (Query.FeedbackWeight) on
	// every request: keyword hits are ordered again after the request is expanded
	// with the terms of its 10 best hits. 0 means on long requests only
	// (LongFeedback): on every request it helps catalogs of many near-alike skills
	// and hurts catalogs of distinct ones.
	Feedback float64
	// LongFeedback is the weight of feedback on requests of 8 distinct words or
	// more when Feedback is 0 (Query.LongFeedbackWeight); 0 means 0.2, negative
	// means none.
	LongFeedback float64
	// Relative is how much a keyword hit's BM25 relative to the best hit's lowers its
	// intent below the best hit's: intent = sure × (1 − Relative + Relative × BM25 /
	// best BM25), so hits keep the index's order. 0 means 0.5; negative means none.
	Relative float64
	// IntentFloor and IntentFull map the best keyword hit's evidence (its coverage of
	// the request, or its strength) to how sure the index is that the request is for
	// this catalog: at or below the floor 0, at or above full 1, linear between. 0
	// means 0.05 and 0.6.
	IntentFloor, IntentFull float64
	// Strength is how many perfectly rare matched terms make full lexical evidence
	// on their own, however many unknown words the request holds; 0 means 1.75,
	// negative means coverage alone counts.
	Strength float64
}

func (c Config) withDefaults() Config {
	if c.Weights == (ScoreWeights{}) {
		c.Weights = DefaultScoreWeights
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.MaxActive == 0 {
		c.MaxActive = 3
	}
	if c.MaxParallel == 0 {
		c.MaxParallel = 2
	}
	if c.Recall == 0 {
		c.Recall = 10
	}
	if c.Strength == 0 {
		c.Strength = 1.75
	}
	if c.IntentFloor == 0 {
		c.IntentFloor = 0.05
	}
	if c.IntentFull == 0 {
		c.IntentFull = 0.6
	}
	if c.Relative == 0 {
		c.Relative = 0.5
	} else if c.Relative < 0 {
		c.Relative = 0
	}
	return c
}

// Selector holds the routing view of a catalog (rules, trigger phrases and the
// keyword index) and decides activation plans. Put and Remove update it one skill at
// a time; it is safe for concurrent use.
type Selector struct {
	cfg Config
	idx *Index
	// fullReason is the reason of a candidate that passed when the plan is full.
	fullReason string

	mu     sync.RWMutex
	skills map[string]*entry // by NormalizeName
	byType map[string][]string
	// typesIn and typesEnding list byType's types by namespace (up to the last
	// dot) and by last token, for ClosestType
	typesIn, typesEnding map[string][]string
	patterns             map[string][]string // trigger patterns (with * or >) -> skills
	phrases              map[string][]phrase // first word -> phrases
	// maxPhrase is the most words a phrase has had (it never shrinks: a bound).
	maxPhrase int
	always    map[string]bool
}

type entry struct {
	s        *skill.Skill
	strategy string
	anti     []phrase // anti-triggers
	// What scoring and the plan read of s, kept here: a request reads them for
	// every candidate, and a Skill is spread over many cache lines.
	name, version, pool string
	cost                float64 // the cost component
	prio, costRank      int8
	costWeight          int8
	parallel            bool
	needs               bool // required workflow inputs or tools: readiness is not 1
}

func newEntry(s *skill.Skill) *entry {
	e := &entry{s: s, strategy: StrategyOf(s), name: s.Name, version: versionOf(s), pool: s.BasePool(),
		prio: int8(rank(s.Priority)), costRank: int8(costRank(s.CostHint)), costWeight: int8(costWeight(s.CostHint)),
		parallel: s.ParallelSafe, needs: len(s.RequiredTools) > 0}
	switch s.CostHint {
	case "low":
		e.cost = 1
	case "high":
		e.cost = 0
	default:
		e.cost = 0.5
	}
	if s.Workflow != nil {
		for _, in := range s.Workflow.Inputs {
			e.needs = e.needs || in.Required && in.Default == nil
		}
	}
	return e
}

type phrase struct {
	skill string
	text  string
	words []string
}

// New returns an empty Selector.
func New(cfg Config) *Selector {
	cfg = cfg.withDefaults()
	return &Selector{
		cfg: cfg, idx: NewIndex(cfg.Index),
		fullReason: "passed, but the plan already has maxActive " + strconv.Itoa(cfg.MaxActive) + " skills",
		skills:     map[string]*entry{}, byType: map[string][]string{}, patterns: map[string][]string{},
		typesIn: map[string][]string{}, typesEnding: map[string][]string{},
		phrases: map[string][]phrase{}, always: map[string]bool{},
	}
}

// StrategyOf is a skill's activation strategy: always when always: true, else the
// metadata field activation (semantic, explicit or always), else semantic.
func StrategyOf(s *skill.Skill) string {
	if s.Always {
		return StrategyAlways
	}
	if v, ok := s.Metadata["activation"].(string); ok {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case StrategyExplicit, StrategyAlways, StrategySemantic:
			return v
		}
	}
	return StrategySemantic
}

// FieldsOf is the text of a skill the keyword index holds.
func FieldsOf(s *skill.Skill) Fields {
	return Fields{
		Name:         s.Name,
		Description:  s.Description,
		Tags:         strings.Join(s.Tags, " . "),
		Triggers:     strings.Join(s.Triggers, " ") + " . " + strings.Join(s.TriggerPhrases, " . "),
		Capabilities: strings.Join(s.Capabilities, " . "),
		Examples:     strings.Join(s.Examples.Positive, " . "),
	}
}

// Put adds or replaces a skill. It reports false, doing nothing, when the selector
// already holds the same digest of it, marked invalid or not alike.
func (x *Selector) Put(s *skill.Skill) bool {
	key := skill.NormalizeName(s.Name)
	x.mu.RLock()
	old := x.skills[key]
	x.mu.RUnlock()
	if old != nil && s.Digest != "" && old.s.Digest == s.Digest && old.s.Invalid == s.Invalid {
		return false
	}
	e := newEntry(s)
	for _, a := range s.AntiTriggers {
		if w := phraseWords(a); len(w) > 0 {
			e.anti = append(e.anti, phrase{text: a, words: w})
		}
	}
	// The index keeps the entry, so a hit needs no look-up in the catalog.
	x.idx.put(key, FieldsOf(s), e)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unrule(key)
	x.skills[key] = e
	for _, t := range s.Triggers {
		if strings.ContainsAny(t, "*>") {
			x.patterns[t] = append(x.patterns[t], key)
		} else {
			if _, had := x.byType[t]; !had {
				ns, last := splitType(t)
				x.typesIn[ns] = append(x.typesIn[ns], t)
				x.typesEnding[last] = append(x.typesEnding[last], t)
			}
			x.byType[t] = append(x.byType[t], key)
		}
	}
	for _, p := range phrasesOf(s) {
		if w := phraseWords(p); len(w) > 0 {
			x.phrases[w[0]] = append(x.phrases[w[0]], phrase{skill: key, text: p, words: w})
			x.maxPhrase = max(x.maxPhrase, len(w))
		}
	}
	if e.strategy == StrategyAlways {
		x.always[key] = true
	}
	return true
}

// phrasesOf are the phrases of a skill found in request text: its examples.positive,
// its triggers that are not patterns (a type such as review or code-review is also
// a word or phrase) and its triggers that cannot be types.
func phrasesOf(s *skill.Skill) []string {
	out := make([]string, 0, len(s.Examples.Positive)+len(s.Triggers)+len(s.TriggerPhrases))
	out = append(out, s.Examples.Positive...)
	for _, t := range s.Triggers {
		if !strings.ContainsAny(t, "*>") {
			out = append(out, t)
		}
	}
	return append(out, s.TriggerPhrases...)
}

// Remove drops a skill.
func (x *Selector) Remove(name string) {
	key := skill.NormalizeName(name)
	x.idx.Remove(key)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unrule(key)
	delete(x.skills, key)
}

func drop(m map[string][]string, k, name string) {
	vs := m[k]
	out := vs[:0]
	for _, v := range vs {
		if v != name {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		delete(m, k)
	} else {
		m[k] = out
	}
}

func (x *Selector) unrule(key string) {
	old := x.skills[key]
	if old == nil {
		return
	}
	for _, t := range old.s.Triggers {
		drop(x.byType, t, key)
		drop(x.patterns, t, key)
		if _, still := x.byType[t]; !still && !strings.ContainsAny(t, "*>") {
			ns, last := splitType(t)
			drop(x.typesIn, ns, t)
			drop(x.typesEnding, last, t)
		}
	}
	for _, p := range phrasesOf(old.s) {
		if w := phraseWords(p); len(w) > 0 {
			ps := x.phrases[w[0]]
			out := ps[:0]
			for _, q := range ps {
				if q.skill != key {
					out = append(out, q)
				}
			}
			if len(out) == 0 {
				delete(x.phrases, w[0])
			} else {
				x.phrases[w[0]] = out
			}
		}
	}
	delete(x.always, key)
}

// Sync makes the selector hold exactly skills, updating only what changed (by
// digest). It returns how many skills were added, replaced or removed.
func (x *Selector) Sync(skills []*skill.Skill) int {
	n := 0
	keep := make(map[string]bool, len(skills))
	for _, s := range skills {
		keep[skill.NormalizeName(s.Name)] = true
		if x.Put(s) {
			n++
		}
	}
	x.mu.RLock()
	var gone []string
	for k := range x.skills {
		if !keep[k] {
			gone = append(gone, k)
		}
	}
	x.mu.RUnlock()
	for _, k := range gone {
		x.Remove(k)
		n++
	}
	return n
}

// Get returns a skill by name.
func (x *Selector) Get(name string) (*skill.Skill, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.skills[skill.NormalizeName(name)]
	if !ok {
		return nil, false
	}
	return e.s, true
}

// Skills returns every skill, by name.
func (x *Selector) Skills() []*skill.Skill {
	x.mu.RLock()
	out := make([]*skill.Skill, 0, len(x.skills))
	for _, e := range x.skills {
		out = append(out, e.s)
	}
	x.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ClosestType is the event type a skill triggers on that typ most likely
// misspells, or "": one of typ's namespace (the type up to its last dot) a
// typo's distance away, or else one with typ's last token whose namespace is a
// typo's distance from typ's. It looks only at types sharing a part of typ, so a
// stream of unknown types costs little.
func (x *Selector) ClosestType(typ string) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ns, last := splitType(typ)
	if c := skill.Closest(typ, x.typesIn[ns]); c != "" {
		return c
	}
	var same []string
	for _, t := range x.typesEnding[last] {
		if tns, _ := splitType(t); skill.Closest(ns, []string{tns}) != "" {
			same = append(same, t)
		}
	}
	return skill.Closest(typ, same)
}

// splitType splits an event type at its last dot: its namespace and last token.
func splitType(t string) (ns, last string) {
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[:i], t[i+1:]
	}
	return "", t
}

// MatchType reports whether a CloudEvent type matches a trigger: exactly, or as a
// NATS-style pattern where * is one dot-separated token and a final > is one or more.
func MatchType(pattern, typ string) bool {
	if !strings.ContainsAny(pattern, "*>") {
		return pattern == typ
	}
	ps, ts := strings.Split(pattern, "."), strings.Split(typ, ".")
	for i, p := range ps {
		if p == ">" && i == len(ps)-1 {
			return len(ts) > i
		}
		if i >= len(ts) || p != "*" && p != ts[i] {
			return false
		}
	}
	return len(ps) == len(ts)
}

// Recall is a skill recalled by a source outside the selector (embeddings, a chat
// model), with its similarity to the request normalised to [0, 1].
type Recall struct {
	Name       string
	Source     string
	Similarity float64
	Reason     string
}

// Request is what is routed.
type Request struct {
	// Type is the CloudEvent type; "" or RequestType for a plain text request.
	Type string `json:"type,omitempty"`
	// Skill is a skill invoked explicitly by the trigger's subject or extension.
	Skill string `json:"skill,omitempty"`
	// Text is the routing text, if any.
	Text string `json:"text,omitempty"`
	// Data is the trigger's data object, used to check that a skill's required
	// inputs can be filled.
	Data map[string]any `json:"-"`
	// Recalled are candidates from optional recall sources.
	Recalled []Recall `json:"-"`
}

// Env is what the selector asks about the running system; a nil func means "yes"
// or "no evidence".
type Env struct {
	// Success returns a skill version's successful and total terminal results.
	Success func(name, version string) (ok, total int)
	// PoolLive reports whether a live worker serves a pool.
	PoolLive func(pool string) bool
	// ToolServed reports whether a tool is served.
	ToolServed func(tool string) bool
	// Admit reports whether a skill takes this request (its filter, its rate
	// limit), and why, which joins the candidate's reason when not empty. It is
	// asked only about a skill that would otherwise join the plan (the generic
	// fallback included), never about one below the threshold or explicit-only. A
	// refused skill stays among the candidates, unselected; it joins no plan, not
	// even by name.
	Admit func(s *skill.Skill) (ok bool, why string)
}
