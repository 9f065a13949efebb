package selector_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Routing text is outside input: any string must route without panicking, and
// mentions, words and terms keep their promises.
func FuzzRouteText(f *testing.F) {
	for _, s := range []string{"summarize this pdf", "$pdf-summarizer @x 使用 a skill", "résumé", "@", "$-", "使用", "a\x00b", "sumarize"} {
		f.Add(s)
	}
	x := selector.New(selector.Config{})
	x.Sync([]*skill.Skill{pdf, notes, weather, news, push, audit, secret})
	f.Fuzz(func(t *testing.T, text string) {
		for _, m := range selector.Mentions(text) {
			if m == "" || m != strings.ToLower(m) {
				t.Fatalf("mention %q", m)
			}
		}
		for _, w := range selector.Words(text) {
			if w == "" || !utf8.ValidString(w) && utf8.ValidString(text) {
				t.Fatalf("word %q", w)
			}
		}
		for _, term := range selector.Terms(text) {
			if term == "" {
				t.Fatal("empty term")
			}
		}
		d, err := x.Select(selector.Request{Text: text, Type: "com.github.push"}, selector.Env{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Candidates {
			if c.Score < 0 || c.Score > 1 {
				t.Fatalf("score %v", c.Score)
			}
		}
	})
}

func FuzzReadCases(f *testing.F) {
	f.Add(`{"query":"a","expect":null}`)
	f.Add(`{"query":"a","expect":"b"}` + "\n#x\n")
	f.Add(`{"query":"a","expect":["b","c"]}`)
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := selector.ReadCases(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		for _, c := range cs {
			if strings.TrimSpace(c.Query) == "" {
				t.Fatalf("empty query accepted: %+v", c)
			}
			if len(c.Any) > 0 && (c.Expect != c.Any[0] || slices.Contains(c.Any, "")) {
				t.Fatalf("expect list read as %+v", c)
			}
		}
	})
}

func FuzzTextOf(f *testing.F) {
	f.Add([]byte(`{"query":"a"}`))
	f.Add([]byte(`{"text":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got := selector.TextOf(data, nil); got != "" && strings.TrimSpace(got) == "" {
			t.Fatalf("blank text %q", got)
		}
	})
}
