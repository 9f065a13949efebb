package main

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// slugifyTool: {"text": "Crème Brûlée, for 2!"} → "creme-brulee-for-2".
var slugifyTool = tool.Func("slugify", func(ctx context.Context, c tool.Call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, err)
	}
	a := tool.NewArgs("slugify", c.Args)
	if err := a.Only("text", "separator", "max_length"); err != nil {
		return nil, err
	}
	text, err := a.String("text")
	if err != nil {
		return nil, err
	}
	sep, err := a.OptString("separator", "-")
	if err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(sep) > 3 || strings.ContainsFunc(sep, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return nil, a.Errorf("separator", "must be at most 3 characters and hold no letters or digits, got %q", sep)
	}
	maxLen, err := a.OptInt("max_length", 0)
	if err != nil {
		return nil, err
	}
	if maxLen < 0 {
		return nil, a.Errorf("max_length", "must be positive, got %d", maxLen)
	}
	return slugify(text, sep, int(maxLen)), nil
})

// slugify lowercases text, drops accents (é → e), and joins the runs of ASCII
// letters and digits with sep; letters of other scripts are dropped. With
// maxLen > 0 the slug is cut after the last whole word that fits.
func slugify(text, sep string, maxLen int) string {
	var words []string
	var w strings.Builder
	flush := func() {
		if w.Len() > 0 {
			words = append(words, w.String())
			w.Reset()
		}
	}
	for _, r := range norm.NFKD.String(text) {
		switch {
		case unicode.Is(unicode.Mn, r):
			// a combining accent of the letter before
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			w.WriteRune(unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
	slug := strings.Join(words, sep)
	if maxLen <= 0 || len(slug) <= maxLen {
		return slug
	}
	var b strings.Builder
	for _, word := range words {
		extra := len(word)
		if b.Len() > 0 {
			extra += len(sep)
		}
		if b.Len()+extra > maxLen {
			break
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(word)
	}
	if b.Len() == 0 { // one long word: cut it
		return slug[:maxLen]
	}
	return b.String()
}

// wordStatsTool: {"text": "..."} → {"words": 3, "characters": 13, ...}.
var wordStatsTool = tool.Func("word_stats", func(ctx context.Context, c tool.Call) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure.Wrap(failure.Retryable, err)
	}
	a := tool.NewArgs("word_stats", c.Args)
	if err := a.Only("text", "top"); err != nil {
		return nil, err
	}
	text, err := a.String("text")
	if err != nil {
		return nil, err
	}
	top, err := a.OptInt("top", 5)
	if err != nil {
		return nil, err
	}
	if top < 0 || top > 100 {
		return nil, a.Errorf("top", "must be between 0 and 100, got %d", top)
	}
	return wordStats(text, int(top)), nil
})

// wordStats measures text. A word is a run of letters, digits, apostrophes and
// hyphens, counted case-insensitively for top_words; a sentence ends with ., !
// or ? followed by a space or the end; text without one is one sentence.
func wordStats(text string, top int) map[string]any {
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’' || r == '-')
	})
	counts := map[string]int64{}
	for _, w := range words {
		counts[strings.ToLower(w)]++
	}
	type wc struct {
		word  string
		count int64
	}
	ranked := make([]wc, 0, len(counts))
	for w, n := range counts {
		ranked = append(ranked, wc{w, n})
	}
	slices.SortFunc(ranked, func(a, b wc) int { return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.word, b.word)) })
	topWords := []any{}
	for _, r := range ranked[:min(top, len(ranked))] {
		topWords = append(topWords, map[string]any{"word": r.word, "count": r.count})
	}

	lines := int64(0)
	if text != "" {
		lines = int64(strings.Count(text, "\n")) + 1
		if strings.HasSuffix(text, "\n") {
			lines--
		}
	}
	sentences := int64(0)
	runes := []rune(text)
	for i, r := range runes {
		if (r == '.' || r == '!' || r == '?') && (i+1 == len(runes) || unicode.IsSpace(runes[i+1])) {
			sentences++
		}
	}
	if sentences == 0 && len(words) > 0 {
		sentences = 1 // text without a final stop is one sentence
	}
	var avg float64
	if len(words) > 0 {
		total := 0
		for _, w := range words {
			total += utf8.RuneCountInString(w)
		}
		avg = float64(total) / float64(len(words))
		avg = float64(int(avg*100+0.5)) / 100
	}
	return map[string]any{
		"words":           int64(len(words)),
		"unique_words":    int64(len(counts)),
		"characters":      int64(len(runes)),
		"lines":           lines,
		"sentences":       sentences,
		"avg_word_length": avg,
		"top_words":       topWords,
	}
}
