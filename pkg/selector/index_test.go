package selector_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
)

// A search keeps the BM25 term weights it works out; they depend on the average
// document length, so every change to the index must be reflected in them.
func TestIndexScoresFollowChanges(t *testing.T) {
	t.Parallel()
	docs := map[string]string{
		"pdf":        "Summarise PDF documents and reports.",
		"audio":      "Transcribe podcast audio to text, long recordings too.",
		"invoice":    "Extract totals from invoice PDF documents.",
		"calendar":   "Book meetings in the team calendar.",
		"translator": "Translate documents between languages, keeping the layout of PDF files.",
	}
	const query = "summarise the pdf documents and the audio"
	live := selector.NewIndex(selector.Weights{})
	for _, n := range []string{"pdf", "audio", "invoice", "calendar"} {
		live.Put(n, selector.Fields{Name: n, Description: docs[n]})
	}
	live.SearchEvidence(query, selector.Query{}) // the weights of the index as it was
	live.Put("translator", selector.Fields{Name: "translator", Description: docs["translator"]})
	live.Remove("calendar")
	docs["audio"] = "Transcribe audio."
	live.Put("audio", selector.Fields{Name: "audio", Description: docs["audio"]})

	fresh := selector.NewIndex(selector.Weights{})
	for _, n := range []string{"pdf", "audio", "invoice", "translator"} {
		fresh.Put(n, selector.Fields{Name: n, Description: docs[n]})
	}
	got, gotEv := live.SearchEvidence(query, selector.Query{})
	want, wantEv := fresh.SearchEvidence(query, selector.Query{})
	if gotEv != wantEv {
		t.Errorf("evidence = %+v, want %+v (a fresh index's)", gotEv, wantEv)
	}
	score := map[string]selector.Hit{}
	for _, h := range want {
		score[h.Name] = h
	}
	if len(got) != len(want) {
		t.Fatalf("hits = %+v, want %+v", got, want)
	}
	for _, h := range got {
		w, ok := score[h.Name]
		if !ok || h.BM25 != w.BM25 || h.Coverage != w.Coverage || h.Strength != w.Strength {
			t.Errorf("hit %+v, want %+v (a fresh index's)", h, w)
		}
	}
}

// A language named in a request finds its two-letter code in a skill's name
// (Finnish finds fi), but two letters in a request are not taken for a language:
// the ES of an Elasticsearch index is not Spanish, nor a .pt checkpoint Portuguese.
func TestLanguageCodesAreOneWay(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	for _, lang := range []string{"spanish", "dutch", "arabic", "portuguese", "finnish"} {
		x.Put(lang+"-tutor", selector.Fields{Name: lang + "-tutor", Description: "Lessons in " + lang + " for beginners."})
	}
	x.Put("reader-fi", selector.Fields{Name: "reader-fi", Description: "Reads books aloud."})
	for _, text := range []string{"query the ES index", "NL to SQL", "AR overlay", "load a .pt checkpoint", "fi reports"} {
		hits, _ := x.SearchEvidence(text, selector.Query{})
		for _, h := range hits {
			if strings.HasSuffix(h.Name, "-tutor") {
				t.Errorf("%q: hits %+v, want no language's tutor", text, hits)
				break
			}
		}
	}
	hits, _ := x.SearchEvidence("read me a book aloud in Finnish", selector.Query{})
	if len(hits) < 2 || hits[0].Name != "reader-fi" || hits[1].Name != "finnish-tutor" {
		t.Errorf("Finnish: hits %+v, want reader-fi (its code) then finnish-tutor", hits)
	}
}

// Of skills whose names hold the same words, the one whose name has two adjacent
// words in the order the request says them ranks first, its words found as
// themselves or as synonyms (French and fr): without the name's order, the two
// translators here score the same.
func TestNameOrder(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	const d = "Translation model between French and English text."
	x.Put("opus-mt-en-fr", selector.Fields{Name: "opus-mt-en-fr", Description: d})
	x.Put("opus-mt-fr-en", selector.Fields{Name: "opus-mt-fr-en", Description: d})
	x.Put("list-files", selector.Fields{Name: "list-files", Description: "Files of a directory, as a list."})
	x.Put("files-list", selector.Fields{Name: "files-list", Description: "Files of a directory, as a list."})
	for _, c := range []struct{ text, want string }{
		{"translate this French email into English", "opus-mt-fr-en"},
		{"an English text to translate to French", "opus-mt-en-fr"},
		{"list the files of my directory", "list-files"},
		{"the files of my directory, as a list", "files-list"},
	} {
		hits, _ := x.SearchEvidence(c.text, selector.Query{})
		if len(hits) < 2 || hits[0].Name != c.want || hits[0].BM25 <= hits[1].BM25 {
			t.Errorf("%q: hits %+v, want %s first, ahead", c.text, hits, c.want)
		}
	}
}

// A name or a number no skill uses is a value of the request, not what it asks
// for: it does not make the request less surely for the catalog, as a word of
// another subject does. A capitalised word that starts a sentence is no value.
func TestValuesDoNotWeakenARequest(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	x.Put("weather", selector.Fields{Name: "weather", Description: "Get the weather forecast for a city on a date."})
	x.Put("taxi", selector.Fields{Name: "taxi", Description: "Book a taxi ride to an address."})
	cov := func(text string) float64 {
		hits, ev := x.SearchEvidence(text, selector.Query{})
		if len(hits) == 0 || hits[0].Name != "weather" {
			t.Fatalf("%q: hits %+v, want weather first", text, hits)
		}
		return ev.Coverage
	}
	plain := cov("the weather forecast")
	for _, text := range []string{
		"the weather forecast in Oakland on the 5th",
		"the weather forecast for 2026. In Sausalito!",
		"Weather forecast, Montara, 14",
		"the weather forecast for the 5th in Tampa", // 5th's parts are values; Tampa's letters are no part
		"THE WEATHER FORECAST FOR 2026",             // numbers are values in any case
	} {
		if got := cov(text); got != plain {
			t.Errorf("%q: coverage %.3f, want %.3f, as without its values", text, got, plain)
		}
	}
	for _, text := range []string{
		"the weather forecast for my hedgehogs",
		"the weather forecast. Hedgehogs?",
		"the weather forecast! Hedgehogs",
		"the weather forecast? Hedgehogs",
		"the weather forecast\nHedgehogs",
		"Hedgehogs and the weather forecast",
		// In Title Case or ALL CAPS every word is capitalised: capitals tell no values.
		"The Weather Forecast For My Hedgehogs",
		"THE WEATHER FORECAST FOR MY HEDGEHOGS",
	} {
		if got := cov(text); got >= plain {
			t.Errorf("%q: coverage %.3f, want less than %.3f: its unknown word is what it asks about", text, got, plain)
		}
	}
}

func FuzzValueWords(f *testing.F) {
	for _, s := range []string{
		"the weather in Oakland on the 5th", "Hé. Ça va? 12ème", "a.B!c?D 9", "",
		"don't stop", "cafe\u0301 Cafe\u0301", "the \u0665th of May", "rain \U0001F327 Rain",
		"THE WEATHER IN OAKLAND", "The Weather In Oakland", "weather\nOakland", "\xff\xfeOak",
		strings.Repeat("the weather in Oakland ", 20),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, n := selector.ValueWords(s)
		// valueWords reads the words Words splits, one for one, or a request's
		// values would be marked on other words.
		if w := len(selector.Words(s)); n != w {
			t.Fatalf("%q: valueWords counts %d words, Words %d", s, n, w)
		}
		if n < 64 && m>>n != 0 {
			t.Fatalf("%q: %d words, value mask %b", s, n, m)
		}
	})
}

// Two adjacent words of a request that a skill says side by side ("find
// restaurants") are more evidence that the request is for the catalog than the
// same words in another order; a pair no skill says adds none.
func TestPairsAreEvidence(t *testing.T) {
	t.Parallel()
	x := selector.NewIndex(selector.Weights{})
	x.Put("restaurants", selector.Fields{Name: "restaurants", Description: "Find restaurants in a city by cuisine and price."})
	x.Put("hotels", selector.Fields{Name: "hotels", Description: "Search hotels in a city and reserve a room."})
	x.Put("movies", selector.Fields{Name: "movies", Description: "Find movies showing in a theatre near you."})
	x.Put("flights", selector.Fields{Name: "flights", Description: "Search flights between two cities on a date."})
	for _, search := range []func(string, selector.Query) ([]selector.Hit, selector.Evidence){x.SearchEvidence, x.SearchExhaustive} {
		ev := func(text string) selector.Evidence {
			hits, ev := search(text, selector.Query{})
			if len(hits) == 0 || hits[0].Name != "restaurants" {
				t.Fatalf("%q: hits %+v, want restaurants first", text, hits)
			}
			if hits[0].Coverage != ev.Coverage || hits[0].Strength != ev.Strength {
				t.Errorf("%q: best hit %+v, evidence %+v", text, hits[0], ev)
			}
			return ev
		}
		// The hedgehogs, a word no skill uses, keep coverage below 1.
		pair, apart := ev("find restaurants for my hedgehogs"), ev("restaurants find for my hedgehogs")
		if !(pair.Coverage > apart.Coverage && pair.Strength > apart.Strength) {
			t.Errorf("evidence %+v for a pair the skill says, %+v for its words in another order: want more", pair, apart)
		}
		// A pair said twice counts once, as a word does.
		if once, twice := ev("find restaurants for my hedgehogs"), ev("find restaurants, find restaurants for my hedgehogs"); once != twice {
			t.Errorf("evidence %+v for a pair said once, %+v for it said twice: want the same", once, twice)
		}
		if ev("restaurants cuisine") != ev("cuisine restaurants") {
			t.Error("a pair no skill says moved the evidence")
		}
		if c := ev("find restaurants by cuisine").Coverage; c > 1 {
			t.Errorf("coverage %v, want at most 1", c)
		}
	}
}

// A word the request says twice orders the hits as Okapi BM25's query-term
// frequency does: "weather" said twice puts the weather skill above the charts
// one, which "charts" said once ties (and its name would put first). How surely
// the request is for the catalog does not move: a repeat adds no evidence.
func TestARepeatedWordOrdersMore(t *testing.T) {
	t.Parallel()
	x := indexOf(map[string]string{
		"charts":  "Aeronautical charts for pilots.",
		"weather": "Aviation weather for pilots.",
	})
	for _, search := range []func(string, selector.Query) ([]selector.Hit, selector.Evidence){x.SearchEvidence, x.SearchExhaustive} {
		once, ev1 := search("charts and weather", selector.Query{})
		twice, ev2 := search("charts and weather, the weather", selector.Query{})
		if len(once) != 2 || once[0].Name != "charts" || once[0].BM25 != once[1].BM25 {
			t.Fatalf("each word once: hits %+v, want a tie, charts first by name", once)
		}
		if len(twice) != 2 || twice[0].Name != "weather" || !(twice[0].BM25 > twice[1].BM25) {
			t.Errorf("weather twice: hits %+v, want weather first", twice)
		}
		if ev1 != ev2 {
			t.Errorf("evidence %+v with each word once, %+v with weather twice: want the same", ev1, ev2)
		}
	}
}

// A request word no skill uses that finds a synonym stands for it in the order
// of the hits ("a psychiatrist" for a skill finding therapists), though its
// evidence stays a synonym's.
func TestSynonymOfAnUnknownWordOrdersInFull(t *testing.T) {
	t.Parallel()
	x := indexOf(map[string]string{
		"find-therapist":  "Find a therapist in a city who accepts new patients, by the therapist's specialization.",
		"insurance-quote": "Get a quote for the insurance of a car, a home or a boat.",
		"book-flight":     "Book a flight between two cities.",
		"play-song":       "Play a song by an artist.",
		"weather":         "Get the weather forecast for a city.",
	})
	hits, _ := x.SearchEvidence("a psychiatrist who takes my insurance", selector.Query{})
	if len(hits) < 2 || hits[0].Name != "find-therapist" {
		t.Fatalf("hits = %+v, want find-therapist first", hits)
	}
	// How surely the request is for the catalog is still a synonym's: the word
	// no skill uses is not the skill's own.
	if hits[0].Coverage >= hits[1].Coverage {
		t.Errorf("coverage of %s %.3f, of %s %.3f: the synonym should count less than a word the request says", hits[0].Name, hits[0].Coverage, hits[1].Name, hits[1].Coverage)
	}
}

// A value of a request (a name capitalised mid-sentence, a number) that no skill
// uses is not taken for a near spelling of a word a skill uses: David is not
// avoid. Written in lower case it is no value, and may be.
func TestValuesAreNotNearSpellings(t *testing.T) {
	t.Parallel()
	x := indexOf(map[string]string{
		"ask-user":  "Ask the user a question, to avoid guessing.",
		"play-song": "Play a song by an artist.",
		"weather":   "Get the weather forecast for a city.",
	})
	near := func(q string) bool {
		hits, _ := x.SearchEvidence(q, selector.Query{})
		for _, h := range hits {
			for _, m := range h.Matched {
				if m == "david~avoid" {
					return true
				}
			}
		}
		return false
	}
	if near("I'd like a song by David Guetta") {
		t.Errorf("David, a name, was read as avoid")
	}
	if !near("i'd like a song by david guetta") {
		t.Errorf("david in a request in lower case was not read as avoid")
	}
}

// "I'm looking for" asks for something without saying what: it does not find a
// skill that looks things up.
func TestLookingForSaysNothing(t *testing.T) {
	t.Parallel()
	x := indexOf(map[string]string{
		"users-lookupbyemail": "Look up a user by their email address.",
		"find-events":         "Find cultural events such as concerts and plays.",
		"weather":             "Get the weather forecast for a city.",
	})
	hits, _ := x.SearchEvidence("I'm looking for a theater event in London", selector.Query{})
	if len(hits) != 1 || hits[0].Name != "find-events" {
		t.Fatalf("hits = %+v, want find-events only", hits)
	}
}

// indexOf is an index of skills described by name only: name to description.
func indexOf(skills map[string]string) *selector.Index {
	x := selector.NewIndex(selector.Weights{})
	for n, d := range skills {
		x.Put(n, selector.Fields{Name: n, Description: d})
	}
	return x
}
