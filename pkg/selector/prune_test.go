package selector_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/selector/selectortest"
)

// pruneWords are few, so documents share terms, pairs and lengths, and their
// scores tie often; film and movie are synonyms, and invoices is misspelt below.
var pruneWords = strings.Fields("summarize translate deploy invoice invoices report reports pdf document audio film movie " +
	"calendar meeting team finance support ticket docker image kubernetes cluster log file email backup restore")

func randomText(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		switch r.IntN(12) {
		case 0:
			ws[i] = "the"
		case 1:
			ws[i] = "invoces"
		case 2:
			ws[i] = fmt.Sprintf("zork%d", r.IntN(3)) // no document holds it
		default:
			ws[i] = pruneWords[r.IntN(len(pruneWords))]
		}
	}
	return strings.Join(ws, " ")
}

func randomFields(r *rand.Rand, name string) selector.Fields {
	f := selector.Fields{Name: name, Description: randomText(r, 1+r.IntN(6))}
	if r.IntN(2) == 0 {
		f.Tags = randomText(r, 1+r.IntN(2))
	}
	if r.IntN(4) == 0 {
		f.Examples = randomText(r, 2+r.IntN(4))
	}
	return f
}

// The pruned search finds exactly what scoring every matched document finds, the
// same hits in the same order with the same scores, coverage and matched terms,
// on random catalogs, and keeps doing so as skills are replaced, removed and added.
func TestPrunedSearchIsExhaustive(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 99))
		x := selector.NewIndex(selector.Weights{})
		n := 5 + r.IntN(300)
		var made []selector.Fields
		for i := range n {
			f := randomFields(r, pruneWords[r.IntN(len(pruneWords))])
			if len(made) > 0 && r.IntN(4) == 0 {
				f = made[r.IntN(len(made))] // the same text scores the same: ties
			}
			made = append(made, f)
			x.Put(fmt.Sprintf("skill-%d", i), f)
		}
		for round := range 6 {
			for range 30 {
				text := randomText(r, 1+r.IntN(9))
				q := selector.Query{K: 1 + r.IntN(15)}
				if r.IntN(4) == 0 {
					q.LongFeedbackWeight = -1 // long requests pruned too
				}
				got, gotEv := x.SearchEvidence(text, q)
				want, wantEv := x.SearchExhaustive(text, q)
				if !reflect.DeepEqual(got, want) || gotEv != wantEv {
					t.Fatalf("seed %d round %d, %q K %d:\npruned     %+v %+v\nexhaustive %+v %+v", seed, round, text, q.K, got, gotEv, want, wantEv)
				}
			}
			for range 1 + r.IntN(n/3+1) {
				name := fmt.Sprintf("skill-%d", r.IntN(n+20))
				if r.IntN(3) == 0 {
					x.Remove(name)
				} else {
					x.Put(name, randomFields(r, pruneWords[r.IntN(len(pruneWords))]))
				}
			}
		}
	}
}

// A document that ties the K-th best score is kept or left as the exhaustive
// search's order has it: found first in an earlier list of the request, or
// earlier in the same list. Here y, found later, holds the request's first term
// and x its second, with the same weight; a bound that let the first term's list
// go once x was found would lose y.
func TestPrunedSearchTies(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	x.Put("x", selector.Fields{Description: "beta"})
	x.Put("y", selector.Fields{Description: "alpha"})
	for _, tc := range []struct {
		text string
		k    int
		want []string
	}{
		{"alpha beta", 1, []string{"y"}},
		{"alpha beta", 2, []string{"y", "x"}},
		{"beta alpha", 1, []string{"x"}},
		{"beta alpha", 2, []string{"x", "y"}},
	} {
		hits, _ := x.SearchEvidence(tc.text, selector.Query{K: tc.k})
		var got []string
		for _, h := range hits {
			got = append(got, h.Name)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q K %d: hits %v, want %v", tc.text, tc.k, got, tc.want)
		}
	}
}

// Pruning reads under half the postings an exhaustive search reads on the
// generated 10,000-skill catalog.
func TestPrunedSearchReadsLess(t *testing.T) {
	t.Parallel()
	skills := selectortest.Catalog(10000, 1)
	pruned, full := selector.NewIndex(selector.Weights{}), selector.NewIndex(selector.Weights{})
	for _, s := range skills {
		pruned.Put(s.Name, selector.FieldsOf(s))
		full.Put(s.Name, selector.FieldsOf(s))
	}
	pruned.CountReads()
	full.CountReads()
	cases := selectortest.Requests(skills, 300, 3)
	for _, c := range cases {
		pruned.SearchEvidence(c.Query, selector.Query{})
		full.SearchExhaustive(c.Query, selector.Query{})
	}
	p, f := pruned.PostingsRead()/int64(len(cases)), full.PostingsRead()/int64(len(cases))
	t.Logf("postings read per request: pruned %d, exhaustive %d", p, f)
	if p*2 > f {
		t.Errorf("pruned search read %d postings per request, want under half the exhaustive search's %d", p, f)
	}
}

// BenchmarkSearchPostings10k reports the postings a search reads per request on
// the generated 10,000-skill catalog, pruned and exhaustive.
func BenchmarkSearchPostings10k(b *testing.B) {
	skills := selectortest.Catalog(10000, 1)
	x := selector.NewIndex(selector.Weights{})
	for _, s := range skills {
		x.Put(s.Name, selector.FieldsOf(s))
	}
	x.CountReads()
	cases := selectortest.Requests(skills, 1000, 3)
	for _, exhaustive := range []bool{false, true} {
		b.Run(fmt.Sprintf("exhaustive=%v", exhaustive), func(b *testing.B) {
			b.ReportAllocs()
			before := x.PostingsRead()
			n := 0
			for ; b.Loop(); n++ {
				c := cases[n%len(cases)]
				if exhaustive {
					x.SearchExhaustive(c.Query, selector.Query{})
				} else {
					x.SearchEvidence(c.Query, selector.Query{})
				}
			}
			b.ReportMetric(float64(x.PostingsRead()-before)/float64(n), "postings/op")
		})
	}
}
