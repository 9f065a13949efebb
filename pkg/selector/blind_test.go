package selector_test

import (
	"math"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// TestBlindPhraseCatalogs routes the eight phrase-trigger catalogs written blind to
// the router (testdata/routing/blind) and fails if any loads with an error or
// routes more than two of its 74 requests fewer right than docs/routing.md reports,
// or rejects fewer of its off-topic requests.
func TestBlindPhraseCatalogs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set       string
		top1, rej float64 // measured, as Evaluate rounds them
		stemTop1  float64
	}{
		{"a", 0.838, 0.667, 0.405},
		{"b", 0.716, 0.333, 0.500},
		{"c", 0.757, 0.833, 0.514},
		{"d", 0.662, 0.333, 0.446},
		{"e", 0.770, 0.500, 0.500},
		{"f", 0.797, 0.833, 0.473},
		{"g", 0.676, 0.500, 0.514},
		{"h", 0.676, 0.667, 0.595},
	} {
		dir := "../../testdata/routing/blind/" + c.set + "/"
		cat, ds := skill.Discover(dir + "skills")
		if ds.HasErrors() || len(cat.Skills) != 32 {
			t.Fatalf("%s: %d skills, %v", c.set, len(cat.Skills), ds)
		}
		cases := readCasesFile(t, dir+"cases.jsonl")
		var in, off []selector.Case
		for _, cs := range cases {
			if cs.Expect == "" {
				off = append(off, cs)
			} else {
				in = append(in, cs)
			}
		}
		if len(in) != 68 || len(off) != 6 {
			t.Fatalf("%s: %d requests for a skill and %d off-topic, want 68 and 6", c.set, len(in), len(off))
		}
		x := newSel(t, selector.Config{}, cat.Skills...)
		_, s := selector.Evaluate(x, cases, selector.Env{})
		_, o := selector.Evaluate(x, off, selector.Env{})
		t.Logf("%s: top-1 %.3f (BM25+stemming %.3f), recall@5 %.3f, off-topic rejected %.3f", c.set, s.Top1, s.BaselineStemTop1, s.Recall5, o.OffTopicRejected)
		if s.Top1 < c.top1-2.5/74 || o.OffTopicRejected < c.rej-0.0005 || math.Abs(s.BaselineStemTop1-c.stemTop1) > 0.0005 {
			t.Errorf("%s: top-1 %v (measured %v), off-topic rejected %v (measured %v), BM25+stemming %v (measured %v)",
				c.set, s.Top1, c.top1, o.OffTopicRejected, c.rej, s.BaselineStemTop1, c.stemTop1)
		}
	}
}
