package selector

import (
	"math"
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
)

// The Okapi formula reproduces rank_bm25's published example (its README: corpus
// "Hello there good man!", "It is quite windy in London", "How is the weather
// today?" split on spaces; query "windy London"; BM25Okapi with k1 1.5, b 0.75 and
// idf ln((N - df + 0.5) / (df + 0.5)) scores [0, 0.93729472, 0]).
func TestOkapiMatchesRankBM25(t *testing.T) {
	t.Parallel()
	robertson := func(n, df float64) float64 { return math.Log((n - df + 0.5) / (df + 0.5)) }
	lens := []float64{4, 6, 5}
	avg := (4 + 6 + 5) / 3.0
	got := okapi(1, 1, 3, lens[1], avg, 1.5, 0.75, robertson) * 2 // windy, London: tf 1, df 1 each
	if math.Abs(got-0.93729472) > 1e-8 {
		t.Fatalf("score %.8f, rank_bm25 publishes 0.93729472", got)
	}
}

// The baseline's scores, with k1 1.2, b 0.75 and Lucene's idf, on a fixture worked
// by hand (ln(1 + (N - df + 0.5) / (df + 0.5)) per word, the length norm per
// document): the words are lower-cased runs of letters and digits, and a word
// repeated in the query counts again.
func TestBaselineScores(t *testing.T) {
	t.Parallel()
	skills := []*skill.Skill{
		{Name: "pdf-summarizer", Description: "Summarize PDF documents into key points."},
		{Name: "meeting-notes", Description: "Summarize a meeting transcript into notes and action items."},
		{Name: "weather", Description: "Weather forecast for a city."},
	}
	b := NewBaseline(skills, false)
	for q, want := range map[string][]float64{
		"summarize the PDF":   {1.841808, 0.415598, 0},
		"weather in the city": {0, 0, 2.571637},
		"notes notes meeting": {0, 3.711854, 0},
	} {
		got := b.Scores(q)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Errorf("%q: scores %.6f, want %.6f", q, got, want)
				break
			}
		}
	}
	// Stemming meets word forms: "summaries" finds summarize only when stemmed.
	if got := NewBaseline(skills, false).Search("summarizing", 5); len(got) != 0 {
		t.Errorf("unstemmed: %v", got)
	}
	if got := NewBaseline(skills, true).Search("summarizing", 5); len(got) != 2 || got[0] != "pdf-summarizer" {
		t.Errorf("stemmed: %v", got)
	}
}
