package skill

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// parseYAML parses one YAML document whose lines are the file's lines. A syntax
// error is reported at the line where it happens (the YAML library often names the
// line where the enclosing block began, or none) with a hint, plus the misindented
// fields it can spot elsewhere. The root is nil for an empty document.
func parseYAML(r report, src []byte, fields *fieldSet, what string) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	err := safeDecode(dec, &doc)
	if errors.Is(err, io.EOF) {
		return nil, true
	}
	if err != nil {
		if fixed, repairs := quoteColonValues(src); repairs != nil {
			// Read the one-line mistake as text, warn, and report what else is
			// wrong, if anything, in the document as read.
			for _, c := range repairs {
				r.add(SeverityWarning, c.line, len(c.key)+3, c.key,
					"quote it: "+c.replacement,
					"%s holds ': ', which strict YAML rejects (other tools may drop this skill); it is read as the text %q", c.key, c.value)
			}
			src, dec, doc = fixed, yaml.NewDecoder(bytes.NewReader(fixed)), yaml.Node{}
			err = safeDecode(dec, &doc)
		}
	}
	if err != nil {
		reportYAMLError(r, src, err, fields, what)
		return nil, false
	}
	var extra yaml.Node
	if err := safeDecode(dec, &extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line, _ = locateYAMLError(src, err)
		}
		r.add(SeverityError, line, 0, "", "a skill file holds one YAML document; remove the '---' or '...' line",
			"%s holds more than one YAML document", what)
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// safeDecode guards against panics in the YAML library on hostile input.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("yaml: parser failed: %v", p)
		}
	}()
	return dec.Decode(n)
}

var yamlLinePrefix = regexp.MustCompile(`^yaml: (?:line \d+: )?`)

// yamlMessage is the library's message without its "yaml: line N: " prefix.
func yamlMessage(err error) string {
	return yamlLinePrefix.ReplaceAllString(err.Error(), "")
}

// locateYAMLError finds the line where a syntax error happens: the first prefix of
// the document (cut at a line end) that fails with the same message. The library
// stops at the first error, so once the offending line is included every longer
// prefix fails the same way, and a binary search finds it.
func locateYAMLError(src []byte, err error) (line, col int) {
	msg := yamlMessage(err)
	ends := lineEnds(src)
	fails := func(k int) bool { // the first k lines fail like the whole
		dec := yaml.NewDecoder(bytes.NewReader(src[:ends[k-1]]))
		for range 1000 {
			var n yaml.Node
			e := safeDecode(dec, &n)
			if e != nil {
				return !errors.Is(e, io.EOF) && yamlMessage(e) == msg
			}
		}
		return false
	}
	lo, hi := 1, len(ends)
	if hi == 0 || !fails(hi) {
		return 0, 0
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	start := 0
	if lo > 1 {
		start = ends[lo-2]
	}
	text := string(src[start:ends[lo-1]])
	col = 1 + utf8.RuneCountInString(text) - utf8.RuneCountInString(strings.TrimLeft(text, " \t"))
	if strings.TrimSpace(text) == "" {
		col = 0
	}
	return lo, col
}

// lineEnds returns the offset just past each line.
func lineEnds(src []byte) []int {
	var ends []int
	for i, c := range src {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(src) > 0 && src[len(src)-1] != '\n' {
		ends = append(ends, len(src))
	}
	return ends
}

var keyLine = regexp.MustCompile(`^( *)([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?$`)

// misindent is a top-level field found indented, so YAML reads it as part of the
// field above (an easy slip: the example in testdata/skills-fixtures/seeds/000 makes
// it twice).
type misindent struct {
	line, indent int
	key, parent  string
	parentValue  bool // the parent has a value on its own line (a scalar)
}

// findMisindented lists lines that are indented, name a top-level field, and sit
// under a top-level field that cannot hold them (a scalar or a list of strings).
func findMisindented(src []byte, fields *fieldSet) []misindent {
	if fields == nil {
		return nil
	}
	lines := strings.Split(string(src), "\n")
	var out []misindent
	parent, parentVal := "", ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		m := keyLine.FindStringSubmatch(l)
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "-") {
			if m == nil || parent == "" || !fields.known(m[2]) || fields.container(parent) {
				continue
			}
			if v := strings.TrimSpace(parentVal); strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
				continue // inside a block scalar: text, not YAML structure
			}
			out = append(out, misindent{line: i + 1, indent: len(m[1]), key: m[2], parent: parent,
				parentValue: strings.TrimSpace(parentVal) != "" && !strings.HasPrefix(strings.TrimSpace(parentVal), "#")})
			continue
		}
		if m != nil {
			parent, parentVal = m[2], m[3]
		} else {
			parent, parentVal = "", ""
		}
	}
	return out
}

func (m misindent) hint() string {
	return fmt.Sprintf("%s is a top-level field: start it in column 1 (remove %d leading spaces)", m.key, m.indent)
}

func (m misindent) message() string {
	if m.parentValue {
		return fmt.Sprintf("%s is indented, so YAML reads it as part of %s's value", m.key, m.parent)
	}
	return fmt.Sprintf("%s is indented under %s, which is not a mapping", m.key, m.parent)
}

func reportYAMLError(r report, src []byte, err error, fields *fieldSet, what string) {
	line, col := locateYAMLError(src, err)
	msg := yamlMessage(err)
	var text string
	if ends := lineEnds(src); line > 0 && line <= len(ends) {
		start := 0
		if line > 1 {
			start = ends[line-2]
		}
		text = strings.TrimRight(string(src[start:ends[line-1]]), "\n")
	}
	mis := findMisindented(src, fields)
	hint := yamlHint(msg, text)
	for _, m := range mis {
		if m.line == line {
			hint = m.hint()
		}
	}
	r.add(SeverityError, line, col, "", hint, "invalid YAML in %s: %s", what, msg)
	for _, m := range mis {
		if m.line != line {
			r.add(SeverityError, m.line, m.indent+1, m.key, m.hint(), "%s", m.message())
		}
	}
}

// yamlHint guesses a fix from the library's message and the offending line.
func yamlHint(msg, text string) string {
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	t := strings.TrimSpace(text)
	switch {
	case strings.Contains(indent, "\t"):
		return "YAML indents with spaces only; replace the tab"
	case strings.Contains(msg, "mapping values are not allowed"):
		if strings.Count(t, ": ") > 1 {
			return "quote the value: it contains ': '"
		}
		return "this line is indented deeper than the field above it; line it up with its siblings"
	case strings.Contains(msg, "cannot start any token"):
		return "quote the value: plain YAML values cannot start with @ or `"
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "expected '-' indicator"),
		strings.Contains(msg, "expected <document start>"):
		return "check this line's indentation: the entries of one mapping or list line up in the same column"
	case strings.Contains(msg, "end of stream"), strings.Contains(msg, "expected ',' or"),
		strings.Contains(msg, "expected ':'"):
		return "a quote or bracket opened here is not closed"
	case strings.Contains(msg, "found duplicate"), strings.Contains(msg, "already defined"):
		return "remove one of the duplicates"
	}
	return "check the YAML syntax of this line and the one above"
}
