package selectortest_test

import (
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/selector/selectortest"
)

// On catalogs of hundreds of skills with one-line descriptions, the router beats
// plain BM25 over names and descriptions clearly, and evaluates thousands of cases in
// seconds.
func TestLargeCatalogs(t *testing.T) {
	t.Parallel()
	for _, n := range []int{200, 500} {
		skills := selectortest.Catalog(n, 1)
		x := selector.New(selector.Config{})
		x.Sync(skills)
		cases := selectortest.Requests(skills, 1000, 2)
		start := time.Now()
		_, s := selector.Evaluate(x, cases, selector.Env{})
		took := time.Since(start)
		t.Logf("%d skills, %d cases in %v: top-1 %.3f (BM25 %.3f), recall@5 %.3f (BM25 %.3f), off-topic rejected %.3f, no-match precision %.3f",
			n, len(cases), took, s.Top1, s.BaselineTop1, s.Recall5, s.BaselineRecall5, s.OffTopicRejected, s.NoMatchPrecision)
		if s.Top1 < s.BaselineTop1+0.1 || s.Recall5 < s.BaselineRecall5+0.05 {
			t.Errorf("%d skills: router %.3f/%.3f does not beat BM25 %.3f/%.3f clearly", n, s.Top1, s.Recall5, s.BaselineTop1, s.BaselineRecall5)
		}
		if took > time.Minute { // seconds without -race; the race detector slows it several times
			t.Errorf("%d cases took %v", len(cases), took)
		}
	}
}
