package selector_test

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
)

// TestGorillaHeldOut routes the held-out halves of Gorilla's APIBench sets
// (testdata/routing/public/gorilla-*), which nothing in this project was chosen
// on, with the default settings, and fails unless the router is above
// BM25+stemming on the same text at the top and in its first five, as
// docs/routing.md reports. Measured (router against BM25+stemming, top-1 /
// recall@5): TorchHub 0.169 / 0.315 against 0.124 / 0.292, TF Hub 0.220 / 0.539
// against 0.199 / 0.473, Hugging Face 0.168 / 0.324 against 0.135 / 0.263.
func TestGorillaHeldOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set           string
		skills, cases int
	}{
		{"gorilla-torchhub", 94, 89},
		{"gorilla-tfhub", 129, 336},
		{"gorilla-huggingface", 934, 392},
	} {
		t.Run(tc.set, func(t *testing.T) {
			t.Parallel()
			s, _ := routePublic(t, tc.set, tc.skills, "heldout.jsonl", tc.cases, "")
			t.Logf("top-1 %.3f, recall@5 %.3f (BM25+stemming %.3f / %.3f)",
				s.Top1, s.Recall5, s.BaselineStemTop1, s.BaselineStemRecall5)
			if s.Top1 <= s.BaselineStemTop1 || s.Recall5 <= s.BaselineStemRecall5 {
				t.Errorf("top-1 %.3f (BM25+stemming %.3f), recall@5 %.3f (BM25+stemming %.3f): want both above",
					s.Top1, s.BaselineStemTop1, s.Recall5, s.BaselineStemRecall5)
			}
		})
	}
}

// TestTorchHubTrainingRequests routes the 837 requests of Gorilla's TorchHub training
// split (testdata/routing/public/gorilla-torchhub/heldout-train.jsonl), which nothing
// in this project was chosen on, with the default settings, and fails unless the
// router stays above BM25+stemming on the same text: at the top, and in its first five
// by at least 25 requests (it is 34 above: 0.351 against 0.311).
func TestTorchHubTrainingRequests(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/public/gorilla-torchhub/"
	skills := publicSkills(t, dir, 94)
	names := map[string]bool{}
	for _, sk := range skills {
		names[sk.Name] = true
	}
	in := readCasesFile(t, dir+"heldout-train.jsonl")
	if len(in) != 837 {
		t.Fatalf("%d cases, want 837", len(in))
	}
	for _, c := range in {
		for _, e := range append([]string{c.Expect}, c.Any...) {
			if !names[e] {
				t.Fatalf("%s: expects %q, which is not in the catalog", c.Origin, e)
			}
		}
	}
	_, s := selector.Evaluate(newSel(t, selector.Config{}, skills...), in, selector.Env{})
	t.Logf("top-1 %.3f, recall@5 %.3f (BM25 %.3f / %.3f, BM25+stemming %.3f / %.3f)",
		s.Top1, s.Recall5, s.BaselineTop1, s.BaselineRecall5, s.BaselineStemTop1, s.BaselineStemRecall5)
	// Measured: top-1 0.151, recall@5 0.351; BM25+stemming 0.131 / 0.311.
	if s.Top1 <= s.BaselineStemTop1 || s.Recall5 < s.BaselineStemRecall5+25.0/837 {
		t.Errorf("top-1 %.3f (BM25+stemming %.3f), recall@5 %.3f (BM25+stemming %.3f, want 25 requests above it)",
			s.Top1, s.BaselineStemTop1, s.Recall5, s.BaselineStemRecall5)
	}
}
