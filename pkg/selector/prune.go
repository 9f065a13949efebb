package selector

import (
	"cmp"
	"math"
	"slices"
)

// maxPruned is the most lists topPruned scores together (a bit each, and the
// place of each document in each); a longer request is scored exhaustively.
const maxPruned = 32

// slack widens the bounds topPruned compares scores with: a bound or a partial
// score sums weights in another order than a score does, and so rounds
// differently (by far less than this).
const slack = 1 + 1e-9

// prunable reports whether topPruned can score the search: its bounds hold when
// every weight a document gets is positive, so scores only grow as lists add.
func (r *search) prunable() bool {
	w := r.x.w
	if r.q.K <= 0 || len(r.lists) > maxPruned || w.K1 <= 0 || w.B < 0 || w.B > 1 ||
		min(w.Name, w.Description, w.Tags, w.Triggers, w.Capabilities, w.Examples, w.Bigram) < 0 {
		return false
	}
	for _, li := range r.lists {
		if !(li.w > 0) {
			return false
		}
	}
	return true
}

// ranked is a candidate of topPruned: its score, the first list (in the search's
// order) that holds it, which with the ordinal is what the exhaustive search's
// ties go by, and the lists that hold it, a bit each.
type ranked struct {
	score float64
	first int32
	doc   int32
	has   uint64
}

// below reports whether a ranks below b: a lower score, or the same found later
// by the exhaustive search, which finds documents list by list, each list in
// document order.
func below(a, b ranked) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	if a.first != b.first {
		return a.first > b.first
	}
	return a.doc > b.doc
}

// topPruned appends to best the k best-scored documents, best first, exactly as
// scoreAll and top find them, and fills in their accumulators (score, coverage,
// matched terms) for hits. It reads the lists in order of the most each can add
// to a score (its highest weight, kept with the weights: impacts), all of their
// documents, until the lists left together add less than the k-th best partial
// score: a document none of the read lists holds cannot then be among the best.
// The lists left are looked up only for the documents that can still reach the
// k-th best, and their scores worked out again, in the search's order, so they
// round the same. A bound never decides a tie: a document that can equal the k-th
// score is scored in full.
func (r *search) topPruned(k int, best []top) []top {
	s := r.s
	n := len(r.lists)
	if n == 0 {
		return best
	}
	ub := slices.Grow(s.ub[:0], n)[:n]
	order := s.order[:0]
	for i, li := range r.lists {
		ub[i] = float64(li.w * r.impacts(li.l).max)
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ub[b], ub[a]) })
	// rest[j]: the most the lists order[j:] add together.
	rest := slices.Grow(s.rest[:0], n+1)[:n+1]
	rest[n] = 0
	for j := n - 1; j >= 0; j-- {
		rest[j] = rest[j+1] + ub[order[j]]
	}
	for j := range rest {
		rest[j] *= slack
	}
	acc, seen := s.acc, s.seen
	// pos[i][d] is where list i holds document d, written as lists are read
	// and read only where the document's bit of list i says it does.
	for len(s.pos) < n {
		s.pos = append(s.pos, nil)
	}
	for i := range n {
		if len(s.pos[i]) < len(acc) {
			s.pos[i] = make([]int32, len(acc))
		}
	}
	pos := s.pos
	read, done := 0, n
	for j, i := range order {
		// Stopping is worth its check before a list longer than the documents
		// found so far.
		li := r.lists[i]
		if len(s.touched) >= k && 2*len(li.l.ps) > len(s.touched) && r.reach(s.touched, k, rest[j]) {
			done = j
			break
		}
		part := r.impacts(li.l).part
		bit := uint64(1) << i
		for p, ps := range li.l.ps {
			d := ps.doc
			if b := uint64(1) << (d & 63); seen[d>>6]&b == 0 {
				seen[d>>6] |= b
				s.touched = append(s.touched, d)
			}
			a := &acc[d]
			a.score += float64(li.w * part[p])
			a.matched |= bit
			pos[i][d] = int32(p)
		}
		read += len(li.l.ps)
	}
	// The documents that can still reach the k-th best partial score (partial
	// scores only grow) are the candidates; the lists left add to theirs alone,
	// each list read whole or looked up per candidate, whichever reads less.
	theta := math.Inf(-1)
	if len(s.touched) >= k {
		lead := r.leaders(s.touched, k)
		theta = lead[k-1].score / slack
		if done < n {
			// The k best partial scores, completed, are k scores the k-th best
			// reaches: a far higher bar than the partial ones, which lack the
			// lists left, and what keeps the candidates few.
			low := math.Inf(1)
			for _, t := range lead {
				sc := t.score
				for _, i := range order[done:] {
					li := r.lists[i]
					if im := r.impacts(li.l); im.at != nil {
						read++
						if p, ok := im.find(t.id); ok {
							sc += float64(li.w * im.part[p])
						}
						continue
					}
					p, m := seek(li.l.ps, 0, t.id)
					read += m
					if ok := p < len(li.l.ps) && li.l.ps[p].doc == t.id; ok {
						sc += float64(li.w * r.impacts(li.l).part[p])
					}
				}
				low = min(low, sc)
			}
			theta = max(theta, low/slack)
		}
	}
	cands := s.cands[:0]
	for _, d := range s.touched {
		if (acc[d].score+rest[done])*slack >= theta {
			cands = append(cands, d)
		}
	}
	if done < n {
		for _, d := range s.touched {
			seen[d>>6] = 0
		}
		for _, d := range cands {
			seen[d>>6] |= 1 << (d & 63)
		}
	}
	sorted := false
	for j := done; j < n; j++ {
		i := order[j]
		li := r.lists[i]
		im := r.impacts(li.l)
		ps, part := li.l.ps, im.part
		bit := uint64(1) << i
		if im.at != nil {
			for _, d := range cands {
				read++
				if p, ok := im.find(d); ok {
					acc[d].score += float64(li.w * part[p])
					acc[d].matched |= bit
				}
			}
		} else if c := len(cands); 3*c*(2*probes(len(ps)/max(c, 1))+1) < len(ps) {
			// Looking the candidates up, in document order, reads a few postings
			// each, at random; a pass reads them all, in order, at a third of the cost.
			if !sorted {
				slices.Sort(cands)
				sorted = true
			}
			p := 0
			for _, d := range cands {
				var n int
				p, n = seek(ps, p, d)
				read += n
				if p < len(ps) && ps[p].doc == d {
					acc[d].score += float64(li.w * part[p])
					acc[d].matched |= bit
					pos[i][d] = int32(p)
				}
			}
		} else {
			for p, q := range ps {
				if d := q.doc; seen[d>>6]&(1<<(d&63)) != 0 {
					acc[d].score += float64(li.w * part[p])
					acc[d].matched |= bit
					pos[i][d] = int32(p)
				}
			}
			read += len(ps)
		}
		if len(cands) >= k {
			theta = max(theta, r.kth(cands, k)/slack)
		}
		keep := cands[:0]
		for _, d := range cands {
			if (acc[d].score+rest[j+1])*slack >= theta {
				keep = append(keep, d)
			} else {
				seen[d>>6] &^= 1 << (d & 63)
			}
		}
		cands = keep
	}
	s.cands = cands[:0]
	heap := s.heap[:0]
	for _, d := range cands {
		e := ranked{doc: d, first: -1, has: acc[d].matched}
		// Every list has been read for the candidates: has is exact.
		for i, li := range r.lists {
			if e.has&(1<<i) == 0 {
				continue
			}
			e.score += float64(li.w * r.impacts(li.l).weightOf(d, pos[i][d]))
			if e.first < 0 {
				e.first = int32(i)
			}
		}
		switch {
		case len(heap) < k:
			heap = append(heap, e)
			siftUp(heap, len(heap)-1)
		case below(heap[0], e):
			heap[0] = e
			siftDown(heap, 0)
		}
	}
	r.read += read
	r.clear()
	m := len(heap)
	best = slices.Grow(best, m)[:len(best)+m]
	for j := len(best) - 1; len(heap) > 0; j-- {
		e := heap[0]
		heap[0] = heap[len(heap)-1]
		heap = heap[:len(heap)-1]
		siftDown(heap, 0)
		best[j] = top{e.doc, e.score}
		r.fill(e)
	}
	s.ub, s.order, s.rest, s.heap = ub[:0], order[:0], rest[:0], heap[:0]
	return best
}

// seek returns the place of ps's first posting at or after document d,
// looking from from on (galloping, then halving), and how many postings it read.
func seek(ps []posting, from int, d int32) (int, int) {
	if from >= len(ps) || ps[from].doc >= d {
		return from, 1
	}
	read := 1
	lo, step := from, 1 // ps[lo].doc < d
	hi := lo + 1
	for hi < len(ps) && ps[hi].doc < d {
		read++
		lo, step = hi, step*2
		hi = lo + step
	}
	hi = min(hi, len(ps)) // ps[hi].doc >= d, or hi is the end
	for hi-lo > 1 {
		read++
		if m := int(uint(lo+hi) >> 1); ps[m].doc < d {
			lo = m
		} else {
			hi = m
		}
	}
	return hi, read
}

// probes is how many postings a binary search of n reads.
func probes(n int) int {
	b := 1
	for ; n > 1; n >>= 1 {
		b++
	}
	return b
}

// clear zeroes the accumulators of the documents touched.
func (r *search) clear() {
	s := r.s
	for _, d := range s.touched {
		s.acc[d] = acc2{}
		s.seen[d>>6] = 0
	}
	s.touched = s.touched[:0]
}

// kth returns the k-th best partial score of the documents ds, k ≤ len(ds).
func (r *search) kth(ds []int32, k int) float64 { return r.leaders(ds, k)[k-1].score }

// reach reports whether the k-th best partial score of the documents ds, over
// slack, is above bound (bound < kth(ds, k)/slack): whether k of them are,
// which it can tell without ranking them, often before it has read them all.
func (r *search) reach(ds []int32, k int, bound float64) bool {
	acc := r.s.acc
	for _, d := range ds {
		if acc[d].score/slack > bound {
			if k--; k == 0 {
				return true
			}
		}
	}
	return false
}

// leaders returns the k best partial scores of the documents ds and their
// documents, best first, in scratch the next call reuses.
func (r *search) leaders(ds []int32, k int) []top {
	s := r.s
	best := s.lead[:0]
	for _, d := range ds {
		sc := s.acc[d].score
		if len(best) == k && sc <= best[k-1].score {
			continue
		}
		i := len(best)
		if i < k {
			best = append(best, top{})
		} else {
			i--
		}
		for i > 0 && sc > best[i-1].score {
			best[i] = best[i-1]
			i--
		}
		best[i] = top{d, sc}
	}
	s.lead = best
	return best
}

// fill sets the accumulator of a document topPruned kept as scoreAll would
// have: its score, its coverage of the request's own terms and which it holds.
func (r *search) fill(e ranked) {
	s := r.s
	a := acc2{score: e.score}
	for i, li := range r.lists {
		if li.qi < 0 && !li.pair || e.has&(1<<i) == 0 {
			continue
		}
		if li.pair {
			a.pair += float64(pairEvidence * li.w * min(1, r.impacts(li.l).weightOf(e.doc, s.pos[i][e.doc])))
			continue
		}
		a.cover += float64(li.w * min(1, r.impacts(li.l).weightOf(e.doc, s.pos[i][e.doc])))
		if li.qi < 64 {
			a.matched |= 1 << li.qi
		}
	}
	s.acc[e.doc] = a
	s.seen[e.doc>>6] |= 1 << (e.doc & 63)
	s.touched = append(s.touched, e.doc)
}

func siftUp(h []ranked, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !below(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func siftDown(h []ranked, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && below(h[r], h[l]) {
			m = r
		}
		if !below(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
