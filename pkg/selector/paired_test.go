package selector_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
)

// The sign test's p-values equal the exact binomial ones, computed here with
// integers: twice the chance of min(a, b) or fewer heads in a + b fair tosses.
func TestSignTestIsTheExactBinomial(t *testing.T) {
	t.Parallel()
	exact := func(a, b int) float64 {
		n, k := a+b, min(a, b)
		sum := new(big.Int)
		for i := 0; i <= k; i++ {
			sum.Add(sum, new(big.Int).Binomial(int64(n), int64(i)))
		}
		p, _ := new(big.Rat).SetFrac(sum.Lsh(sum, 1), new(big.Int).Lsh(big.NewInt(1), uint(n))).Float64()
		return math.Min(1, p)
	}
	for _, c := range [][2]int{{9, 2}, {3, 1}, {0, 7}, {56, 19}, {140, 66}, {1000, 900}, {4, 4}, {2, 3}, {0, 1}} {
		got, want := selector.SignTest(c[0], c[1]), exact(c[0], c[1])
		if math.Abs(got-want) > 1e-9*math.Max(want, 1e-12) && math.Abs(got-want) > 1e-15 {
			t.Errorf("SignTest(%d, %d) = %g, want %g", c[0], c[1], got, want)
		}
	}
	if p := selector.SignTest(0, 0); p != 1 {
		t.Errorf("SignTest(0, 0) = %g, want 1", p)
	}
}

// The request-by-request counts against BM25+stemming add up to the accuracies'
// difference, on a public set where they differ both ways.
func TestAgainstStemCountsRequestByRequest(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/public/gorilla-torchhub/"
	x := newSel(t, selector.Config{}, publicSkills(t, dir, 94)...)
	cases := readCasesFile(t, dir+"tune.jsonl")
	results, s := selector.Evaluate(x, cases, selector.Env{})
	a := s.AgainstStem
	t.Logf("%+v", a)
	n := float64(len(cases))
	if d := float64(a.Top1.Better-a.Top1.Worse) - (s.Top1-s.BaselineStemTop1)*n; math.Abs(d) > 0.5 {
		t.Errorf("top-1: %d better, %d worse, but accuracies %.3f and %.3f of %v", a.Top1.Better, a.Top1.Worse, s.Top1, s.BaselineStemTop1, n)
	}
	if d := float64(a.Recall5.Better-a.Recall5.Worse) - (s.Recall5-s.BaselineStemRecall5)*n; math.Abs(d) > 0.5 {
		t.Errorf("recall@5: %d better, %d worse, but %.3f and %.3f of %v", a.Recall5.Better, a.Recall5.Worse, s.Recall5, s.BaselineStemRecall5, n)
	}
	better, worse := 0, 0
	for _, r := range results {
		stemRight := r.BaselineStem != nil && r.Expect != nil && *r.BaselineStem == *r.Expect
		switch {
		case r.OK && !stemRight:
			better++
		case stemRight && !r.OK:
			worse++
		}
	}
	if better != a.Top1.Better || worse != a.Top1.Worse {
		t.Errorf("top-1 counts %d/%d, the results say %d/%d", a.Top1.Better, a.Top1.Worse, better, worse)
	}
	if a.Recall5.Better == 0 || a.Recall5.Worse == 0 {
		t.Errorf("recall@5 %+v: this set differs both ways", a.Recall5)
	}
	if want := selector.SignTest(a.Recall5.Better, a.Recall5.Worse); math.Abs(a.Recall5.P-want) > 1e-4 {
		t.Errorf("recall@5 p %g, want %g", a.Recall5.P, want)
	}
}
