package selector_test

import (
	"strings"
	"testing"
	"time"
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
		// Nor do apostrophes of elided words, though a possessive follows.
		{"late 'cause the students' bus broke down", "late 'cause the students' bus broke down"},
		{"rock 'n' roll, tell 'em 'bout it", "rock 'n' roll, tell 'em 'bout it"},
		{"wait 'til Friday, then play 'Hey Jude'", "wait 'til Friday, then play  "},
		// A quote that does not close, or closes inside a word, quotes nothing.
		{"say 'hello", "say 'hello"},
		{"the 'rock'n'roll hall", "the 'rock'n'roll hall"},
		{"a ' spaced ' quote", "a ' spaced ' quote"},
		{`say "he said 'hi' to me" now`, "say   now"},
		{"go to 'Lyon'.", "go to  ."},
		{"„Guten Tag“ sagen", "  sagen"},
		{`(see "the manual")`, "(see  )"},
		{`title:"Autumn Rain" please`, "title:  please"},
		{`use "$5 off" today`, "use   today"},
		{"say « bonjour » please", "say   please"},
		{"label it 'done'🙂 now", "label it  🙂 now"},
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
		// A span and its quotes (two bytes at least) become one space.
		if len(got) >= len(text) {
			t.Fatalf("Unquoted(%q) = %q: not shorter", text, got)
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

// TestQuotesReadOnce: a request full of quotes that never close, or of one
// phrase said thousands of times, is read in about the time of its length, not
// its square (a 200 KB request of opening quotes took 38 s).
func TestQuotesReadOnce(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{},
		sk("sql-query", "Writes SQL queries.", func(s *skill.Skill) { s.Triggers = []string{"sql"} }),
		sk("security-audit", "Audits code.", func(s *skill.Skill) { s.Triggers = []string{"sql injection"} }),
	)
	for name, text := range map[string]string{
		"unclosed quotes": strings.Repeat(` 'a "b „c`, 20000),
		"one phrase":      strings.Repeat("sql ", 50000),
		"nested phrases":  strings.Repeat("sql injection ", 20000),
	} {
		start := time.Now()
		d := decide(t, x, selector.Request{Text: text}, selector.Env{})
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s (%d bytes): %v", name, len(text), took)
		}
		if name != "unclosed quotes" && d.Primary == "" {
			t.Errorf("%s: no primary", name)
		}
		if c := d.Candidate("sql-query"); name == "one phrase" && (c == nil || len(c.Matched) > 3) {
			t.Errorf("one phrase: sql-query %+v: want it matched, the phrase once", c)
		}
	}
}

// TestQuotedExamplesAreNotCut: a skill's own phrases are read as written; only a
// request's quotes are left out. An example 'play "Bohemian Rhapsody"' is no
// phrase "play" that would fire on any request to play.
func TestQuotedExamplesAreNotCut(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{},
		sk("music", "Plays songs and albums.", func(s *skill.Skill) { s.Examples.Positive = []string{`play "Bohemian Rhapsody"`} }),
		sk("chess", "Plays a game of chess with you.", func(s *skill.Skill) { s.Triggers = []string{"chess"} }),
	)
	d := decide(t, x, selector.Request{Text: "play a game of chess with me"}, selector.Env{})
	if c := d.Candidate("music"); d.Primary != "chess" || c != nil && c.Source == selector.SourceRule {
		t.Errorf("primary %q, music %+v: want chess, music not by a phrase", d.Primary, c)
	}
	if d := decide(t, x, selector.Request{Text: "play bohemian rhapsody by queen"}, selector.Env{}); d.Primary != "music" || d.Candidate("music").Source != selector.SourceRule {
		t.Errorf("the example unquoted in a request: primary %q", d.Primary)
	}
}
