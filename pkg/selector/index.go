package selector

import (
	"math"
	"sort"
	"sync"
)

// BM25 parameters: k1 saturates a term's repeats, b normalises for document length.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
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
}

// DefaultWeights favour a skill's name and tags over its prose.
var DefaultWeights = Weights{Name: 3, Description: 1, Tags: 2, Triggers: 1, Capabilities: 1, Examples: 1}

// Index is a BM25 keyword index of skills, updated one skill at a time. Terms are
// stemmed (Terms); a query word the index does not hold is matched to an indexed
// term one edit away (a typo), at a discount. It is safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	w        Weights
	docs     []doc
	free     []int32
	byName   map[string]int32
	postings map[string][]posting
	deletes  map[string][]string // a term with one letter deleted -> terms
	totalLen float64
	n        int
	scratch  sync.Pool
}

type doc struct {
	name  string
	terms map[string]float32
	len   float32
	live  bool
}

type posting struct {
	doc int32
	tf  float32
}

// NewIndex returns an empty index; w zero means DefaultWeights.
func NewIndex(w Weights) *Index {
	if w == (Weights{}) {
		w = DefaultWeights
	}
	return &Index{w: w, byName: map[string]int32{}, postings: map[string][]posting{}, deletes: map[string][]string{}}
}

// Len is the number of documents.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

func (x *Index) analyse(f Fields) (map[string]float32, float32) {
	tf := map[string]float32{}
	var total float32
	add := func(text string, w float32) {
		if w == 0 || text == "" {
			return
		}
		for _, t := range Terms(text) {
			tf[t] += w
			total += w
		}
	}
	add(f.Name, x.w.Name)
	add(f.Description, x.w.Description)
	add(f.Tags, x.w.Tags)
	add(f.Triggers, x.w.Triggers)
	add(f.Capabilities, x.w.Capabilities)
	add(f.Examples, x.w.Examples)
	return tf, total
}

// Put adds or replaces the document of name.
func (x *Index) Put(name string, f Fields) {
	tf, total := x.analyse(f)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(name)
	var id int32
	if k := len(x.free); k > 0 {
		id, x.free = x.free[k-1], x.free[:k-1]
		x.docs[id] = doc{name: name, terms: tf, len: total, live: true}
	} else {
		id = int32(len(x.docs))
		x.docs = append(x.docs, doc{name: name, terms: tf, len: total, live: true})
	}
	x.byName[name] = id
	for t, n := range tf {
		ps := x.postings[t]
		if len(ps) == 0 {
			x.addDeletes(t)
		}
		x.postings[t] = append(ps, posting{doc: id, tf: n})
	}
	x.totalLen += float64(total)
	x.n++
}

// Remove drops the document of name, if any.
func (x *Index) Remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(name)
}

func (x *Index) remove(name string) {
	id, ok := x.byName[name]
	if !ok {
		return
	}
	d := x.docs[id]
	for t := range d.terms {
		ps := x.postings[t]
		for i, p := range ps {
			if p.doc == id {
				ps[i] = ps[len(ps)-1]
				ps = ps[:len(ps)-1]
				break
			}
		}
		if len(ps) == 0 {
			delete(x.postings, t)
			x.dropDeletes(t)
		} else {
			x.postings[t] = ps
		}
	}
	x.totalLen -= float64(d.len)
	x.n--
	x.docs[id] = doc{}
	x.free = append(x.free, id)
	delete(x.byName, name)
}

// minTypoLen is the shortest word matched to a term one edit away.
const minTypoLen = 4

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

// typoOf returns the indexed term one edit from t with the most documents, if any.
func (x *Index) typoOf(t string) string {
	best, bestDF := "", 0
	try := func(u string) {
		if df := len(x.postings[u]); df > bestDF || df == bestDF && df > 0 && u < best {
			best, bestDF = u, df
		}
	}
	if ts, ok := x.deletes[t]; ok { // t is an indexed term with a letter missing
		for _, u := range ts {
			try(u)
		}
	}
	deletions(t, func(k string) {
		if _, ok := x.postings[k]; ok { // t has a letter too many
			try(k)
		}
		for _, u := range x.deletes[k] { // a letter differs, or two are swapped
			try(u)
		}
	})
	return best
}

// Hit is one document a query recalled.
type Hit struct {
	Name string
	// BM25 is the document's BM25 score for the query.
	BM25 float64
	// Coverage is the share of the query's weight (its terms' IDF) the document
	// matches, each matched term counting at most once: 1 when every query term is in
	// the document, 0 when none is. Unknown query words count with UnknownWeight.
	Coverage float64
	// Matched lists the document's terms the query matched, typo corrections as
	// "word~term".
	Matched []string
}

// Query holds options of a search.
type Query struct {
	// K bounds the hits returned, best BM25 first; 0 means 10.
	K int
	// UnknownWeight is how much a query word no document holds (even one edit away)
	// weighs in Coverage, as a share of the highest IDF; 0 means 0.35.
	UnknownWeight float64
	// TypoDiscount multiplies a term matched one edit away; 0 means 0.8.
	TypoDiscount float64
}

type scratch struct {
	score, cover []float64
	touched      []int32
	matched      [][]string
}

// Search returns the documents matching text, best BM25 first.
func (x *Index) Search(text string, q Query) []Hit {
	if q.K == 0 {
		q.K = 10
	}
	if q.UnknownWeight == 0 {
		q.UnknownWeight = 0.35
	}
	if q.TypoDiscount == 0 {
		q.TypoDiscount = 0.8
	}
	terms := Terms(text)
	if len(terms) == 0 {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.n == 0 {
		return nil
	}
	s, _ := x.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if len(s.score) < len(x.docs) {
		s.score = make([]float64, len(x.docs))
		s.cover = make([]float64, len(x.docs))
		s.matched = make([][]string, len(x.docs))
	}
	N := float64(x.n)
	avg := x.totalLen / N
	maxIDF := math.Log(1 + (N+0.5)/0.5)
	var mass float64
	seen := make(map[string]bool, len(terms))
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		label, disc := t, 1.0
		ps, ok := x.postings[t]
		if !ok {
			if u := x.typoOf(t); u != "" {
				label, disc, ps = t+"~"+u, q.TypoDiscount, x.postings[u]
			}
		}
		if len(ps) == 0 {
			mass += q.UnknownWeight * maxIDF
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (N-df+0.5)/(df+0.5))
		mass += idf
		for _, p := range ps {
			d := &x.docs[p.doc]
			tf := float64(p.tf)
			part := tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.len)/avg))
			if s.score[p.doc] == 0 && s.cover[p.doc] == 0 {
				s.touched = append(s.touched, p.doc)
			}
			s.score[p.doc] += disc * idf * part
			s.cover[p.doc] += disc * idf * math.Min(1, part)
			s.matched[p.doc] = append(s.matched[p.doc], label)
		}
	}
	hits := make([]Hit, 0, min(q.K, len(s.touched)))
	for _, id := range s.touched {
		h := Hit{Name: x.docs[id].name, BM25: s.score[id], Coverage: s.cover[id] / mass}
		if len(hits) < q.K || better(h, hits[len(hits)-1]) {
			h.Matched = append([]string(nil), s.matched[id]...)
			hits = insertHit(hits, h, q.K)
		}
		s.score[id], s.cover[id], s.matched[id] = 0, 0, s.matched[id][:0]
	}
	s.touched = s.touched[:0]
	x.scratch.Put(s)
	return hits
}

func better(a, b Hit) bool {
	if a.BM25 != b.BM25 {
		return a.BM25 > b.BM25
	}
	return a.Name < b.Name
}

func insertHit(hits []Hit, h Hit, k int) []Hit {
	i := sort.Search(len(hits), func(i int) bool { return better(h, hits[i]) })
	if len(hits) < k {
		hits = append(hits, Hit{})
	} else if i >= k {
		return hits
	}
	copy(hits[i+1:], hits[i:])
	hits[i] = h
	return hits
}
