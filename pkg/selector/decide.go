package selector

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Components are a candidate's score components, each in [0, 1] except Conflict,
// which is 0 or -1.
type Components struct {
	Intent   float64 `json:"intent"`
	Trigger  float64 `json:"trigger"`
	Success  float64 `json:"success"`
	Context  float64 `json:"context"`
	Cost     float64 `json:"cost"`
	Conflict float64 `json:"conflict"`
	// Available is false when no live worker serves the skill's pool; the score is
	// then halved.
	Available bool `json:"available"`
}

// Candidate is one recalled skill and what the selector made of it.
type Candidate struct {
	Name    string       `json:"name"`
	Version string       `json:"version,omitempty"`
	Skill   *skill.Skill `json:"-"`
	// Source is the strongest recall source; Sources lists every one.
	Source     string     `json:"source"`
	Sources    []string   `json:"sources,omitempty"`
	Score      float64    `json:"score"`
	Components Components `json:"components"`
	Selected   bool       `json:"selected"`
	// Role is primary, parallel, fallback or always for a selected candidate.
	Role   string `json:"role,omitempty"`
	Reason string `json:"reason"`
	// Matched are the words or phrases that recalled it.
	Matched []string `json:"matched,omitempty"`
	// lex is the keyword index's score, which orders candidates of equal score.
	lex float64
	acc *acc // what recall made of it
}

// Decision is an activation plan and how it was reached.
type Decision struct {
	// Primary is the skill that runs first; "" when nothing passed the threshold.
	Primary string `json:"primary"`
	// Fallback is the chain tried, in order, when the primary fails for good.
	Fallback []string `json:"fallback"`
	// ParallelGroups are parallel_safe skills that may run together, at most
	// MaxParallel a group; the first group, holding the primary, runs at once as
	// concurrent jobs.
	ParallelGroups [][]string `json:"parallel_groups"`
	// Always are always-skills that join the plan, each as a job of its own.
	Always []string `json:"always,omitempty"`
	// EstimatedCost sums the selected skills' cost hints (low 1, medium 2, high 3).
	EstimatedCost int            `json:"estimated_cost"`
	Parameters    map[string]any `json:"parameters,omitempty"`
	Threshold     float64        `json:"threshold"`
	// Candidates are every recalled skill, best score first, selected or not.
	Candidates []Candidate `json:"candidates"`
}

// Candidate returns the candidate of a name, or nil.
func (d *Decision) Candidate(name string) *Candidate {
	for i := range d.Candidates {
		if d.Candidates[i].Name == name {
			return &d.Candidates[i]
		}
	}
	return nil
}

// KeptOut is the best candidate of a decision without a plan that scored at
// least the threshold: something other than its score kept it out (a filter, a
// rate limit, a debounce, an anti-trigger, inputs that refuse the request's
// data), which its Reason says. nil when none did, or when the decision has a
// plan.
func (d *Decision) KeptOut() *Candidate {
	if d.Primary != "" {
		return nil
	}
	for i := range d.Candidates {
		if c := &d.Candidates[i]; c.Score >= d.Threshold && !c.Selected && c.Source != SourceAlways {
			return c
		}
	}
	return nil
}

// Running is the skills that run at once: the first parallel group (or the primary
// alone), then the always-skills.
func (d *Decision) Running() []string {
	if d.Primary == "" {
		return nil
	}
	out := []string{d.Primary}
	if len(d.ParallelGroups) > 0 && len(d.ParallelGroups[0]) > 1 && d.ParallelGroups[0][0] == d.Primary {
		out = append([]string(nil), d.ParallelGroups[0]...)
	}
	return append(out, d.Always...)
}

type acc struct {
	key string // the skill's NormalizeName
	e   *entry
	// src are the sources that recalled it, in order, and more those past
	// len(src): a candidate rarely has more than one, and the set's accumulators
	// are pooled, so they are copied out for the Decision (appendSources).
	src      [4]string
	nsrc     int
	more     []string
	intent   float64
	trigger  float64
	matched  []string
	reasons  []string
	lex      float64 // the keyword index's BM25 score
	oneWord  bool    // a one-word phrase recalled it: see recallSet.oneWord
	subscrib bool    // a type rule on a trigger without text
	refused  bool    // Env.Admit refused it, or its inputs refuse the data
}

func (a *acc) add(source string, intent, trigger float64, reason string) {
	found := false
	for _, s := range a.src[:a.nsrc] {
		found = found || s == source
	}
	for _, s := range a.more {
		found = found || s == source
	}
	switch {
	case found:
	case a.nsrc < len(a.src):
		a.src[a.nsrc] = source
		a.nsrc++
	default:
		a.more = append(a.more, source)
	}
	a.intent = math.Max(a.intent, intent)
	a.trigger = math.Max(a.trigger, trigger)
	if reason != "" {
		a.reasons = append(a.reasons, reason)
	}
}

// sourceRank orders recall sources, strongest first.
func sourceRank(source string) int {
	switch source {
	case SourceForced:
		return 0
	case SourceRule:
		return 1
	case SourceLLM:
		return 2
	case SourceSemantic:
		return 3
	case SourceLexical:
		return 4
	case SourceAlways:
		return 5
	}
	return 6
}

// Select decides the activation plan of a request. A request naming a skill the
// catalog does not hold (Request.Skill) is an *UnknownSkillError; a request nothing
// passes returns a Decision with no Primary (and its candidates) and no error.
func (x *Selector) Select(req Request, env Env) (*Decision, error) {
	text := routeText(req.Text)
	// Phrases (triggers, examples, anti-triggers) are looked for outside the spans
	// the request quotes: those are what it works on.
	unq := unquoted(text)
	x.mu.RLock()
	defer x.mu.RUnlock()
	r := recallSets.Get().(*recallSet)
	r.x = x
	defer r.release()
	if err := r.forced(req); err != nil {
		return nil, err
	}
	forced := len(r.list) > 0
	typ := req.Type
	if typ == RequestType {
		typ = ""
	}
	var words []string
	if text != "" {
		r.read(text)
		words = r.phrase
		if unq != text {
			words = phraseWords(unq)
		}
	}
	if !forced {
		r.types(typ)
		if text != "" {
			r.phrases(words)
			r.lexical(text)
			r.oneWord()
			r.recalled(req.Recalled)
		}
		r.always(typ)
	}

	d := &Decision{Threshold: x.cfg.Threshold, Fallback: []string{}, ParallelGroups: [][]string{}, Candidates: make([]Candidate, 0, len(r.list))}
	if req.Text != "" {
		d.Parameters = map[string]any{"task": req.Text}
	}
	n := 0
	for _, a := range r.list {
		n += a.nsrc + len(a.more)
	}
	// The candidates' sources share one array: the accumulators are pooled.
	srcs := make([]string, 0, n)
	for _, a := range r.list {
		at := len(srcs)
		srcs = append(append(srcs, a.src[:a.nsrc]...), a.more...)
		d.Candidates = append(d.Candidates, x.score(a, &req, words, env, srcs[at:len(srcs):len(srcs)]))
	}
	sortCandidates(d.Candidates, req.Text == "")
	x.plan(d, forced, r.find, env.Admit, req.Data)
	for i := range d.Candidates {
		d.Candidates[i].acc = nil // pooled with r
	}
	return d, nil
}

// recallSet gathers the candidates of one request from each recall source. Sets
// are pooled (recallSets): nothing of a Decision points into one.
type recallSet struct {
	x     *Selector
	list  []*acc          // in the order recalled
	byKey map[string]*acc // once list is too long to search
	spare map[string]*acc // byKey of an earlier request, cleared
	// blocks hold the candidates, shortList each, so a candidate stays where it
	// is as more are added; the first used of them are in use.
	blocks [][]acc
	used   int
	// the request's Words, their terms ("" for a stop word) and its
	// phraseWords, read once for phrases and the keyword index
	words, terms, phrase []string
	hits                 []Hit // the keyword index's
}

var recallSets = sync.Pool{New: func() any { return new(recallSet) }}

// keptBlocks bounds the blocks a pooled set keeps: a request recalling
// hundreds of skills (subscribers of one type) does not make every set big.
const keptBlocks = 4

// release clears the set and returns it to the pool.
func (r *recallSet) release() {
	for i := range r.used {
		clear(r.blocks[i])
		r.blocks[i] = r.blocks[i][:0]
	}
	r.blocks = r.blocks[:min(len(r.blocks), keptBlocks)]
	r.used = 0
	clear(r.list)
	r.list = r.list[:0]
	if r.byKey != nil {
		clear(r.byKey)
		r.spare, r.byKey = r.byKey, nil
	}
	clear(r.words)
	clear(r.terms)
	clear(r.phrase)
	r.words, r.terms, r.phrase = r.words[:0], r.terms[:0], r.phrase[:0]
	clear(r.hits)
	r.hits = r.hits[:0]
	r.x = nil
	recallSets.Put(r)
}

// shortList is how many candidates are found by a search of the list: a request
// usually recalls about as many (Config.Recall), and a map would cost more.
const shortList = 16

// find returns the candidate of the skill with key, nil when none was recalled.
func (r *recallSet) find(key string) *acc {
	if r.byKey != nil {
		return r.byKey[key]
	}
	for _, a := range r.list {
		if a.key == key {
			return a
		}
	}
	return nil
}

// get returns the candidate of the skill with key, adding it on first use; nil when
// the catalog does not hold it.
func (r *recallSet) get(key string) *acc {
	if a := r.find(key); a != nil {
		return a
	}
	e := r.x.skills[key]
	if e == nil {
		return nil
	}
	return r.add(key, e)
}

// getEntry is get of a skill whose catalog entry is known.
func (r *recallSet) getEntry(key string, e *entry) *acc {
	if a := r.find(key); a != nil {
		return a
	}
	return r.add(key, e)
}

// add adds the candidate of a skill.
func (r *recallSet) add(key string, e *entry) *acc {
	if r.used == 0 || len(r.blocks[r.used-1]) == shortList {
		if r.used == len(r.blocks) {
			r.blocks = append(r.blocks, make([]acc, 0, shortList))
		}
		r.used++
	}
	b := &r.blocks[r.used-1]
	*b = append(*b, acc{key: key, e: e})
	a := &(*b)[len(*b)-1]
	r.list = append(r.list, a)
	if r.byKey != nil {
		r.byKey[key] = a
	} else if len(r.list) > shortList {
		r.byKey, r.spare = r.spare, nil
		if r.byKey == nil {
			r.byKey = make(map[string]*acc, 2*len(r.list))
		}
		for _, b := range r.list {
			r.byKey[b.key] = b
		}
	}
	return a
}

// read reads the request's text into words, terms and phrase.
func (r *recallSet) read(text string) {
	r.words = appendWords(r.words[:0], text)
	for _, w := range r.words {
		t, ok := cachedTerm(w)
		if !ok {
			t = ""
		}
		r.terms = append(r.terms, t)
		if !ok {
			t = w
		}
		r.phrase = append(r.phrase, t)
	}
}

// forced adds the skill invoked by name, else the skills the text names: explicit
// invocation wins over every other source.
func (r *recallSet) forced(req Request) error {
	if req.Skill != "" {
		a := r.get(skill.NormalizeName(req.Skill))
		if a == nil {
			return &UnknownSkillError{Name: req.Skill, Suggest: skill.Closest(req.Skill, slices.Collect(maps.Keys(r.x.skills)))}
		}
		a.add(SourceForced, 1, 1, "invoked by name")
		return nil
	}
	if req.Text != "" {
		for _, n := range Mentions(req.Text) {
			if a := r.get(skill.NormalizeName(n)); a != nil {
				a.add(SourceForced, 1, 1, "named in the text")
			}
		}
	}
	return nil
}

// types adds the skills subscribed to the event type, exactly or by pattern.
func (r *recallSet) types(typ string) {
	if typ == "" {
		return
	}
	for _, k := range r.x.byType[typ] {
		if a := r.get(k); a != nil {
			a.add(SourceRule, 1, 0.9, "trigger "+typ)
			a.subscrib = true
		}
	}
	for p, ks := range r.x.patterns {
		if !MatchType(p, typ) {
			continue
		}
		for _, k := range ks {
			if a := r.get(k); a != nil {
				a.add(SourceRule, 1, 0.9, "trigger "+p+" matches "+typ)
				a.subscrib = true
			}
		}
	}
}

// MaxRouteText is how much of a request's text is read to route it: its first
// 8 KiB, cut at a space (the longest of the ten thousand requests in the public
// and project sets is under 5 KiB). What a request asks for is said at its
// start; reading a megabyte of pasted log for it would cost seconds, under the
// lock that catalog updates wait on. The plan's task parameter keeps the whole
// text.
const MaxRouteText = 8 << 10

// routeText is the part of text a request is routed on (see MaxRouteText).
func routeText(text string) string {
	if len(text) <= MaxRouteText {
		return text
	}
	cut := text[:MaxRouteText]
	if i := strings.LastIndexAny(cut, " \t\n\r"); i > MaxRouteText/2 {
		return cut[:i]
	}
	// No space in the second half: cut at a rune boundary.
	for i := len(cut); i > len(cut)-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(cut[i-1]) {
			if utf8.FullRuneInString(cut[i-1:]) {
				return cut
			}
			return cut[:i-1]
		}
	}
	return cut
}

// phraseHit is where a phrase occurs in a request's words: words[from:to].
type phraseHit struct {
	p        *phrase
	from, to int
}

// maxPhraseHits bounds how often one phrase is read in a request: saying it a
// hundred times says no more than saying it once, and a long request that
// repeats one (a pasted log full of "error") keeps the phrases it says later.
const maxPhraseHits = 4

// phrases adds the skills whose trigger phrases occur in the text's words. A
// phrase found inside a longer phrase of another skill is that skill's, not its
// own ("sql" of a query writer inside "sql injection" of a security audit): the
// longer says more of what the request is about. It still counts as words.
func (r *recallSet) phrases(words []string) {
	var buf [8]phraseHit
	hits := buf[:0]
	var seen map[*phrase]int // hits of each phrase, once there are more than buf holds
	for i, w := range words {
		ps := r.x.phrases[w]
		for k := range ps {
			p := &ps[k]
			if len(words)-i < len(p.words) || !wordsAt(words, i, p.words) {
				continue
			}
			if len(hits) >= len(buf) && seen == nil {
				seen = make(map[*phrase]int, 2*len(hits))
				for _, h := range hits {
					seen[h.p]++
				}
			}
			n := 0
			if seen != nil {
				n = seen[p]
				seen[p]++
			} else {
				for _, h := range hits {
					if h.p == p {
						n++
					}
				}
			}
			if n < maxPhraseHits {
				hits = append(hits, phraseHit{p, i, i + len(p.words)})
			}
		}
	}
	for k, h := range hits {
		if inLonger(hits, k, r.x.maxPhrase) {
			continue
		}
		a := r.get(h.p.skill)
		if a == nil || slices.Contains(a.matched, h.p.text) {
			continue
		}
		if len(h.p.words) == 1 {
			// One word is evidence as a keyword hit is: its intent comes
			// from the index's ranking (oneWord), not full at once.
			a.add(SourceRule, 0, 0.9, fmt.Sprintf("phrase %q", h.p.text))
			a.oneWord = true
		} else {
			a.add(SourceRule, 1, 0.9, fmt.Sprintf("phrase %q", h.p.text))
		}
		a.matched = append(a.matched, h.p.text)
	}
}

// oneWord gives the skills a one-word phrase recalled their intent, after the
// keyword index has ranked the request: that of a keyword hit the index is sure
// of, 1 − Relative × (1 − BM25 / best BM25), or the skill's own keyword intent if
// higher. A word found as a trigger still counts for more than a word the index
// matched (the trigger component), but "plan my dinners, high protein" goes to
// the meal planner that holds three of its words, not to the skill whose trigger
// is "protein". A phrase of two words or more says more than one word does and
// keeps full intent. With no keyword hit at all, the word is all there is: 1.
func (r *recallSet) oneWord() {
	top := 0.0
	if len(r.hits) > 0 {
		top = r.hits[0].BM25
	}
	rel := r.x.cfg.Relative
	for _, a := range r.list {
		if !a.oneWord {
			continue
		}
		intent := 1.0
		if top > 0 {
			intent = 1 - rel*(1-a.lex/top)
		}
		a.intent = math.Max(a.intent, intent)
	}
}

// inLonger reports whether hits[k] lies inside a longer phrase of another skill.
// hits are in the order of where they start, and no phrase is longer than
// longest words, so only hits starting that far before it need looking at.
func inLonger(hits []phraseHit, k, longest int) bool {
	h := hits[k]
	inside := func(o phraseHit) bool {
		return o.p.skill != h.p.skill && o.from <= h.from && h.to <= o.to && o.to-o.from > h.to-h.from
	}
	for j := k - 1; j >= 0 && hits[j].from >= h.to-longest; j-- {
		if inside(hits[j]) {
			return true
		}
	}
	for j := k + 1; j < len(hits) && hits[j].from == h.from; j++ {
		if inside(hits[j]) {
			return true
		}
	}
	return false
}

// lexical adds the keyword index's hits. Their BM25 scores order them: a hit's
// intent is its BM25 relative to the best hit's, times how sure the best hit is
// that the request is about this catalog at all (its share of the request's weight,
// or its strength, mapped from IntentFloor to IntentFull).
func (r *recallSet) lexical(text string) {
	cfg := r.x.cfg
	hits, evd := r.x.idx.searchInto(r.hits[:0], text, r.words, r.terms, Query{K: cfg.Recall, UnknownWeight: cfg.UnknownWeight, TypoDiscount: cfg.TypoDiscount,
		SynonymWeight: cfg.SynonymWeight, FeedbackWeight: cfg.Feedback,
		LongFeedbackWeight: cfg.LongFeedback})
	r.hits = hits
	if len(hits) == 0 {
		return
	}
	top := hits[0]
	// How sure the index is that the request is for this catalog is a question
	// about the catalog, not the top hit: the hit that matches most of the request
	// may rank below one that matches a pair of its words or a synonym.
	ev := evd.Coverage
	if cfg.Strength > 0 {
		ev = math.Max(ev, math.Min(1, evd.Strength/cfg.Strength))
	}
	sure := clamp01((ev - cfg.IntentFloor) / (cfg.IntentFull - cfg.IntentFloor))
	// The hits are of distinct skills: when no other source recalled one
	// before, none needs looking for.
	fresh := len(r.list) == 0
	for _, h := range hits {
		var a *acc
		if e, ok := h.ref.(*entry); ok && fresh {
			a = r.add(h.Name, e)
		} else if ok {
			a = r.getEntry(h.Name, e)
		} else {
			a = r.get(h.Name)
		}
		if a == nil {
			continue
		}
		rel := h.BM25 / top.BM25
		a.add(SourceLexical, sure*(1-cfg.Relative+cfg.Relative*rel), 0.6, "")
		a.lex = h.BM25
		if a.matched == nil {
			a.matched = h.Matched // capped: an append copies
		} else {
			a.matched = append(a.matched, h.Matched...)
		}
	}
}

// recalled adds what the optional recallers (embeddings, a chat model) found.
func (r *recallSet) recalled(rs []Recall) {
	for _, rc := range rs {
		if a := r.get(skill.NormalizeName(rc.Name)); a != nil {
			a.add(rc.Source, clamp01(rc.Similarity), 0.6, rc.Reason)
		}
	}
}

// always adds the always-skills of this trigger type (or of every type).
func (r *recallSet) always(typ string) {
	for k := range r.x.always {
		e := r.x.skills[k]
		if len(e.s.Triggers) == 0 || typ != "" && matchesAny(e.s.Triggers, typ) {
			if a := r.get(k); a != nil {
				a.add(SourceAlways, a.intent, a.trigger, "activation: always")
			}
		}
	}
}

// sortCandidates orders candidates best first. With text, the best score goes first.
// Without (byPriority), every candidate is a subscriber of the type and the authors'
// priority goes first; the score breaks ties. Then priority, cost and name.
func sortCandidates(cs []Candidate, byPriority bool) {
	sort.Sort(candidateOrder{cs, byPriority})
}

// candidateOrder sorts candidates in place: a Candidate is too big to copy
// for every comparison.
type candidateOrder struct {
	cs         []Candidate
	byPriority bool
}

func (o candidateOrder) Len() int      { return len(o.cs) }
func (o candidateOrder) Swap(i, j int) { o.cs[i], o.cs[j] = o.cs[j], o.cs[i] }
func (o candidateOrder) Less(i, j int) bool {
	a, b := &o.cs[i], &o.cs[j]
	pa, pb := a.acc.e.prio, b.acc.e.prio
	if o.byPriority && pa != pb {
		return pa < pb
	}
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.lex != b.lex {
		return a.lex > b.lex
	}
	if pa != pb {
		return pa < pb
	}
	if ca, cb := a.acc.e.costRank, b.acc.e.costRank; ca != cb {
		return ca < cb
	}
	return a.Name < b.Name
}

func wordsAt(words []string, i int, p []string) bool {
	for j := range p {
		if words[i+j] != p[j] {
			return false
		}
	}
	return true
}

func matchesAny(patterns []string, typ string) bool {
	for _, p := range patterns {
		if MatchType(p, typ) {
			return true
		}
	}
	return false
}

func clamp01(f float64) float64 { return math.Max(0, math.Min(1, f)) }

func (x *Selector) score(a *acc, req *Request, words []string, env Env, sources []string) Candidate {
	e := a.e
	w := x.cfg.Weights
	c := Components{Intent: a.intent, Trigger: a.trigger, Available: true, Context: 1, Cost: e.cost}
	var reasons []string
	// Success rate: Laplace-smoothed, so no evidence is the prior 0.5.
	ok, total := 0, 0
	if env.Success != nil {
		ok, total = env.Success(e.name, e.version)
	}
	c.Success = (float64(ok) + 1) / (float64(total) + 2)
	if e.needs {
		c.Context = readiness(e.s, req, env)
	}
	for _, anti := range e.anti {
		if containsPhrase(words, anti.words) {
			c.Conflict = -1
			reasons = append(reasons, fmt.Sprintf("anti-trigger %q in the text: not chosen by score", anti.text))
			break
		}
	}
	total64 := w.Intent*c.Intent + w.Trigger*c.Trigger + w.Success*c.Success + w.Context*c.Context + w.Cost*c.Cost + w.Conflict*c.Conflict
	if env.PoolLive != nil && !env.PoolLive(e.pool) { // a solo pool is served by the workers of its base pool
		c.Available = false
		total64 *= 0.5
		reasons = append(reasons, fmt.Sprintf("no live worker serves pool %s (score halved)", e.pool))
	}
	if e.s.Invalid != "" {
		// "; " separates a reason's parts: the error's own become ", ".
		reasons = append(reasons, InvalidPrefix+strings.ReplaceAll(e.s.Invalid, "; ", ", "))
	}
	src := sources[0]
	for _, so := range sources[1:] {
		if sourceRank(so) < sourceRank(src) {
			src = so
		}
	}
	return Candidate{
		Name: e.name, Version: e.version, Skill: e.s, Source: src, Sources: sources,
		Score: round3(clamp01(total64)), Components: roundC(c), Matched: a.matched, lex: a.lex, acc: a,
		Reason: strings.Join(append(a.reasons, reasons...), "; "),
	}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func roundC(c Components) Components {
	c.Intent, c.Success, c.Context = round3(c.Intent), round3(c.Success), round3(c.Context)
	return c
}

func versionOf(s *skill.Skill) string {
	if s.Version != "" {
		return s.Version
	}
	if len(s.Digest) > 12 {
		return s.Digest[:12]
	}
	return s.Digest
}

// readiness is the share of a skill's needs the request meets: required workflow
// inputs without a default present in the trigger's data, and required tools served.
func readiness(s *skill.Skill, req *Request, env Env) float64 {
	need, have := 0, 0
	if s.Workflow != nil {
		for _, in := range s.Workflow.Inputs {
			if !in.Required || in.Default != nil {
				continue
			}
			need++
			if _, ok := req.Data[in.Name]; ok {
				have++
			}
		}
	}
	for _, t := range s.RequiredTools {
		need++
		if env.ToolServed == nil || env.ToolServed(t) {
			have++
		}
	}
	if need == 0 {
		return 1
	}
	return float64(have) / float64(need)
}

// plan chooses among the scored candidates. admit (Env.Admit) is asked only about
// a candidate that would otherwise join the plan, so a filter speaks only where
// it decides.
// data is the request's data: a skill that only its words recalled joins no plan
// when its inputs would refuse data's fields (Skill.RefusesFields), since its run
// would fail at once. A skill subscribed to the type or named keeps its place:
// its author chose that data, and a refusal is theirs to see in the dead letters.
func (x *Selector) plan(d *Decision, forced bool, cands func(key string) *acc, admit func(*skill.Skill) (bool, string), data map[string]any) {
	cfg := x.cfg
	refused := func(c *Candidate, s *skill.Skill) bool {
		if admit == nil {
			return false
		}
		ok, why := admit(s)
		if why != "" {
			c.Reason = join(c.Reason, why)
		}
		return !ok
	}
	var chosenBuf, alwaysBuf [16]int
	chosen, always := x.classify(d, forced, refused, data, chosenBuf[:0], alwaysBuf[:0])
	if len(chosen) > cfg.MaxActive {
		full := x.fullReason
		for _, i := range chosen[cfg.MaxActive:] {
			d.Candidates[i].Reason = join(d.Candidates[i].Reason, full)
		}
		chosen = chosen[:cfg.MaxActive]
	}
	if len(chosen) > 0 {
		admitted := always[:0]
		for _, i := range always {
			c := &d.Candidates[i]
			if a := c.acc; refused(c, a.e.s) {
				a.refused = true
				continue
			}
			admitted = append(admitted, i)
		}
		always = admitted
	}
	for _, i := range always {
		c := &d.Candidates[i]
		c.Selected, c.Role = true, "always"
		d.Always = append(d.Always, c.Name)
		d.EstimatedCost += costWeight(c.Skill.CostHint)
	}
	if len(chosen) == 0 {
		d.Always = nil // always-skills join plans; they do not make one
		d.EstimatedCost = 0
		for _, i := range always {
			d.Candidates[i].Selected, d.Candidates[i].Role = false, ""
			d.Candidates[i].Reason = join(d.Candidates[i].Reason, "no skill passed the threshold, so there is no plan to join")
		}
		return
	}
	lead := x.assignRoles(d, chosen)
	if g := cfg.Generic; g != "" {
		key := skill.NormalizeName(g)
		if e, ok := x.skills[key]; ok && !contains(d.Fallback, e.s.Name) && !contains(lead, e.s.Name) && !genericRefused(cands(key), e.s, admit, data) {
			d.Fallback = append(d.Fallback, e.s.Name)
		}
	}
	// Keep only groups that run together; single skills are in the chain already.
	groups := d.ParallelGroups[:0]
	for _, g := range d.ParallelGroups {
		if len(g) > 1 {
			groups = append(groups, g)
		}
	}
	d.ParallelGroups = groups
}

// classify sorts the candidates, best first, into those that join the plan
// (chosen: forced, subscribed or over the threshold, and admitted) and the
// always-skills, which are asked once there is a plan for them to join; every
// other candidate's reason says why it stays out.
// chosen and always are appended to.
func (x *Selector) classify(d *Decision, forced bool, refused func(*Candidate, *skill.Skill) bool, data map[string]any, chosen, always []int) ([]int, []int) {
	threshold := x.cfg.Threshold
	var belowBuf [32]int
	below := belowBuf[:0]
	for i := range d.Candidates {
		c := &d.Candidates[i]
		a := c.acc
		strategy := a.e.strategy
		// Always-skills are asked below, once there is a plan for them to join.
		joins := c.Source == SourceForced ||
			strategy != StrategyExplicit && !(strategy == StrategyAlways && !forced) &&
				(a.subscrib || c.Components.Conflict >= 0 && c.Score >= threshold)
		switch {
		case joins && !forced && !a.subscrib && data != nil && refusesData(c, data):
			a.refused = true
		case joins && refused(c, a.e.s):
			a.refused = true
		case c.Source == SourceForced:
			chosen = append(chosen, i)
		case strategy == StrategyAlways && !forced:
			always = append(always, i)
		case strategy == StrategyExplicit:
			c.Reason = join(c.Reason, "activation: explicit; runs only when invoked by name")
		case a.subscrib:
			chosen = append(chosen, i)
			c.Reason = join(c.Reason, "subscribed to the event type")
		case c.Components.Conflict < 0:
			// An anti-trigger in the text says the request is for another skill.
		case c.Score >= threshold:
			chosen = append(chosen, i)
		default:
			// Below the threshold, and its inputs would refuse the data too:
			// both say why it is out (a missing required input lowers the
			// score first, through readiness).
			if !forced && !a.subscrib && data != nil {
				refusesData(c, data)
			}
			below = append(below, i)
		}
	}
	belowThreshold(d.Candidates, below, threshold)
	return chosen, always
}

// InvalidPrefix starts the part of a candidate's reason that says its skill's
// files are invalid now, so that the version in the catalog, which runs, is its
// last good one (skill.Skill.Invalid follows).
const InvalidPrefix = "its files are invalid now, so its last good version runs: "

// RefusedPrefix starts the part of a candidate's reason that says its inputs
// would refuse the request's data.
const RefusedPrefix = "not for this request: "

// refusesData reports whether c's skill would refuse the request's data, and
// says why in its reason (RefusedPrefix and why).
func refusesData(c *Candidate, data map[string]any) bool {
	why := c.acc.e.s.RefusesFields(data)
	if why != "" {
		c.Reason = join(c.Reason, RefusedPrefix+why)
	}
	return why != ""
}

// belowThreshold adds to the reason of each candidate of below that its score
// is below the threshold. The reasons share one string: most candidates of a
// request are below it.
func belowThreshold(cs []Candidate, below []int, threshold float64) {
	if len(below) == 0 {
		return
	}
	var t [8]byte
	thr := strconv.AppendFloat(t[:0], threshold, 'f', 2, 64)
	var buf [1024]byte
	b := buf[:0]
	var e [32]int
	ends := e[:0]
	for _, i := range below {
		if r := cs[i].Reason; r != "" {
			b = append(append(b, r...), "; "...)
		}
		b = strconv.AppendFloat(append(b, "score "...), cs[i].Score, 'f', 3, 64)
		b = append(append(b, " below threshold "...), thr...)
		ends = append(ends, len(b))
	}
	all := string(b)
	start := 0
	for k, i := range below {
		cs[i].Reason = all[start:ends[k]]
		start = ends[k]
	}
}

// assignRoles makes the chosen candidates a plan: the first is the primary,
// parallel_safe neighbours run beside it in groups of at most MaxParallel, and
// the rest form the fallback chain in order. It returns the lead group.
func (x *Selector) assignRoles(d *Decision, chosen []int) (lead []string) {
	// The groups are runs of one array of the chosen names, in order.
	names := make([]string, len(chosen))
	groups := slices.Grow(d.ParallelGroups, len(chosen))
	open := -1 // where the parallel group being filled starts
	for k, i := range chosen {
		c := &d.Candidates[i]
		names[k] = c.Name
		if open >= 0 && (!c.acc.e.parallel || k-open == x.cfg.MaxParallel) {
			groups, open = append(groups, names[open:k:k]), -1
		}
		switch {
		case !c.acc.e.parallel:
			groups = append(groups, names[k:k+1:k+1])
		case open < 0:
			open = k
		}
	}
	if open >= 0 {
		groups = append(groups, names[open:])
	}
	d.ParallelGroups = groups
	d.Primary = d.Candidates[chosen[0]].Name
	lead = d.ParallelGroups[0]
	d.Fallback = slices.Grow(d.Fallback, len(chosen))
	var buf [32]byte
	for k, i := range chosen {
		c := &d.Candidates[i]
		c.Selected = true
		d.EstimatedCost += int(c.acc.e.costWeight)
		switch {
		case k == 0:
			c.Role = "primary"
			c.Reason = joinBytes(c.Reason, strconv.AppendFloat(append(buf[:0], "primary: best score "...), c.Score, 'f', 3, 64))
		case contains(lead, c.Name):
			c.Role = "parallel"
			c.Reason = join(c.Reason, "runs beside the primary: both are parallel_safe")
		default:
			c.Role = "fallback"
			d.Fallback = append(d.Fallback, c.Name)
			c.Reason = joinBytes(c.Reason, strconv.AppendInt(append(buf[:0], "fallback #"...), int64(len(d.Fallback)), 10))
		}
	}
	return lead
}

// genericRefused reports whether the generic skill s stays out of the fallback
// chain: refused as a candidate already (a), or now, by flow control or by its
// inputs, which would refuse the request's data as they would a candidate's.
func genericRefused(a *acc, s *skill.Skill, admit func(*skill.Skill) (bool, string), data map[string]any) bool {
	if a != nil && a.refused {
		return true
	}
	if data != nil && s.RefusesFields(data) != "" {
		return true
	}
	if admit == nil {
		return false
	}
	ok, _ := admit(s)
	return !ok
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// joinBytes is join of a text built in b, in one allocation.
func joinBytes(a string, b []byte) string {
	if a == "" {
		return string(b)
	}
	return a + "; " + string(b)
}

func costWeight(hint string) int {
	switch hint {
	case "low":
		return 1
	case "high":
		return 3
	default:
		return 2
	}
}

func rank(priority string) int {
	switch priority {
	case "high":
		return 0
	case "low":
		return 2
	default:
		return 1
	}
}

func costRank(cost string) int {
	switch cost {
	case "low":
		return 0
	case "high":
		return 2
	default:
		return 1
	}
}

// MarshalJSON writes Primary as null when nothing passed the threshold.
func (d *Decision) MarshalJSON() ([]byte, error) {
	type plain Decision
	var primary *string
	if d.Primary != "" {
		primary = &d.Primary
	}
	return json.Marshal(struct {
		Primary *string `json:"primary"`
		*plain
	}{primary, (*plain)(d)})
}
