package registry

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Search weights: how much a query word found in each field counts. A word counts
// once, for the best field it is found in; a word equal to a whole word of the
// field counts fully, a prefix of one (three letters or more) half.
var searchFields = []struct {
	name   string
	weight float64
	words  func(*skill.Skill) []string
}{
	{"name", 6, func(s *skill.Skill) []string { return []string{s.Name} }},
	{"tags", 4, func(s *skill.Skill) []string { return s.Tags }},
	{"triggers", 3, func(s *skill.Skill) []string { return append(slices.Clip(s.Triggers), s.TriggerPhrases...) }},
	{"description", 2, func(s *skill.Skill) []string { return []string{s.Description} }},
	{"examples", 2, func(s *skill.Skill) []string { return s.Examples.Positive }},
	{"capabilities", 1, func(s *skill.Skill) []string { return s.Capabilities }},
}

// ErrEmptySearch: a search needs a query or a trigger.
var ErrEmptySearch = errors.New("search: give a query, a trigger, or both")

// Search ranks skills for a request: by text over names, tags, triggers,
// descriptions, positive examples and capabilities, and/or by the trigger types they
// listen for. It is what the service's search endpoint runs; the CLI runs it on the
// catalog when no registry answers.
//
// The score is the sum, over the query's words, of the weight of the best field the
// word is found in, plus 3 when the whole query appears verbatim in the name or
// description; every word must be found somewhere. Ties go by name.
func Search(skills []*skill.Skill, req SearchRequest) ([]SearchResult, error) {
	query := strings.TrimSpace(req.Query)
	if query == "" && req.Trigger == "" {
		return nil, ErrEmptySearch
	}
	if req.Trigger != "" {
		if err := checkPattern(req.Trigger); err != nil {
			return nil, err
		}
	}
	limit := req.Limit
	switch {
	case limit <= 0:
		limit = 20
	case limit > 1000:
		limit = 1000
	}
	terms := words(query)
	phrase := strings.ToLower(query)
	var out []SearchResult
	for _, s := range skills {
		var matched []string
		if req.Trigger != "" {
			hit := false
			for _, t := range s.Triggers {
				if MatchTrigger(req.Trigger, t) {
					hit = true
				}
			}
			if !hit {
				continue
			}
			matched = append(matched, "triggers")
		}
		score := 0.0
		if len(terms) > 0 {
			var ok bool
			score, matched, ok = scoreText(s, terms, phrase, matched)
			if !ok {
				continue
			}
		}
		out = append(out, SearchResult{SkillInfo: infoOf(s), Score: score, Matched: matched})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []SearchResult{}
	}
	return out, nil
}

func scoreText(s *skill.Skill, terms []string, phrase string, matched []string) (float64, []string, bool) {
	fieldWords := make([][]string, len(searchFields))
	for i, f := range searchFields {
		for _, text := range f.words(s) {
			fieldWords[i] = append(fieldWords[i], words(text)...)
		}
	}
	score := 0.0
	for _, t := range terms {
		best, bestField := 0.0, -1
		for i, f := range searchFields {
			w := 0.0
			for _, fw := range fieldWords[i] {
				switch {
				case fw == t:
					w = f.weight
				case len(t) >= 3 && strings.HasPrefix(fw, t) && w < f.weight/2:
					w = f.weight / 2
				}
				if w == f.weight {
					break
				}
			}
			if w > best {
				best, bestField = w, i
			}
		}
		if bestField < 0 {
			return 0, nil, false // every word must be found
		}
		score += best
		if name := searchFields[bestField].name; !contains(matched, name) {
			matched = append(matched, name)
		}
	}
	if len(terms) > 1 && (strings.Contains(strings.ToLower(s.Name), phrase) || strings.Contains(strings.ToLower(s.Description), phrase)) {
		score += 3
	}
	return score, matched, true
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// words splits text into lowercase words of letters and digits: "start_work" and
// "com.github.push" are two and three words.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// MatchTrigger reports whether the CloudEvent type typ matches pattern: equal, or
// equal with NATS wildcards on dot-separated tokens ('*' one token, '>' the rest).
func MatchTrigger(pattern, typ string) bool {
	if pattern == typ {
		return true
	}
	p, t := strings.Split(pattern, "."), strings.Split(typ, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return i < len(t)
		case i >= len(t):
			return false
		case tok != "*" && tok != t[i]:
			return false
		}
	}
	return len(p) == len(t)
}

func checkPattern(p string) error {
	toks := strings.Split(p, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			return fmt.Errorf("search: trigger %q has an empty token", p)
		case tok == ">" && i != len(toks)-1:
			return fmt.Errorf("search: trigger %q: '>' must be the last token", p)
		case strings.ContainsAny(tok, " \t") || (len(tok) > 1 && strings.ContainsAny(tok, "*>")):
			return fmt.Errorf("search: trigger %q: wildcards stand alone as a token (com.github.*)", p)
		}
	}
	return nil
}
