package selector

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultK1 and DefaultB are the keyword index's BM25 parameters: k1 saturates a
// term's repeats, b normalises for document length.
const (
	DefaultK1 = 1.2
	DefaultB  = 0.75
)

// Fields is the text of one document of an Index, by field; Weights say how much a
// word in each field counts.
type Fields struct {
	Name, Description, Tags, Triggers, Capabilities, Examples string
}

// Weights are how often a word of each field counts as a repeat of the document's
// text (BM25F in its simplest form). The zero value means DefaultWeights.
type Weights struct {
	Name, Description, Tags, Triggers, Capabilities, Examples float32
	// K1 and B are BM25's parameters; 0 means DefaultK1 and DefaultB.
	K1, B float64
	// Bigram is how much a pair of adjacent terms (stop words skipped) counts,
	// relative to its field's weight: "object detection" in a request weighs more
	// in a skill that says "object detection" than in one that says "object" and
	// "detection" apart. 0 means pairs are not indexed (DefaultWeights has 0.5).
	Bigram float32
}

// DefaultWeights favour a skill's name and tags over its prose, and its prose over
// its examples, whose incidental words (tell, team, green) are weak evidence.
var DefaultWeights = Weights{Name: 3, Description: 1, Tags: 2, Triggers: 1, Capabilities: 1, Examples: 0.5, Bigram: 0.5}

// Index is a BM25 keyword index of skills, updated one skill at a time. Terms are
// stemmed (Terms); a query word the index does not hold is matched to an indexed
// term one edit away (a typo), at a discount. It is safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	w        Weights
	docs     []doc
	free     []int32
	byName   map[string]int32
	postings map[string]*plist
	words    map[string]*word    // surface words of the documents -> their term
	deletes  map[string][]string // a surface word with one letter deleted -> words
	totalLen float64
	n        int
	scratch  sync.Pool

	countReads bool         // tests: add each search's postings read to reads
	reads      atomic.Int64 // postings read by searches, when countReads
	exhaustive bool         // tests: every search scores every document matched
}

type doc struct {
	name  string
	ref   any      // what the index's owner keeps of it (Hit.ref)
	words []string // distinct surface words, for typo tolerance
	// nameLists are the postings of its name's terms, in order (nameSplit):
	// the index's own while the document holds the terms (nil for one it does not)
	nameLists []*plist
	terms     map[string]float32
	len       float32
	live      bool
}

type word struct {
	term string
	refs int
}

type posting struct {
	doc int32
	tf  float32
	len float32 // the document's length, kept here for locality
}

// plist is a term's postings, in document order (so a search can skip through
// them, prune.go), and, computed on first use, their BM25 term
// weights for the index's current average document length: a search then adds
// precomputed weights instead of working each one out. Put and Remove drop the
// weights of the terms they change; a changed average length makes the others
// stale, and the next search that reads one works it out again.
type plist struct {
	ps  []posting
	imp atomic.Pointer[impacts]
}

// impacts are the BM25 term weights (tf·(k1+1) / (tf + k1·(1−b+b·len/avg))) of a
// term's postings, in order, for one k and kl, and the highest of them: the most
// the term can add to a document's score, which a search prunes with. It is worked
// out with the weights, so it is exact for the index as it stands.
type impacts struct {
	k, kl float64
	part  []float64
	max   float64
	// at, for a term in one document in denseShare or more, is the place of its
	// posting plus one by document ordinal, 0 where the term is not: a pruned
	// search looks a common term up for a few documents without searching its
	// postings.
	at []int32
}

// denseShare is the share of the documents a term must be in for its weights to
// be kept by document too (impacts.at).
const denseShare = 8

// weightOf returns the weight of document d in im's postings, at p if they are
// not kept by document.
func (im *impacts) weightOf(d int32, p int32) float64 {
	if im.at != nil {
		return im.part[im.at[d]-1]
	}
	return im.part[p]
}

// find returns the place of document d in im's postings, which are kept by
// document; false when d is not in them.
func (im *impacts) find(d int32) (int32, bool) {
	if int(d) >= len(im.at) || im.at[d] == 0 {
		return 0, false
	}
	return im.at[d] - 1, true
}

// part is one posting's BM25 term weight.
func part(tf, len, k1, k, kl float64) float64 { return tf * (k1 + 1) / (tf + k + kl*len) }

// impacts returns the term weights of l's postings for the search's constants.
func (r *search) impacts(l *plist) *impacts {
	if im := l.imp.Load(); im != nil && im.k == r.k && im.kl == r.kl {
		return im
	}
	im := &impacts{k: r.k, kl: r.kl, part: make([]float64, len(l.ps))}
	for i, p := range l.ps {
		im.part[i] = part(float64(p.tf), float64(p.len), r.k1, r.k, r.kl)
		im.max = max(im.max, im.part[i])
	}
	if len(l.ps)*denseShare >= len(r.x.docs) {
		// A later document is not in the list, or the list would have changed.
		im.at = make([]int32, len(r.x.docs))
		for i, p := range l.ps {
			im.at[p.doc] = int32(i) + 1
		}
	}
	l.imp.Store(im)
	return im
}

func byDoc(p posting, d int32) int { return cmp.Compare(p.doc, d) }

// ps returns the postings of term t, nil when no document holds it; the caller
// holds x.mu.
func (x *Index) ps(t string) []posting {
	if l := x.postings[t]; l != nil {
		return l.ps
	}
	return nil
}

// NewIndex returns an empty index; w zero means DefaultWeights.
func NewIndex(w Weights) *Index {
	if w.Name == 0 && w.Description == 0 && w.Tags == 0 && w.Triggers == 0 && w.Capabilities == 0 && w.Examples == 0 {
		w.Name, w.Description, w.Tags, w.Triggers, w.Capabilities, w.Examples = DefaultWeights.Name, DefaultWeights.Description,
			DefaultWeights.Tags, DefaultWeights.Triggers, DefaultWeights.Capabilities, DefaultWeights.Examples
		if w.Bigram == 0 {
			w.Bigram = DefaultWeights.Bigram
		}
	}
	if w.K1 == 0 {
		w.K1 = DefaultK1
	}
	if w.B == 0 {
		w.B = DefaultB
	}
	return &Index{w: w, byName: map[string]int32{}, postings: map[string]*plist{}, words: map[string]*word{}, deletes: map[string][]string{}}
}

// analyse returns a document's term frequencies, its length, its surface words'
// terms and the terms of its name in order (for nameOrder).
func (x *Index) analyse(f Fields) (map[string]float32, float32, map[string]string, []string) {
	tf := map[string]float32{}
	surface := map[string]string{}
	var total float32
	add := func(text string, w float32) {
		if w == 0 || text == "" {
			return
		}
		ws := Words(text)
		inOrder := len(ws) // the words before the parts of joined ones
		prev := ""
		for i, wd := range appendParts(ws, text) {
			t, ok := Term(wd)
			if !ok {
				continue
			}
			tf[t] += w
			total += w
			surface[wd] = t
			if i < inOrder && x.w.Bigram > 0 {
				if prev != "" {
					tf[prev+" "+t] += w * x.w.Bigram
				}
				prev = t
			}
		}
	}
	parts, inOrder := nameSplit(f)
	add(f.Name+" "+strings.Join(parts, " "), x.w.Name)
	add(f.Description, x.w.Description)
	add(f.Tags, x.w.Tags)
	add(f.Triggers, x.w.Triggers)
	add(f.Capabilities, x.w.Capabilities)
	add(f.Examples, x.w.Examples)
	// The name's words were read first, so surface holds their terms (stop
	// words it leaves out).
	name := make([]string, 0, len(inOrder))
	for _, w := range inOrder {
		if t, ok := surface[w]; ok {
			name = append(name, t)
		}
	}
	return tf, total, surface, name
}

// nameSuffixes are words tool names are often glued to (weathertool, searchapi).
var nameSuffixes = map[string]bool{"tool": true, "tools": true, "api": true, "bot": true, "app": true, "helper": true,
	"assistant": true, "plugin": true, "finder": true, "search": true, "gpt": true, "ai": true, "hub": true, "kit": true}

// nameVerbs are verbs tool names often start with, glued to their object
// (getweather, findmovies, calcproduct) once a name is lower-cased.
var nameVerbs = map[string]bool{"get": true, "set": true, "find": true, "search": true, "list": true, "create": true,
	"delete": true, "update": true, "add": true, "remove": true, "buy": true, "book": true, "make": true, "play": true,
	"lookup": true, "look": true, "schedule": true, "reserve": true, "check": true, "send": true, "fetch": true,
	"calc": true, "calculate": true, "compute": true, "convert": true, "generate": true, "show": true, "open": true,
	"close": true, "start": true, "stop": true, "run": true, "read": true, "write": true, "post": true, "put": true,
	"query": true, "retrieve": true, "share": true, "request": true, "cancel": true, "edit": true, "view": true,
	"download": true, "upload": true, "translate": true, "predict": true, "detect": true, "analyze": true,
	"analyse": true, "summarize": true, "track": true, "order": true, "pay": true, "transfer": true, "move": true,
	"copy": true, "count": true, "sort": true, "filter": true, "parse": true, "validate": true, "verify": true}

// nameSplit splits the words of a skill's name that glue words together
// (stockprices, weathertool, findmovies) into words of the skill's own other text,
// common tool suffixes and verbs names start with: a name lower-cased from
// WeatherTool or FindMovies is then found by "weather" or "movies". It returns the
// parts, and the name's words in order with each glued one replaced by its parts
// (events-3-findevents: events 3 find events).
func nameSplit(f Fields) (parts, inOrder []string) {
	own := map[string]bool{}
	for _, t := range []string{f.Description, f.Tags, f.Triggers, f.Capabilities, f.Examples} {
		for _, w := range Words(t) {
			own[w] = true
		}
	}
	known := func(p string) bool { return len(p) >= 3 && (own[p] || nameSuffixes[p] || nameVerbs[p]) }
	for _, w := range Words(f.Name) {
		n := len(parts)
		parts = appendSplit(parts, w, own, known)
		if len(parts) > n {
			inOrder = append(inOrder, parts[n:]...)
		} else {
			inOrder = append(inOrder, w)
		}
	}
	return parts, inOrder
}

// appendSplit appends to parts the words a glued name word w splits into, if it
// does.
func appendSplit(parts []string, w string, own map[string]bool, known func(string) bool) []string {
	if len(w) < 6 || own[w] || !isASCIILetters(w) {
		return parts
	}
	if ps := segment(w, known); len(ps) > 1 {
		return append(parts, ps...)
	}
	for i := 3; i <= len(w)-2; i++ {
		a, b := w[:i], w[i:]
		if own[a] && own[b] && len(b) >= 3 || nameSuffixes[b] {
			return append(parts, a, b)
		}
	}
	return parts
}

// segment splits w wholly into known words, in as few as it can (at most four);
// nil when it cannot.
func segment(w string, known func(string) bool) []string {
	const most = 4
	// best[i] is the fewest parts w[:i] splits into, 0 when it does not.
	var best [64]int8
	var from [64]int8
	if len(w) >= len(best) {
		return nil
	}
	best[0] = 0
	for i := 1; i <= len(w); i++ {
		best[i] = -1
		for j := 0; j < i; j++ {
			if best[j] < 0 || int(best[j]) >= most || !known(w[j:i]) {
				continue
			}
			if best[i] < 0 || best[j]+1 < best[i] {
				best[i], from[i] = best[j]+1, int8(j)
			}
		}
	}
	if best[len(w)] <= 0 {
		return nil
	}
	parts := make([]string, best[len(w)])
	for i, k := len(w), len(parts)-1; i > 0; i, k = int(from[i]), k-1 {
		parts[k] = w[from[i]:i]
	}
	return parts
}

// Put adds or replaces the document of name.
func (x *Index) Put(name string, f Fields) { x.put(name, f, nil) }

// put is Put keeping ref beside the document, which its hits carry.
func (x *Index) put(name string, f Fields, ref any) {
	tf, total, surface, nameTerms := x.analyse(f)
	ws := make([]string, 0, len(surface))
	for w := range surface {
		ws = append(ws, w)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// A document replaced keeps its ordinal, and its postings of the terms it
	// keeps, which are updated where they are, not moved out and back.
	var keep map[string]float32
	if _, ok := x.byName[name]; ok {
		keep = tf
	}
	x.remove(name, keep)
	var id int32
	if k := len(x.free); k > 0 {
		id, x.free = x.free[k-1], x.free[:k-1]
		x.docs[id] = doc{name: name, ref: ref, words: ws, terms: tf, len: total, live: true}
	} else {
		id = int32(len(x.docs))
		x.docs = append(x.docs, doc{name: name, ref: ref, words: ws, terms: tf, len: total, live: true})
	}
	for w, t := range surface {
		if sw := x.words[w]; sw != nil {
			sw.refs++
		} else {
			x.words[w] = &word{term: t, refs: 1}
			x.addDeletes(w)
		}
	}
	x.byName[name] = id
	for t, n := range tf {
		l := x.postings[t]
		if l == nil {
			l = &plist{}
			x.postings[t] = l
		}
		// A new document's ordinal is the highest; a reused one goes in its place.
		p := posting{doc: id, tf: n, len: total}
		if i := len(l.ps); i == 0 || l.ps[i-1].doc < id {
			l.ps = append(l.ps, p)
		} else if i, kept := slices.BinarySearchFunc(l.ps, id, byDoc); kept {
			l.ps[i] = p
		} else {
			l.ps = slices.Insert(l.ps, i, p)
		}
		l.imp.Store(nil)
	}
	nl := make([]*plist, len(nameTerms))
	for i, t := range nameTerms {
		if _, ok := tf[t]; ok {
			nl[i] = x.postings[t]
		}
	}
	x.docs[id].nameLists = nl
	x.totalLen += float64(total)
	x.n++
}

// Remove drops the document of name, if any.
func (x *Index) Remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(name, nil)
}

// remove drops the document of name, but not its postings of the terms in keep,
// which the caller overwrites at once.
func (x *Index) remove(name string, keep map[string]float32) {
	id, ok := x.byName[name]
	if !ok {
		return
	}
	d := x.docs[id]
	for t := range d.terms {
		if _, ok := keep[t]; ok {
			continue
		}
		l := x.postings[t]
		ps := l.ps
		if i, ok := slices.BinarySearchFunc(ps, id, byDoc); ok {
			ps = slices.Delete(ps, i, i+1)
		}
		if len(ps) == 0 {
			delete(x.postings, t)
		} else {
			l.ps = ps
			l.imp.Store(nil)
		}
	}
	for _, w := range d.words {
		if sw := x.words[w]; sw != nil {
			if sw.refs--; sw.refs == 0 {
				delete(x.words, w)
				x.dropDeletes(w)
			}
		}
	}
	x.totalLen -= float64(d.len)
	x.n--
	x.docs[id] = doc{}
	x.free = append(x.free, id)
	delete(x.byName, name)
}

// minTypoLen is the shortest word matched to a word one edit away: shorter words
// have too many neighbours (tall, table).
const minTypoLen = 5

func deletions(t string, f func(string)) {
	if len(t) < minTypoLen || !isASCIILetters(t) {
		return
	}
	for i := 0; i < len(t); i++ {
		f(t[:i] + t[i+1:])
	}
}

func (x *Index) addDeletes(t string) {
	deletions(t, func(k string) { x.deletes[k] = append(x.deletes[k], t) })
}

func (x *Index) dropDeletes(t string) {
	deletions(t, func(k string) {
		ts := x.deletes[k]
		for i, u := range ts {
			if u == t {
				ts = append(ts[:i], ts[i+1:]...)
				break
			}
		}
		if len(ts) == 0 {
			delete(x.deletes, k)
		} else {
			x.deletes[k] = ts
		}
	})
}

// typoOf returns the term of the indexed word one edit from w (a letter missing,
// extra, different, or two swapped), preferring the term in most documents.
func (x *Index) typoOf(w string) string {
	best, bestDF := "", 0
	try := func(u string) {
		sw := x.words[u]
		if sw == nil {
			return
		}
		if df := len(x.ps(sw.term)); df > bestDF || df == bestDF && df > 0 && sw.term < best {
			best, bestDF = sw.term, df
		}
	}
	for _, u := range x.deletes[w] { // w is an indexed word with a letter missing
		try(u)
	}
	deletions(w, func(k string) {
		try(k)                           // w has a letter too many
		for _, u := range x.deletes[k] { // a letter differs, or two are swapped
			try(u)
		}
	})
	return best
}

// Hit is one document a query recalled.
type Hit struct {
	Name string
	// BM25 is the document's BM25 score for the query, with, among the best
	// hits, the bonus of the words of its name that the request says in the
	// name's order (nameOrderWeight).
	BM25 float64
	// Coverage is the share of the query's weight (its terms' IDF) the document
	// matches, each matched term counting at most once: 1 when every query term is in
	// the document, 0 when none is. Unknown query words count with UnknownWeight.
	// An adjacent pair of the query's words that the document also says side by
	// side adds pairEvidence of the pair's IDF to what it matches (at most 1 in all).
	Coverage float64
	// Strength is the matched query weight (IDF), pairs as in Coverage, as a share
	// of the highest IDF: 1 is one perfectly rare term, 2 two of them. Unlike
	// Coverage it does not drop when the request holds words no skill knows.
	Strength float64
	// Matched lists the document's terms the query matched, typo corrections as
	// "word~term".
	Matched []string
	ref     any // the document's, given to put
}

// Query holds options of a search.
type Query struct {
	// K bounds the hits returned, best BM25 first; 0 means 10.
	K int
	// UnknownWeight is how much a query word no document holds (even one edit away)
	// weighs in Coverage, as a share of the highest IDF; 0 means 0.35. A value
	// (valueWords: a name or a number no document holds) weighs nothing.
	UnknownWeight float64
	// TypoDiscount multiplies a term matched one edit away; 0 means 0.8.
	TypoDiscount float64
	// SynonymWeight multiplies a term a query word's synonym matched (a film found
	// as a movie); 0 means 0.3, negative means synonyms are not looked up.
	SynonymWeight float64
	// FeedbackWeight turns on pseudo-relevance feedback: the request is expanded
	// with the FeedbackTerms (0: 10) most distinctive terms of its FeedbackDocs
	// (0: 10) best documents, each weighing up to FeedbackWeight times its IDF, and
	// searched again. The expansion orders hits; it does not make a request more
	// surely for the catalog (Evidence). 0 means feedback on long requests only
	// (LongFeedbackWeight).
	FeedbackWeight float64
	FeedbackDocs   int
	FeedbackTerms  int
	// LongFeedbackWeight is the feedback weight of a long request, one of at least
	// LongRequest (0: 8) distinct words, stop words left out, when FeedbackWeight
	// is 0: a request that describes a situation at length spreads its words over
	// many skills, and the terms its best hits share tell them apart better. 0
	// means 0.2; negative means none.
	LongFeedbackWeight float64
	LongRequest        int

	exhaustive bool // tests: score every document matched, pruning none
}

// scratch is one search's working memory, pooled: a score and a touched bit per
// document ordinal, dense, so a search allocates no map.
type scratch struct {
	acc     []acc2
	seen    []uint64 // bit per document: in touched
	touched []int32  // the documents scored, in the order first found
	pair    []byte
	best    []top
	qts     []queryTerm
	// byTerm is the first place in qts of each term, once a request has more
	// than placeScan of them
	byTerm map[string]int32
	lists  []list
	// topPruned's
	ub, rest []float64
	order    []int
	cands    []int32
	heap     []ranked
	lead     []top
	pos      [][]int32
	// the request's words, and their terms ("" for a stop word)
	words, terms []string
	qtf          []int32 // termCounts'
	// at is the place in qts of each of the request's words, -1 for a stop
	// word; syns are the synonyms addSynonyms added, by the place of their word's
	// term in qts
	at    []int32
	syns  []synOf
	seq   []int32    // nameOrder's: the places in qts of the words found
	held  []held     // nameOrder's: the postings the words found stand for
	ends  []int32    // nameOrder's: a name's terms' places in held, -1 for none
	names [][]*plist // nameOrder's: the best documents' nameLists
}

// held is a postings list the request's words found stand for (their own or a
// synonym's): the first and the last place in nameOrder's seq of a word standing
// for it, and its IDF as the word at each place counts it (idfOf).
type held struct {
	l                 *plist
	first, last       int32
	idfFirst, idfLast float64
}

type synOf struct {
	qt int32
	l  *plist
}

// list is a term whose postings add to the scores of a search: the request's own
// (qi its place among the query's terms), a synonym's or a pair's.
type list struct {
	l  *plist
	w  float64
	qi int // -1: a synonym or a pair, which does not count in coverage
	// pair: an adjacent pair of the request's words, which counts in the
	// documents' evidence (acc2.pair)
	pair bool
}

// acc2 is what a search found of one document: its score, how much of the
// request's own weight it covers, how much its pairs add to that as evidence
// (pairEvidence), and which of the request's terms it holds.
type acc2 struct {
	score, cover, pair float64
	matched            uint64 // bit i: the i-th query term (i < 64)
}

type queryTerm struct {
	label, term string
	disc, idf   float64
	l           *plist // the postings of term; nil when no document holds it
	syn         bool   // term is a synonym of the word, which no document holds
}

// Evidence is how surely a request is for the catalog: the best Coverage and
// Strength among the hits of the request's own words, before any feedback.
type Evidence struct{ Coverage, Strength float64 }

// SearchEvidence returns the documents matching text, best BM25 first, with the
// request's Evidence.
func (x *Index) SearchEvidence(text string, q Query) ([]Hit, Evidence) {
	return x.searchInto(nil, text, nil, nil, q)
}

// searchInto is SearchEvidence appending the hits to into. words and terms,
// when the caller has them, are the Words of text and their terms ("" for a
// stop word).
func (x *Index) searchInto(into []Hit, text string, words, terms []string, q Query) ([]Hit, Evidence) {
	q = q.withDefaults()
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.n == 0 {
		return into, Evidence{}
	}
	var r search
	r.init(x, q)
	if words == nil {
		words = appendWords(r.s.words[:0], text)
		terms = nil
	} else {
		words = append(r.s.words[:0], words...)
	}
	inOrder := len(words) // the words before the parts of joined ones
	words = appendParts(words, text)
	r.s.words = words
	if len(words) == 0 {
		r.release()
		return into, Evidence{}
	}
	r.readTerms(text, words, inOrder, terms)
	qtf := r.termCounts(inOrder)
	for i, qt := range r.qts {
		if qt.label != "" && qt.l != nil {
			r.lists = append(r.lists, list{l: qt.l, w: qt.disc * qt.idf, qi: i})
			// A term the request says more than once weighs more in the scores,
			// saturating as Okapi BM25's query-term frequency does (k3): "charts
			// for this airport … the general, departures and approaches charts"
			// asks for charts more than for an airport. It adds nothing to the
			// evidence, which says whether the request is for the catalog at all.
			if f := float64(qtf[i]); f > 1 {
				r.lists = append(r.lists, list{l: qt.l, w: qt.disc * qt.idf * ((queryTermK3+1)*f/(queryTermK3+f) - 1), qi: -1})
			}
			// A word no skill uses that found a synonym stands for it: the
			// synonym orders the hits at its full IDF, but counts in the
			// evidence at SynonymWeight, as a synonym does. When the request
			// says the synonym itself too, the word stays a synonym.
			if qt.syn && qt.disc < 1 && !slices.Contains(r.s.terms, qt.term) {
				r.lists = append(r.lists, list{l: qt.l, w: (1 - qt.disc) * qt.idf, qi: -1})
			}
		}
	}
	// The synonyms of words skills use, and adjacent pairs of the request's words
	// that skills use as pairs, add to a skill's score but not to its coverage: they
	// order hits, they do not make a request more surely for the catalog.
	if q.SynonymWeight > 0 {
		r.addSynonyms()
	}
	if x.w.Bigram > 0 {
		r.addPairs(r.s.terms[:inOrder])
	}
	fw := q.FeedbackWeight
	if fw == 0 && len(r.qts) >= q.LongRequest {
		fw = max(0, q.LongFeedbackWeight)
	}
	// Feedback reads the scores of every document the request matched; without
	// it only the best K count, and a search skips the documents that cannot be
	// among them.
	var best []top
	if fw > 0 || q.exhaustive || x.exhaustive || !r.prunable() {
		r.scoreAll()
		best = r.top(q.K, r.s.best[:0])
	} else {
		best = r.topPruned(q.K, r.s.best[:0])
	}
	var ev Evidence
	for _, b := range best {
		c, st := r.evidence(&r.s.acc[b.id])
		ev.Coverage = max(ev.Coverage, c)
		ev.Strength = max(ev.Strength, st)
	}
	if fw > 0 && len(best) > 0 {
		r.feedback(r.top(q.FeedbackDocs, nil), fw)
		best = r.top(q.K, best[:0])
	}
	r.nameOrder(best, inOrder)
	hits := r.hits(into, best)
	r.s.best = best[:0]
	if x.countReads {
		x.reads.Add(int64(r.read))
	}
	r.release()
	return hits, ev
}

// queryTermK3 is Okapi BM25's k3, which saturates how much a term the request
// repeats counts: a term said f times weighs (k3+1)·f/(k3+f) times its weight,
// 1.33 times at twice and at most 2 times. Measured on the public tuning halves
// (docs/routing-experiments.md), k3 from 0.5 to 3 all read above counting a term
// once; counting each repeat in full (no saturation) reads below.
const queryTermK3 = 1.0

// termCounts is how many of the request's first n words (not the parts of
// joined words) stand for each of its terms, by the term's place in qts.
func (r *search) termCounts(n int) []int32 {
	c := r.s.qtf[:0]
	for range r.qts {
		c = append(c, 0)
	}
	for _, k := range r.s.at[:n] {
		if k >= 0 {
			c[k]++
		}
	}
	r.s.qtf = c
	return c
}

// withDefaults fills the query's unset weights.
func (q Query) withDefaults() Query {
	if q.K == 0 {
		q.K = 10
	}
	if q.UnknownWeight == 0 {
		q.UnknownWeight = 0.35
	}
	if q.TypoDiscount == 0 {
		q.TypoDiscount = 0.8
	}
	if q.SynonymWeight == 0 {
		q.SynonymWeight = 0.3
	}
	if q.FeedbackDocs == 0 {
		q.FeedbackDocs = 10
	}
	if q.FeedbackTerms == 0 {
		q.FeedbackTerms = 10
	}
	if q.LongFeedbackWeight == 0 {
		q.LongFeedbackWeight = 0.2
	}
	if q.LongRequest == 0 {
		q.LongRequest = 8
	}
	return q
}

// search is one Search's state: the query's terms, the BM25 constants of the
// index as it stands, and the scratch accumulators (pooled) per document.
type search struct {
	x         *Index
	q         Query
	s         *scratch
	n, maxIDF float64
	k1, k, kl float64
	mass      float64 // the query's total IDF, unknown words included
	qts       []queryTerm
	lists     []list // in the order they add to scores
	read      int    // postings read
}

// init starts a search of x; the caller holds x.mu for reading.
func (r *search) init(x *Index, q Query) {
	s, _ := x.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if len(s.acc) < len(x.docs) {
		n := len(x.docs) + len(x.docs)/4
		s.acc = make([]acc2, n)
		s.seen = make([]uint64, n/64+1)
	}
	n := float64(x.n)
	avg := x.totalLen / n
	k1, b := x.w.K1, x.w.B
	*r = search{
		x: x, q: q, s: s, n: n,
		maxIDF: math.Log(1 + (n+0.5)/0.5),
		k1:     k1, k: k1 * (1 - b), kl: k1 * b / avg,
		qts: s.qts[:0], lists: s.lists[:0],
	}
}

func (r *search) seen(t string) bool { return r.place(t) >= 0 }

// placeScan is how many query terms place scans before it looks them up in a
// map: most requests hold a few, and a scan of a few is faster than hashing,
// but 8 KiB of distinct words made the scans quadratic (9 ms a request).
const placeScan = 32

// place returns the place in qts of term t, -1 when the query does not hold it.
func (r *search) place(t string) int {
	if len(r.qts) > placeScan {
		if k, ok := r.s.byTerm[t]; ok {
			return int(k)
		}
		return -1
	}
	for i, qt := range r.qts {
		if qt.term == t {
			return i
		}
	}
	return -1
}

// addTerm appends qt to the query's terms, and to byTerm once there are more
// than placeScan.
func (r *search) addTerm(qt queryTerm) {
	r.qts = append(r.qts, qt)
	switch n := len(r.qts); {
	case n == placeScan+1:
		if r.s.byTerm == nil {
			r.s.byTerm = make(map[string]int32, 4*placeScan)
		}
		for i := len(r.qts) - 1; i >= 0; i-- { // the first place of each term wins
			r.s.byTerm[r.qts[i].term] = int32(i)
		}
	case n > placeScan+1:
		if _, ok := r.s.byTerm[qt.term]; !ok {
			r.s.byTerm[qt.term] = int32(n - 1)
		}
	}
}

// idf is the IDF of a term in df documents.
func (r *search) idf(df int) float64 {
	d := float64(df)
	return math.Log(1 + (r.n-d+0.5)/(d+0.5))
}

// readTerms turns the request's words into query terms: each word's own term,
// else a near spelling's, else a synonym's that skills use; a word no skill uses
// counts only in the query's mass.
// A word no skill uses that is a value of the request, not what it asks for (a
// name or a number: "the weather in Oakland on the 5th"), counts in nothing.
// known are the terms of the first words, if the caller has them; words are the
// Words of text (its first n) and the parts of its joined words.
func (r *search) readTerms(text string, words []string, n int, known []string) {
	terms := append(r.s.terms[:0], known...)
	for _, w := range words[len(terms):] {
		t, _ := cachedTerm(w)
		terms = append(terms, t)
	}
	r.s.terms = terms
	at := r.s.at[:0]
	values, read := uint64(0), false
	var vparts map[string]bool // valueParts, once a part of a joined word needs it
	for i, w := range words {
		t := terms[i]
		if t == "" {
			at = append(at, -1)
			continue
		}
		if k := r.place(t); k >= 0 {
			at = append(at, int32(k))
			continue
		}
		at = append(at, int32(len(r.qts)))
		// A word no skill uses that reads as a value (a name, a number) is not
		// taken for a near spelling: "Jules" is not rule, nor "David" avoid. It
		// may still find a synonym ("Book a Cab").
		value := false
		if r.x.postings[t] == nil {
			if !read {
				values, _ = valueWords(text)
				read = true
			}
			if i >= n && vparts == nil {
				vparts = valueParts(text, values)
			}
			value = i < n && i < 64 && values&(1<<i) != 0 || i >= n && vparts[w]
		}
		qt, l := r.lookup(w, t, value)
		if l == nil {
			if value {
				r.addTerm(queryTerm{term: t})
				continue
			}
			r.mass += r.q.UnknownWeight * r.maxIDF
			r.addTerm(queryTerm{term: t})
			continue
		}
		qt.idf = r.idf(len(l.ps))
		qt.l = r.x.postings[qt.term]
		r.addTerm(qt)
		r.mass += qt.idf
	}
	r.s.at = at
}

// lookup finds the postings of a request word w (its term t), by its own term,
// a near spelling (unless w is a value of the request) or a synonym. The postings
// returned weigh the term (its IDF); a synonym already in the query leaves w's own
// term, weighed by that synonym.
func (r *search) lookup(w, t string, value bool) (queryTerm, *plist) {
	x := r.x
	qt := queryTerm{label: t, term: t, disc: 1}
	l := x.postings[t]
	if l == nil && !value {
		if u := x.typoOf(w); u != "" && !r.seen(u) {
			qt = queryTerm{label: w + "~" + u, term: u, disc: r.q.TypoDiscount}
			l = x.postings[u]
		}
	}
	if l == nil && r.q.SynonymWeight > 0 {
		// A word no skill uses counts as its synonym, if a skill uses that.
		for _, u := range synonyms[t] {
			if l = x.postings[u]; l != nil && !r.seen(u) {
				return queryTerm{label: w + "=" + u, term: u, disc: r.q.SynonymWeight, syn: true}, l
			}
		}
	}
	return qt, l
}

// add adds w times a term's BM25 term weights to the scores of the documents
// holding it, and evidence times that (each at most w) to their pair evidence:
// pairEvidence for an adjacent pair of the request's words, 0 otherwise.
func (r *search) add(l *plist, w, evidence float64) {
	if l == nil {
		return
	}
	s := r.s
	acc, seen := s.acc, s.seen
	part := r.impacts(l).part
	r.read += len(l.ps)
	for i, p := range l.ps {
		d := p.doc
		if bit := uint64(1) << (d & 63); seen[d>>6]&bit == 0 {
			seen[d>>6] |= bit
			s.touched = append(s.touched, d)
		}
		// The conversions round each product, as topPruned does: a fused
		// multiply-add would change the scores' last bits.
		acc[d].score += float64(w * part[i])
		if evidence > 0 {
			acc[d].pair += float64(evidence * w * min(1, part[i]))
		}
	}
}

// addOwn is add for the request's own i-th term, which also counts in the
// documents' coverage (each at most its weight w) and their matched terms.
func (r *search) addOwn(l *plist, w float64, qi int) {
	if l == nil {
		return
	}
	s := r.s
	acc, seen := s.acc, s.seen
	bit := uint64(0)
	if qi < 64 {
		bit = 1 << qi
	}
	part := r.impacts(l).part
	r.read += len(l.ps)
	for i, p := range l.ps {
		d := p.doc
		if b := uint64(1) << (d & 63); seen[d>>6]&b == 0 {
			seen[d>>6] |= b
			s.touched = append(s.touched, d)
		}
		a := &acc[d]
		a.score += float64(w * part[i])
		a.cover += float64(w * min(1, part[i]))
		a.matched |= bit
	}
}

// scoreAll adds every list's weights to the scores of every document holding
// its term.
func (r *search) scoreAll() {
	for _, li := range r.lists {
		switch {
		case li.qi >= 0:
			r.addOwn(li.l, li.w, li.qi)
		case li.pair:
			r.add(li.l, li.w, pairEvidence)
		default:
			r.add(li.l, li.w, 0)
		}
	}
}

// pairEvidence is how much of its IDF an adjacent pair of the request's words
// that a skill says side by side adds to the skill's evidence (Coverage,
// Strength): a request saying "find a restaurant" or "buy tickets for an event"
// as a skill says it is about that skill more surely than one holding the words
// apart. Pairs add to the score too (Weights.Bigram).
const pairEvidence = 0.5

// evidence is a document's Coverage and Strength.
func (r *search) evidence(a *acc2) (coverage, strength float64) {
	c := a.cover + a.pair
	return min(1, c/r.mass), c / r.maxIDF
}

// addSynonyms adds the synonyms of the request's own words that skills use.
func (r *search) addSynonyms() {
	for k, qt := range r.qts {
		if qt.label == "" || qt.disc != 1 {
			continue
		}
		for _, u := range synonyms[qt.term] {
			if l := r.x.postings[u]; l != nil && !r.seen(u) {
				r.lists = append(r.lists, list{l: l, w: r.q.SynonymWeight * r.idf(len(l.ps)), qi: -1})
				r.s.syns = append(r.s.syns, synOf{int32(k), l})
			}
		}
	}
}

// hasPair reports whether the pair whose postings are l is already among the
// search's lists: a pair the request says twice counts once, as a word does.
func (r *search) hasPair(l *plist) bool {
	for _, li := range r.lists {
		if li.pair && li.l == l {
			return true
		}
	}
	return false
}

// addPairs adds the adjacent pairs of the request's terms ("" for a stop word,
// skipped) that skills use as pairs.
func (r *search) addPairs(terms []string) {
	s := r.s
	prev := ""
	for _, t := range terms {
		if t == "" {
			continue
		}
		if prev != "" {
			s.pair = append(append(append(s.pair[:0], prev...), ' '), t...)
			if l := r.x.postings[string(s.pair)]; l != nil && !r.hasPair(l) {
				r.lists = append(r.lists, list{l: l, w: r.idf(len(l.ps)), qi: -1, pair: true})
			}
		}
		prev = t
	}
}

// feedback expands the request with the terms that best characterise the
// documents it found (RM3-like: each term's share of a document's length, summed
// over the documents weighted by their score relative to the best, times its
// IDF) and adds their postings to the scores, the best at weight times its IDF.
func (r *search) feedback(best []top, weight float64) {
	if len(best) == 0 || best[0].score <= 0 {
		return
	}
	type cand struct {
		t string
		w float64
	}
	var cs []cand
	at := map[string]int{}
	for _, b := range best {
		d := &r.x.docs[b.id]
		rel := b.score / best[0].score / float64(d.len)
		for t, n := range d.terms {
			// Pairs (with a space) are not words; the request's own terms count already.
			if strings.IndexByte(t, ' ') >= 0 || r.seen(t) {
				continue
			}
			i, ok := at[t]
			if !ok {
				i = len(cs)
				at[t] = i
				cs = append(cs, cand{t: t})
			}
			cs[i].w += rel * float64(n)
		}
	}
	for i := range cs {
		cs[i].w *= r.idf(len(r.x.ps(cs[i].t)))
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return strings.Compare(a.t, b.t)
	})
	cs = cs[:min(len(cs), r.q.FeedbackTerms)]
	for _, c := range cs {
		l := r.x.postings[c.t]
		r.add(l, weight*r.idf(len(l.ps))*c.w/cs[0].w, 0)
	}
}

type top struct {
	id    int32
	score float64
}

// nameOrderWeight is how much of their IDF two adjacent words of a skill's name
// add to its score, among a search's best hits, when the request holds them in the
// name's order, anywhere in it: "translate this French text to English" is for
// opus-mt-fr-en rather than opus-mt-en-fr, "list the files" for list-files.
const nameOrderWeight = 0.1

// nameOrder adds to the scores of the best documents the name-order bonus
// (nameOrderWeight) and orders them again. n is how many of the request's words
// are its own, before the parts of joined ones.
func (r *search) nameOrder(best []top, n int) {
	if len(best) < 2 {
		return
	}
	// The places in qts of the request's words found, in order; each stands for
	// its term's postings and its synonyms'.
	seq := r.s.seq[:0]
	for _, k := range r.s.at[:n] {
		if k >= 0 && r.qts[k].l != nil {
			seq = append(seq, k)
		}
	}
	r.s.seq = seq
	if len(seq) < 2 {
		return
	}
	// A pair of name terms (u, v) gains when a word standing for u comes before
	// one standing for v, from the first word for u and the last one for v: so
	// each postings list the words stand for is looked up once per name term.
	hs := r.s.held[:0]
	stand := func(i int, l *plist) {
		k := seq[i]
		for h := range hs {
			if hs[h].l == l {
				hs[h].last, hs[h].idfLast = int32(i), r.idfOf(k, l)
				return
			}
		}
		idf := r.idfOf(k, l)
		hs = append(hs, held{l: l, first: int32(i), last: int32(i), idfFirst: idf, idfLast: idf})
	}
	for i, k := range seq {
		stand(i, r.qts[k].l)
		for _, so := range r.s.syns {
			if so.qt == k {
				stand(i, so.l)
			}
		}
	}
	r.s.held = hs
	// A document whose terms the request holds fewer than two of cannot gain: its
	// matched terms say so without loading it, when no synonym counts.
	own := len(r.s.syns) == 0 && len(r.qts) <= 64
	// The names are read first, each apart: the documents lie far apart in
	// memory, and loads that do not wait on each other overlap.
	names := r.s.names[:0]
	for i := range best {
		var name []*plist
		if !own || bits.OnesCount64(r.s.acc[best[i].id].matched) >= 2 {
			name = r.x.docs[best[i].id].nameLists
		}
		names = append(names, name)
	}
	r.s.names = names
	moved := false
	for i, name := range names {
		if len(name) < 2 {
			continue
		}
		ends := r.s.ends[:0]
		found := 0
		for _, u := range name {
			e := int32(-1)
			if u != nil {
				for h := range hs {
					if hs[h].l == u {
						e = int32(h)
						found++
						break
					}
				}
			}
			ends = append(ends, e)
		}
		r.s.ends = ends
		if found < 2 {
			continue
		}
		bonus := 0.0
		for a := 0; a+1 < len(ends); a++ {
			e, f := ends[a], ends[a+1]
			if e < 0 || f < 0 || e == f {
				continue
			}
			if hs[f].last > hs[e].first {
				bonus += hs[e].idfFirst + hs[f].idfLast
			}
		}
		if bonus > 0 {
			best[i].score += nameOrderWeight * bonus
			moved = true
		}
	}
	if moved {
		slices.SortStableFunc(best, func(a, b top) int { return cmp.Compare(b.score, a.score) })
	}
}

// idfOf is the IDF of the term of postings l, which the request's k-th term
// stands for: its own, worked out already, or a synonym's.
func (r *search) idfOf(k int32, l *plist) float64 {
	if r.qts[k].l == l {
		return r.qts[k].idf
	}
	return r.idf(len(l.ps))
}

// top appends to best the k best-scored documents, best first.
func (r *search) top(k int, best []top) []top {
	acc := r.s.acc
	// Ties keep the document found first: in an earlier list, or earlier in the
	// same list, in document order (topPruned keeps the same). Select orders equal
	// scores by name.
	for _, id := range r.s.touched {
		sc := acc[id].score
		if len(best) == k && sc <= best[len(best)-1].score {
			continue
		}
		i := len(best)
		for i > 0 && sc > best[i-1].score {
			i--
		}
		if len(best) < k {
			best = append(best, top{})
		}
		copy(best[i+1:], best[i:])
		best[i] = top{id, sc}
	}
	return best
}

// hits describes the best documents: score, coverage, strength and matched terms.
func (r *search) hits(into []Hit, best []top) []Hit {
	all := slices.Grow(into, len(best))[:len(into)+len(best)]
	hits := all[len(into):]
	// One array holds every hit's matched terms.
	n := 0
	for _, b := range best {
		n += bits.OnesCount64(r.s.acc[b.id].matched)
	}
	matched := make([]string, 0, n)
	for i, b := range best {
		d := &r.x.docs[b.id]
		a := &r.s.acc[b.id]
		c, st := r.evidence(a)
		h := Hit{Name: d.name, BM25: b.score, Coverage: c, Strength: st, ref: d.ref}
		start := len(matched)
		for j, qt := range r.qts {
			if qt.label == "" {
				continue
			}
			if j < 64 && a.matched&(1<<j) != 0 {
				matched = append(matched, qt.label)
			} else if j >= 64 {
				if _, ok := d.terms[qt.term]; ok {
					matched = append(matched, qt.label)
				}
			}
		}
		if len(matched) > start {
			h.Matched = matched[start:len(matched):len(matched)]
		}
		hits[i] = h
	}
	return all
}

// release clears the accumulators the search touched and returns them to the pool.
func (r *search) release() {
	s := r.s
	for _, id := range s.touched {
		s.acc[id] = acc2{}
		s.seen[id>>6] = 0
	}
	s.touched = s.touched[:0]
	if len(r.qts) > placeScan {
		clear(s.byTerm)
	}
	clear(r.qts)
	s.qts = r.qts[:0]
	clear(r.lists)
	s.lists = r.lists[:0]
	clear(s.words)
	s.words = s.words[:0]
	clear(s.terms)
	s.terms = s.terms[:0]
	s.seq = s.seq[:0]
	clear(s.held)
	s.held = s.held[:0]
	clear(s.names)
	s.names = s.names[:0]
	s.at = s.at[:0]
	clear(s.syns)
	s.syns = s.syns[:0]
	r.x.scratch.Put(s)
}

// stems caches the terms of query words: stemming is the costliest part of reading
// a short request.
var stems struct {
	sync.RWMutex
	m map[string]termEntry
}

type termEntry struct {
	t  string
	ok bool
}

const maxStems = 50000

func cachedTerm(w string) (string, bool) {
	stems.RLock()
	e, hit := stems.m[w]
	stems.RUnlock()
	if hit {
		return e.t, e.ok
	}
	t, ok := Term(w)
	stems.Lock()
	if stems.m == nil || len(stems.m) >= maxStems {
		stems.m = make(map[string]termEntry, 1024)
	}
	stems.m[w] = termEntry{t, ok}
	stems.Unlock()
	return t, ok
}
