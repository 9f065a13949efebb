package selector_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// TestLongRequestsAreReadInPart: a request is routed on its first MaxRouteText
// bytes, so a megabyte of pasted text costs what 8 KiB does (512 KB of glued
// words took five minutes against 934 skills), and the plan's task keeps all of
// it.
func TestLongRequestsAreReadInPart(t *testing.T) {
	t.Parallel()
	var skills []*skill.Skill
	for i := range 300 {
		skills = append(skills, sk(fmt.Sprintf("tool-%d", i), fmt.Sprintf("Runs job%d on the FooBar%d queue for reports.", i, i)))
	}
	skills = append(skills, sk("code-review", "Reviews a code change.", func(s *skill.Skill) { s.Triggers = []string{"code review", "pull request"} }))
	x := newSel(t, selector.Config{}, skills...)
	for name, text := range map[string]string{
		"glued words":    "please do a code review " + strings.Repeat("FooAbcBar12x9 ", 40000),
		"distinct words": "please do a code review " + distinct(60000),
	} {
		start := time.Now()
		d := decide(t, x, selector.Request{Text: text}, selector.Env{})
		// Read whole, it took minutes; the bound leaves room for -race on a
		// loaded machine.
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s (%d bytes): %v", name, len(text), took)
		}
		if d.Primary != "code-review" {
			t.Errorf("%s: primary %q, want code-review (the request's start)", name, d.Primary)
		}
		if task, _ := d.Parameters["task"].(string); task != text {
			t.Errorf("%s: the task holds %d bytes of %d", name, len(task), len(text))
		}
	}
	// The part read ends at a space, or at a rune boundary when there is none.
	if got := selector.RouteText(strings.Repeat("é", selector.MaxRouteText)); len(got) > selector.MaxRouteText || !utf8.ValidString(got) {
		t.Errorf("no spaces: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if got := selector.RouteText(strings.Repeat("word ", selector.MaxRouteText)); len(got) > selector.MaxRouteText || strings.HasSuffix(got, "wor") {
		t.Errorf("spaces: %d bytes, ends %q", len(got), got[len(got)-8:])
	}
}

// distinct is n distinct made-up words.
func distinct(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%xq ", i*7919)
	}
	return b.String()
}

// TestRepeatedPhraseKeepsLaterOnes: a phrase said hundreds of times (a pasted
// log full of "error") is read a few times, and the phrases said after it still
// recall their skills.
func TestRepeatedPhraseKeepsLaterOnes(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{},
		sk("debug", "Helps find the cause of a bug.", func(s *skill.Skill) { s.Triggers = []string{"error"} }),
		sk("code-review", "Reviews a code change.", func(s *skill.Skill) { s.Triggers = []string{"code review", "pull request"} }),
	)
	d := decide(t, x, selector.Request{Text: "here is my log: " + strings.Repeat("error ", 300) + " please do a code review of this pull request"}, selector.Env{})
	if c := d.Candidate("code-review"); c == nil || c.Source != selector.SourceRule {
		t.Errorf("code-review %+v: want it recalled by its phrase", c)
	}
}

// BenchmarkSelectLongRequest routes a request of as many distinct words as
// routing reads (MaxRouteText), the worst case for looking up a word among the
// request's terms read before it.
func BenchmarkSelectLongRequest(b *testing.B) {
	var skills []*skill.Skill
	for i := range 300 {
		skills = append(skills, sk(fmt.Sprintf("tool-%d", i), fmt.Sprintf("Runs job%d on the FooBar%d queue for reports.", i, i)))
	}
	x := newSel(b, selector.Config{}, skills...)
	text := "please run the reports " + distinct(2000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Select(selector.Request{Text: text}, selector.Env{}); err != nil {
			b.Fatal(err)
		}
	}
}
