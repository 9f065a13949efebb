package selector_test

import (
	"slices"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
)

// Pseudo-relevance feedback recalls a skill that shares none of the request's
// words but the words that characterise the skills the request found, and leaves
// the request's evidence (how surely it is for the catalog) as it was.
func TestFeedback(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	x.Put("pdf-summarizer", selector.Fields{Name: "pdf-summarizer", Description: "Summarize PDF files into a digest of key points."})
	x.Put("pdf-digest", selector.Fields{Name: "pdf-digest", Description: "Condense PDF files into a digest of key points."})
	x.Put("report-digest", selector.Fields{Name: "report-digest", Description: "Condense long reports into a digest of key points."})
	x.Put("weather", selector.Fields{Name: "weather", Description: "Weather forecast for a city."})
	x.Put("calendar", selector.Fields{Name: "calendar", Description: "Book a meeting in a calendar."})
	names := func(hs []selector.Hit) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	plain, ev := x.SearchEvidence("summarize this pdf", selector.Query{})
	if got := names(plain); !slices.Equal(got, []string{"pdf-summarizer", "pdf-digest"}) {
		t.Fatalf("without feedback: %v", got)
	}
	fed, fev := x.SearchEvidence("summarize this pdf", selector.Query{FeedbackWeight: 0.3})
	if got := names(fed); !slices.Equal(got, []string{"pdf-summarizer", "pdf-digest", "report-digest"}) {
		t.Fatalf("with feedback: %v", got)
	}
	if fev != ev || ev.Coverage != plain[0].Coverage {
		t.Errorf("evidence %+v with feedback, %+v without (best coverage %v)", fev, ev, plain[0].Coverage)
	}
	if fed[2].BM25 >= fed[1].BM25 {
		t.Errorf("a skill found by feedback alone scores %v, above one matching the request, %v", fed[2].BM25, fed[1].BM25)
	}
}

// A long request gets feedback by default, a short one does not: a request of
// eight distinct words or more (stop words left out) is expanded with what its best
// hits share, unless LongFeedbackWeight is negative.
func TestFeedbackOnLongRequests(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	x.Put("pdf-summarizer", selector.Fields{Name: "pdf-summarizer", Description: "Summarize PDF files into a digest of key points."})
	x.Put("pdf-digest", selector.Fields{Name: "pdf-digest", Description: "Condense PDF files into a digest of key points."})
	x.Put("report-digest", selector.Fields{Name: "report-digest", Description: "Condense long reports into a digest of key points."})
	x.Put("weather", selector.Fields{Name: "weather", Description: "Weather forecast for a city."})
	has := func(hs []selector.Hit, name string) bool {
		return slices.ContainsFunc(hs, func(h selector.Hit) bool { return h.Name == name })
	}
	const long = "summarize this pdf our auditors sent about the quarterly board review before tomorrow morning"
	const short = "summarize this pdf our auditors sent"
	for _, c := range []struct {
		text string
		q    selector.Query
		want bool
	}{
		{long, selector.Query{}, true},
		{long, selector.Query{LongFeedbackWeight: -1}, false},
		{long, selector.Query{LongRequest: 20}, false},
		{short, selector.Query{}, false},
		{short, selector.Query{LongRequest: 3}, true},
	} {
		hs, _ := x.SearchEvidence(c.text, c.q)
		if got := has(hs, "report-digest"); got != c.want {
			t.Errorf("%q %+v: report-digest found %v, want %v (%v)", c.text, c.q, got, c.want, hs)
		}
	}
}
