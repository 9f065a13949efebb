package skill

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// textKeys are the top-level fields whose one-line plain value is read as text even
// when it holds ": ", which strict YAML takes for a nested mapping. Public skill
// repositories are full of `description: Review code: bugs, style`, and several
// agent runtimes drop such a skill without a word.
var textKeys = []string{"description", "when_to_use"}

var textKeyLine = regexp.MustCompile(`^(description|when_to_use):[ \t]+(.*)$`)

// colonRepair is a line whose plain value was quoted so the document parses.
type colonRepair struct {
	line        int
	key, value  string
	replacement string
}

// quoteColonValues quotes the one-line plain values of textKeys that hold ": " (or
// end with ':'), leaving every other line as it is, so line numbers still match the
// file. It returns nil when there is nothing to quote.
func quoteColonValues(src []byte) ([]byte, []colonRepair) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	var repairs []colonRepair
	for i, l := range lines {
		text := strings.TrimRight(string(l), "\r\n")
		m := textKeyLine.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		v := m[2]
		if k := strings.Index(v, " #"); k >= 0 { // a comment, as YAML reads it
			v = v[:k]
		}
		v = strings.TrimRight(v, " \t")
		if v == "" || strings.ContainsRune(`"'|>[{&*!%@`+"`#", rune(v[0])) {
			continue // quoted, a block scalar, a collection, an anchor or alias, a tag
		}
		if !strings.Contains(v, ": ") && !strings.HasSuffix(v, ":") {
			continue
		}
		if i+1 < len(lines) && continues(lines[i+1]) {
			continue // a multi-line plain value: not the one-line mistake
		}
		q, err := json.Marshal(v) // a JSON string is a YAML double-quoted scalar
		if err != nil {
			continue
		}
		eol := l[len(strings.TrimRight(string(l), "\r\n")):]
		rep := m[1] + ": " + string(q)
		lines[i] = append([]byte(rep), eol...)
		repairs = append(repairs, colonRepair{line: i + 1, key: m[1], value: v, replacement: rep})
	}
	if repairs == nil {
		return nil, nil
	}
	return bytes.Join(lines, nil), repairs
}

// continues reports whether a line continues the value above it: it is indented and
// not blank.
func continues(l []byte) bool {
	return len(l) > 0 && (l[0] == ' ' || l[0] == '\t') && len(bytes.TrimSpace(l)) > 0
}
