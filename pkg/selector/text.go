package selector

import (
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// DefaultTextFields are the data fields a trigger's routing text is taken from, in
// order: the first that holds a non-blank string wins.
var DefaultTextFields = []string{"query", "text", "message", "prompt"}

// RequestType is the CloudEvent type of a plain text request; its data holds
// the text in one of DefaultTextFields, {"query": "..."} as the CLI sends it.
const RequestType = "io.skillbus.request"

// TextOf returns the routing text of a trigger's JSON data: the first of fields
// (DefaultTextFields when nil) that holds a string in a JSON object. Data that is
// not a JSON object has no text.
func TextOf(data []byte, fields []string) string {
	if len(data) == 0 {
		return ""
	}
	if fields == nil {
		fields = DefaultTextFields
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	for _, f := range fields {
		raw, ok := m[f]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// Mentions returns the skill names a text invokes explicitly, in order and without
// repeats: $name, @name (at the start or after a non-alphanumeric character, so an
// e-mail address is not a mention) and "使用 name skill". Names are lowercase; the
// caller keeps only those the catalog holds.
func Mentions(text string) []string {
	var out []string
	add := func(n string) {
		n = strings.ToLower(strings.TrimRight(n, "-_"))
		if n == "" {
			return
		}
		for _, o := range out {
			if o == n {
				return
			}
		}
		out = append(out, n)
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '$' && c != '@' {
			continue
		}
		if i > 0 {
			r, _ := utf8.DecodeLastRuneInString(text[:i])
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		j := i + 1
		for j < len(text) && isNameByte(text[j]) {
			j++
		}
		if j > i+1 && isAlnum(text[i+1]) {
			add(text[i+1 : j])
		}
		if j > i+1 {
			i = j - 1
		}
	}
	const use, sk = "使用", "skill"
	for rest := text; ; {
		k := strings.Index(rest, use)
		if k < 0 {
			break
		}
		rest = rest[k+len(use):]
		t := strings.TrimLeft(rest, " \t")
		j := 0
		for j < len(t) && isNameByte(t[j]) {
			j++
		}
		if j == 0 || !isAlnum(t[0]) {
			continue
		}
		after := strings.TrimLeft(t[j:], " \t")
		if len(after) >= len(sk) && strings.EqualFold(after[:len(sk)], sk) {
			add(t[:j])
		}
	}
	return out
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isNameByte(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

// fillers are words of requests that say nothing about what is wanted, on top of
// the stemmer's English stop words ("how many", "let me know", "tell me" and
// "I'm looking for" ask for something without saying what: measured on the
// public tuning sets, see docs/routing.md).
var fillers = map[string]bool{
	"please": true, "pls": true, "plz": true, "kindly": true, "could": true, "would": true,
	"can": true, "want": true, "wanna": true, "need": true, "hey": true, "hi": true,
	"hello": true, "thanks": true, "thank": true, "let": true, "lets": true, "just": true,
	"something": true, "someone": true, "anything": true, "also": true, "via": true,
	"skill": true, "quickly": true, "us": true, "like": true, "get": true, "give": true,
	"make": true, "go": true, "ok": true, "okay": true, "now": true, "today": true,
	"many": true, "know": true, "tell": true, "looking": true,
}

// Words splits text into lowercase words: runs of letters and digits. Every other
// character separates, so a skill name pdf-summarizer is two words.
func Words(text string) []string { return appendWords(nil, text) }

// appendWords appends the Words of text to out.
func appendWords(out []string, text string) []string {
	start := -1
	lower := true
	for i, r := range text {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
				if start < 0 {
					start = i
				}
				continue
			}
			if 'A' <= r && r <= 'Z' {
				if start < 0 {
					start = i
				}
				lower = false
				continue
			}
		} else if isWordRune(r) {
			if start < 0 {
				start = i
			}
			lower = false
			continue
		}
		if start >= 0 {
			out = appendWord(out, text[start:i], lower)
			start, lower = -1, true
		}
	}
	if start >= 0 {
		out = appendWord(out, text[start:], lower)
	}
	return out
}

// isWordRune says whether r belongs to a word: Words splits text into runs of them.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// scanWords calls fn with each of the Words of text as written (not lower-cased),
// and whether a sentence starts with it: the text's first word, and the first after
// a full stop, a question mark, an exclamation mark or a line break.
func scanWords(text string, fn func(w string, starts bool)) {
	start, sentence := -1, true
	for i, r := range text {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			fn(text[start:i], sentence)
			start, sentence = -1, false
		}
		if r == '.' || r == '?' || r == '!' || r == '\n' {
			sentence = true
		}
	}
	if start >= 0 {
		fn(text[start:], sentence)
	}
}

// valueWords marks the Words of text (bit i: the i-th, of the first 64) that read
// as values rather than what a request asks for, and counts the words: a word
// starting with a digit (2016, 5th), or a capitalised one that starts no sentence
// (Oakland, Dumbo, BERT). Capitals tell values only in text written in mixed case,
// where words starting in lower case are at least as many as those capitalised
// mid-sentence: in Title Case or ALL CAPS every word is capitalised, values or not.
func valueWords(text string) (mask uint64, n int) {
	var digits, caps uint64
	lower, capital := 0, 0
	scanWords(text, func(w string, starts bool) {
		r, _ := utf8.DecodeRuneInString(w)
		switch {
		case unicode.IsDigit(r):
			if n < 64 {
				digits |= 1 << n
			}
		case unicode.IsUpper(r) && !starts:
			capital++
			if n < 64 {
				caps |= 1 << n
			}
		case unicode.IsLower(r):
			lower++
		}
		n++
	})
	if lower > 0 && lower >= capital {
		return digits | caps, n
	}
	return digits, n
}

// valueParts are the parts of text's joined words (5th: 5 and th; iPhone15: i,
// phone and 15) that are parts of its values (values: valueWords) and of none of
// its other words. It reads text once.
func valueParts(text string, values uint64) map[string]bool {
	in := map[string]bool{} // part -> only in values so far
	j := 0
	scanWords(text, func(o string, _ bool) {
		value := j < 64 && values&(1<<j) != 0
		for _, w := range Words(splitJoined(o)) {
			if only, ok := in[w]; !ok || only {
				in[w] = value
			}
		}
		j++
	})
	maps.DeleteFunc(in, func(_ string, only bool) bool { return !only })
	return in
}

func appendWord(out []string, w string, lower bool) []string {
	if !lower {
		w = fold(strings.ToLower(w))
	}
	return append(out, w)
}

// fold removes diacritics from Latin letters (résumé → resume), so accented and
// plain spellings meet.
func fold(w string) string {
	ascii := true
	for i := 0; i < len(w); i++ {
		ascii = ascii && w[i] < utf8.RuneSelf
	}
	if ascii {
		return w
	}
	t := folders.Get().(transform.Transformer)
	defer folders.Put(t)
	out, _, err := transform.String(t, w)
	if err != nil {
		return w
	}
	return out
}

// folders holds the diacritic-removing transformers. A transformer chain keeps state
// while it runs, so each use takes one of its own: routers decide concurrently.
var folders = sync.Pool{New: func() any {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}}

// Terms turns text into index terms: words without stop words, stemmed with the
// Snowball English stemmer. Words with digits or non-ASCII letters are kept as they
// are.
func Terms(text string) []string {
	ws := Words(text)
	out := ws[:0]
	for _, w := range ws {
		if t, ok := Term(w); ok {
			out = append(out, t)
		}
	}
	return out
}

// Term is the index term of one lowercase word, and false for a stop word.
func Term(w string) (string, bool) {
	if len(w) < 2 {
		return "", false
	}
	if fillers[w] || english.IsStopWord(w) {
		return "", false
	}
	if !isASCIILetters(w) {
		return w, true
	}
	return english.Stem(w, false), true
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// containsPhrase reports whether phrase occurs in words as consecutive words: the
// text contains the phrase case-insensitively, on word boundaries.
func containsPhrase(words []string, phrase []string) bool {
	if len(phrase) == 0 || len(phrase) > len(words) {
		return false
	}
outer:
	for i := 0; i+len(phrase) <= len(words); i++ {
		for j, p := range phrase {
			if words[i+j] != p {
				continue outer
			}
		}
		return true
	}
	return false
}

// WordParts is Words plus the parts of words that join several: camelCase and
// PascalCase (getWeather, PDFSummarizer) and letters next to digits (resnet50), so
// a tool named WeatherTool is found by "weather". A word and its parts are both
// kept: a request may use either.
func WordParts(text string) []string { return appendParts(Words(text), text) }

// appendParts appends to ws, the Words of text, the parts of its joined words.
func appendParts(ws []string, text string) []string {
	split := splitJoined(text)
	if split == text {
		return ws
	}
	have := make(map[string]bool, len(ws))
	for _, w := range ws {
		have[w] = true
	}
	for _, p := range Words(split) {
		if !have[p] {
			ws = append(ws, p)
		}
	}
	return ws
}

// splitJoined puts a space where a word changes from lower to upper case, from an
// upper-case run to a capitalised word (PDFReader: PDF Reader), and between letters
// and digits. It returns text itself, without allocating, when there is no such
// place: requests rarely have one.
func splitJoined(text string) string {
	var b *strings.Builder
	var prev rune
	for i, r := range text {
		// The width read, not utf8.RuneLen(r): an invalid byte is read as
		// utf8.RuneError, which takes three bytes to write but one here.
		_, w := utf8.DecodeRuneInString(text[i:])
		if i > 0 && joinBreak(prev, r, text[i+w:]) {
			if b == nil {
				b = &strings.Builder{}
				b.Grow(len(text) + 8)
				b.WriteString(text[:i])
			}
			b.WriteByte(' ')
		}
		if b != nil {
			b.WriteRune(r)
		}
		prev = r
	}
	if b == nil {
		return text
	}
	return b.String()
}

func joinBreak(p, r rune, rest string) bool {
	switch {
	case unicode.IsLower(p) && unicode.IsUpper(r):
		return true
	case unicode.IsUpper(p) && unicode.IsUpper(r):
		next, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLower(next)
	case unicode.IsLetter(p) && unicode.IsDigit(r), unicode.IsDigit(p) && unicode.IsLetter(r):
		return true
	}
	return false
}

// phraseWords are the words trigger phrases and anti-triggers are matched on:
// Words, each stemmed like the index's terms (stop words kept), so a phrase finds
// other forms of its words ("review" in "reviews", "deploy" in "deploying").
func phraseWords(text string) []string {
	ws := Words(text)
	for i, w := range ws {
		if t, ok := cachedTerm(w); ok {
			ws[i] = t
		}
	}
	return ws
}
