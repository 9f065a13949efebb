package selector_test

import "testing"

// TestAPIBankHeldOut routes the held-out half of API-Bank's dialogues
// (testdata/routing/public/apibank), which nothing in this project was chosen on,
// with the default settings, and fails unless the router stays above
// BM25+stemming on the same text (measured: 0.525 / 0.788 against 0.336 / 0.687)
// and rejects three in four of the other domain's requests (measured 79 of 100).
func TestAPIBankHeldOut(t *testing.T) {
	t.Parallel()
	s, o := routePublic(t, "apibank", 48, "heldout.jsonl", 217, "offtopic-heldout.jsonl")
	t.Logf("top-1 %.3f, recall@5 %.3f (BM25+stemming %.3f / %.3f); off-topic rejected %.3f",
		s.Top1, s.Recall5, s.BaselineStemTop1, s.BaselineStemRecall5, o.OffTopicRejected)
	if s.Top1 < s.BaselineStemTop1+0.15 || s.Recall5 <= s.BaselineStemRecall5 || o.OffTopicRejected < 0.75 {
		t.Errorf("top-1 %.3f (BM25+stemming %.3f, want 0.15 above), recall@5 %.3f (BM25+stemming %.3f), off-topic rejected %.3f (want ≥ 0.75)",
			s.Top1, s.BaselineStemTop1, s.Recall5, s.BaselineStemRecall5, o.OffTopicRejected)
	}
}
