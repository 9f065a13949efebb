package selector

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// opener reports whether r opens a quote: its kind (an index), and the quotes
// that close it; kind -1 if it opens none.
func opener(r rune) (kind int, closers string) {
	switch r {
	case '"':
		return 0, `"”`
	case '“':
		return 1, `”"`
	case '\'':
		return 2, `'’`
	case '‘':
		return 3, `’'`
	case '«':
		return 4, `»`
	case '„':
		return 5, `“”"`
	}
	return -1, ""
}

// unquoted is text without the spans it quotes ("translate 'where is the train
// station' into German" → "translate into German"): what a request quotes is
// what it works on (a title, a label, a sentence to translate), not what it asks
// for. A quote opens where no letter or digit comes before it and something other
// than a space after it ("kid's" and "students' notes" open none; nor does an
// apostrophe before an elided word: "'cause", "'em"), and closes
// where no letter or digit comes after it and no space before it; guillemets may
// hold spaces inside (« bonjour »). Text that is all quotes is kept as it is.
//
// It reads text once: a kind of quote that finds no closer after one opening
// finds none after a later one, so it is not looked for again.
func unquoted(text string) string {
	if !strings.ContainsAny(text, `"'“‘«„`) {
		return text
	}
	var b strings.Builder
	var unclosed uint8 // kinds of quote that close nowhere further on
	last, i := 0, 0
	prev := ' '
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		kind, cl := opener(r)
		if kind < 0 || unclosed&(1<<kind) != 0 || isWordRune(prev) || i+n == len(text) {
			prev, i = r, i+n
			continue
		}
		if (kind == 2 || kind == 3) && elision(text[i+n:]) {
			prev, i = r, i+n
			continue
		}
		guillemet := r == '«'
		if next, _ := utf8.DecodeRuneInString(text[i+n:]); unicode.IsSpace(next) && !guillemet {
			prev, i = r, i+n
			continue
		}
		end := closeAt(text, i+n, cl, guillemet)
		if end < 0 {
			unclosed |= 1 << kind
			prev, i = r, i+n
			continue
		}
		b.WriteString(text[last:i])
		b.WriteByte(' ')
		last, i, prev = end, end, ' '
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	out := b.String()
	if strings.IndexFunc(out, isWordRune) < 0 {
		return text
	}
	return out
}

// elisions are words English writes with an apostrophe in front ('cause, 'em):
// an apostrophe before one opens no quote.
var elisions = []string{"cause", "cos", "coz", "em", "til", "tis", "twas", "bout", "round", "n", "ol", "nuff", "sup", "kay"}

// elision reports whether text, after an apostrophe, starts with an elided word.
func elision(text string) bool {
	for _, e := range elisions {
		if len(text) >= len(e) && strings.EqualFold(text[:len(e)], e) {
			after, _ := utf8.DecodeRuneInString(text[len(e):])
			if len(text) == len(e) || !isWordRune(after) {
				return true
			}
		}
	}
	return false
}

// closeAt is where the quote opened before from ends (past its closer), or -1.
func closeAt(text string, from int, closers string, spaced bool) int {
	for j := from; j < len(text); {
		c, m := utf8.DecodeRuneInString(text[j:])
		if strings.ContainsRune(closers, c) {
			after, _ := utf8.DecodeRuneInString(text[j+m:])
			before, _ := utf8.DecodeLastRuneInString(text[:j])
			if (j+m == len(text) || !isWordRune(after)) && (spaced || !unicode.IsSpace(before)) {
				return j + m
			}
		}
		j += m
	}
	return -1
}
