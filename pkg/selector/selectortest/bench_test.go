package selectortest_test

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/selector/selectortest"
)

func BenchmarkSelect10k(b *testing.B) {
	skills := selectortest.Catalog(10000, 1)
	x := selector.New(selector.Config{})
	x.Sync(skills)
	cases := selectortest.Requests(skills, 1000, 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_, _ = x.Select(selector.Request{Text: cases[i%len(cases)].Query}, selector.Env{})
	}
}

// BenchmarkSearch10k is the keyword index's part of BenchmarkSelect10k: recall
// and BM25 scoring, without the plan.
func BenchmarkSearch10k(b *testing.B) {
	skills := selectortest.Catalog(10000, 1)
	x := selector.NewIndex(selector.Weights{})
	for _, s := range skills {
		x.Put(s.Name, selector.FieldsOf(s))
	}
	cases := selectortest.Requests(skills, 1000, 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_, _ = x.SearchEvidence(cases[i%len(cases)].Query, selector.Query{})
	}
}
