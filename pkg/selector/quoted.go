package selector

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// closers maps each opening quote to the quotes that close it.
var closers = map[rune]string{'"': `"”`, '“': `”"`, '\'': `'’`, '‘': `’'`, '«': `»`, '„': `“”"`}

// unquoted is text without the spans it quotes ("translate 'where is the train
// station' into German" → "translate into German"): what a request quotes is
// what it works on (a title, a label, a sentence to translate), not what it asks
// for. A quote opens at the start or after a space or an opening bracket, before
// a letter or digit, and closes before the end, a space or punctuation; an
// apostrophe inside a word ("kid's", "students' notes") opens none. Text that is
// all quotes is kept as it is.
func unquoted(text string) string {
	if !strings.ContainsAny(text, `"'“‘«„`) {
		return text
	}
	var b strings.Builder
	last, i := 0, 0
	prev := ' '
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		cl, isq := closers[r]
		if !isq || !(unicode.IsSpace(prev) || strings.ContainsRune("([{", prev)) {
			prev = r
			i += n
			continue
		}
		next, _ := utf8.DecodeRuneInString(text[i+n:])
		if !unicode.IsLetter(next) && !unicode.IsDigit(next) {
			prev = r
			i += n
			continue
		}
		end := -1
		for j := i + n; j < len(text); {
			c, m := utf8.DecodeRuneInString(text[j:])
			if strings.ContainsRune(cl, c) {
				after, _ := utf8.DecodeRuneInString(text[j+m:])
				before, _ := utf8.DecodeLastRuneInString(text[:j])
				if (j+m == len(text) || unicode.IsSpace(after) || unicode.IsPunct(after)) && !unicode.IsSpace(before) {
					end = j + m
					break
				}
			}
			j += m
		}
		if end < 0 {
			prev = r
			i += n
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
	if strings.TrimFunc(out, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) == "" {
		return text
	}
	return out
}
