package selector_test

import (
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
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

// recount counts, from eval's results, the requests with an expected skill that
// only the router or only BM25+stemming gets right at the top.
func recount(results []selector.Result) (better, worse int) {
	for _, r := range results {
		if r.Expect == nil {
			continue // off-topic, or a negative example
		}
		right := r.ExpectAny
		if len(right) == 0 {
			right = []string{*r.Expect}
		}
		stem := r.BaselineStem != nil && slices.Contains(right, *r.BaselineStem)
		switch {
		case r.OK && !stem:
			better++
		case stem && !r.OK:
			worse++
		}
	}
	return better, worse
}

// The request-by-request counts against BM25+stemming add up to the accuracies'
// difference, and count only the requests that expect a skill: not those no
// skill should take (BM25, which has no threshold, cannot reject them), nor
// negative examples. Cases expecting any of several skills count as eval
// counts them.
func TestAgainstStemCountsRequestByRequest(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/public/toolalpaca/"
	x := newSel(t, selector.Config{}, publicSkills(t, dir, 94)...)
	cases := readCasesFile(t, dir+"tune.jsonl")
	_, s := selector.Evaluate(x, cases, selector.Env{})
	a := s.AgainstStem
	t.Logf("%+v", a)
	n := float64(len(cases))
	if d := float64(a.Top1.Better-a.Top1.Worse) - (s.Top1-s.BaselineStemTop1)*n; math.Abs(d) > 0.5 {
		t.Errorf("top-1: %d better, %d worse, but accuracies %.3f and %.3f of %v", a.Top1.Better, a.Top1.Worse, s.Top1, s.BaselineStemTop1, n)
	}
	if d := float64(a.Recall5.Better-a.Recall5.Worse) - (s.Recall5-s.BaselineStemRecall5)*n; math.Abs(d) > 0.5 {
		t.Errorf("recall@5: %d better, %d worse, but %.3f and %.3f of %v", a.Recall5.Better, a.Recall5.Worse, s.Recall5, s.BaselineStemRecall5, n)
	}
	if a.Top1.Better == 0 || a.Top1.Worse == 0 {
		t.Errorf("top-1 %+v: this set differs both ways", a.Top1)
	}
	if want := selector.SignTest(a.Recall5.Better, a.Recall5.Worse); math.Abs(a.Recall5.P-want) > 0.001*want {
		t.Errorf("recall@5 p %g, want %g", a.Recall5.P, want)
	}

	// With its off-topic requests beside them, which the router rejects and
	// BM25 cannot: the same counts.
	results, all := selector.Evaluate(x, append(cases, readCasesFile(t, dir+"offtopic-tune.jsonl")...), selector.Env{})
	if all.AgainstStem != a {
		t.Errorf("with off-topic requests %+v, without %+v", all.AgainstStem, a)
	}
	if b, w := recount(results); b != a.Top1.Better || w != a.Top1.Worse {
		t.Errorf("top-1 %+v, the results say %d/%d", a.Top1, b, w)
	}

	// This project's catalog, with its skills' examples (negative ones too).
	cat, ds := skill.Discover("../../testdata/routing/skills")
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	x = newSel(t, selector.Config{}, cat.Skills...)
	results, s = selector.Evaluate(x, append(selector.ExampleCases(cat.Skills), readCasesFile(t, "../../testdata/routing/heldout.jsonl")...), selector.Env{})
	if b, w := recount(results); b != s.AgainstStem.Top1.Better || w != s.AgainstStem.Top1.Worse || b == 0 {
		t.Errorf("examples and held out: top-1 %+v, the results say %d/%d", s.AgainstStem.Top1, b, w)
	}
}
