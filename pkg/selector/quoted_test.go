package selector_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

func TestUnquoted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"translate 'where is the train station' into German", "translate   into German"},
		{`summarize "The Train to Busan" for me`, "summarize   for me"},
		{"play “Rain” by the Beatles", "play   by the Beatles"},
		{"add ‘call plumber’ to my list", "add   to my list"},
		{"translate «bonjour» please", "translate   please"},
		{"labels 'a' and 'b', then stop", "labels   and  , then stop"},
		// Apostrophes in words open no quote.
		{"my kid's school and the students' notes", "my kid's school and the students' notes"},
		{"it's the 90's", "it's the 90's"},
		// A quote that does not close, or closes inside a word, quotes nothing.
		{"say 'hello", "say 'hello"},
		{"the 'rock'n'roll hall", "the 'rock'n'roll hall"},
		{"a ' spaced ' quote", "a ' spaced ' quote"},
		// A request that is all quotes is kept whole.
		{`"find me a train"`, `"find me a train"`},
		{`'train' 'rain'`, `'train' 'rain'`},
		{"", ""},
	} {
		if got := selector.Unquoted(c.in); got != c.want {
			t.Errorf("Unquoted(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzUnquoted(f *testing.F) {
	for _, s := range []string{"translate 'where is the train' into German", `"a" "b"`, "“x”", "'", "it's", "« »", "'a\x00'", "„x“ y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := selector.Unquoted(text)
		if got == text {
			return
		}
		if len(got) >= len(text)+strings.Count(text, "'")+strings.Count(text, `"`) {
			t.Fatalf("Unquoted(%q) = %q: longer", text, got)
		}
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("Unquoted(%q) = %q: invalid UTF-8", text, got)
		}
		if selector.Unquoted(text) != got {
			t.Fatal("not deterministic")
		}
	})
}

// TestQuotedTextFiresNoPhrase: what a request quotes is what it works on, so a
// trigger phrase or an anti-trigger inside quotes neither recalls nor vetoes a
// skill; outside them it does, as before.
func TestQuotedTextFiresNoPhrase(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{},
		sk("train-tickets", "Books train tickets between stations.", func(s *skill.Skill) { s.Triggers = []string{"train"} }),
		sk("translator", "Translates text between languages.", func(s *skill.Skill) {
			s.Triggers = []string{"translate"}
			s.AntiTriggers = []string{"source code"}
		}),
		sk("weather", "Weather forecast for a city.", func(s *skill.Skill) { s.Triggers = []string{"rain"} }),
	)
	d := decide(t, x, selector.Request{Text: "translate 'where is the train station' into German"}, selector.Env{})
	if c := d.Candidate("train-tickets"); d.Primary != "translator" || c != nil && c.Source == selector.SourceRule {
		t.Errorf("quoted trigger: primary %q, train-tickets %+v", d.Primary, c)
	}
	if d := decide(t, x, selector.Request{Text: "book a train to Lyon"}, selector.Env{}); d.Primary != "train-tickets" || d.Candidate("train-tickets").Source != selector.SourceRule {
		t.Errorf("trigger outside quotes: primary %q", d.Primary)
	}
	d = decide(t, x, selector.Request{Text: `write a poem called "Autumn Rain"`}, selector.Env{})
	if c := d.Candidate("weather"); d.Primary != "" || c != nil && c.Source == selector.SourceRule {
		t.Errorf("quoted one-word trigger: primary %q, weather %+v", d.Primary, c)
	}
	// The anti-trigger quoted is the text to translate, not what is asked.
	if d := decide(t, x, selector.Request{Text: `translate "the source code is attached" into French`}, selector.Env{}); d.Primary != "translator" {
		t.Errorf("quoted anti-trigger: primary %q, want translator", d.Primary)
	}
	if d := decide(t, x, selector.Request{Text: "translate the source code into Rust"}, selector.Env{}); d.Primary == "translator" {
		t.Error("anti-trigger outside quotes: translator chosen")
	}
}

// TestLongerPhraseWins: a phrase inside a longer phrase of another skill is that
// skill's: "sql injection" is a security audit's, not the "sql" of a query writer;
// the query writer is still found by the word.
func TestLongerPhraseWins(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{},
		sk("sql-query", "Writes SQL queries for a database.", func(s *skill.Skill) {
			s.Triggers = []string{"sql", "query"}
			s.CostHint = "low"
		}),
		sk("security-audit", "Audits code for vulnerabilities.", func(s *skill.Skill) { s.Triggers = []string{"sql injection", "xss"} }),
	)
	d := decide(t, x, selector.Request{Text: "check this login handler for SQL injection or other holes"}, selector.Env{})
	c := d.Candidate("sql-query")
	if d.Primary != "security-audit" || c == nil || c.Source == selector.SourceRule {
		t.Fatalf("primary %q, sql-query %+v: want security-audit, sql-query found by words only", d.Primary, c)
	}
	if d := decide(t, x, selector.Request{Text: "write an sql query for last month's orders"}, selector.Env{}); d.Primary != "sql-query" || d.Candidate("sql-query").Source != selector.SourceRule {
		t.Errorf("the short phrase alone: primary %q", d.Primary)
	}
}
