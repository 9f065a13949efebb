package skill

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

var utf8BOM = []byte("\xef\xbb\xbf")

// normalizeText drops a UTF-8 byte order mark and turns CRLF line ends into LF. Line
// numbers are unchanged, so diagnostics point at the same lines an editor shows.
func normalizeText(data []byte) []byte {
	data = bytes.TrimPrefix(data, utf8BOM)
	if bytes.IndexByte(data, '\r') >= 0 {
		data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	}
	return data
}

// markdown is a SKILL.md split into its front matter and body.
type markdown struct {
	hasFM    bool
	closed   bool   // the front matter has its closing '---'
	fm       []byte // the front matter with the opening '---' line blanked, so YAML lines are file lines
	body     string
	bodyLine int // file line of the body's first line
}

// splitFrontMatter splits a normalized SKILL.md. Front matter starts at the first
// line with "---" and ends at the next line that is exactly "---" (trailing blanks
// allowed).
func splitFrontMatter(data []byte) markdown {
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	if !isDelimiter(first) {
		return markdown{body: string(data), bodyLine: 1}
	}
	md := markdown{hasFM: true}
	off := len(first) + 1
	line := 2
	for off <= len(data) && len(rest) > 0 {
		l, next, found := bytes.Cut(rest, []byte("\n"))
		if isDelimiter(l) {
			md.closed = true
			md.fm = append([]byte("\n"), data[len(first)+1:off]...)
			if found {
				md.body = string(next)
			}
			md.bodyLine = line + 1
			return md
		}
		off += len(l) + 1
		line++
		rest = next
		if !found {
			break
		}
	}
	md.fm = append([]byte("\n"), data[min(len(first)+1, len(data)):]...)
	return md
}

func isDelimiter(l []byte) bool {
	return string(bytes.TrimRight(l, " \t")) == "---"
}

// fence is an open code fence.
type fence struct {
	line  int
	char  byte
	count int
}

// unclosedFence returns the line of the first code fence (``` or ~~~) left open in a
// markdown body, or 0. A fence closes only with the same character, at least as many
// of them and nothing else on the line (CommonMark); a backtick fence whose info
// string holds a backtick is inline code, not a fence.
func unclosedFence(body string, firstLine int) int {
	var open *fence
	line := firstLine
	for l := range strings.SplitSeq(body, "\n") {
		t := strings.TrimLeft(l, " \t")
		if len(t) >= 3 && (t[0] == '`' || t[0] == '~') {
			c := t[0]
			n := 0
			for n < len(t) && t[n] == c {
				n++
			}
			info := strings.TrimSpace(t[n:])
			switch {
			case n < 3:
			case open == nil:
				if c == '`' && strings.Contains(info, "`") {
					break
				}
				open = &fence{line: line, char: c, count: n}
			case c == open.char && n >= open.count && info == "":
				open = nil
			}
		}
		line++
	}
	if open != nil {
		return open.line
	}
	return 0
}

// checkBody applies the content rules to a SKILL.md body: code fences closed, long
// enough to instruct a model, short enough not to crowd its context.
func checkBody(r report, md markdown, instruction bool) {
	if line := unclosedFence(md.body, md.bodyLine); line > 0 {
		r.add(SeverityError, line, 1, "body", "close it with a line of the same fence characters",
			"code block opened here is not closed")
	}
	n := utf8.RuneCountInString(strings.TrimSpace(md.body))
	switch {
	case n > maxBodyChars:
		r.add(SeverityWarning, md.bodyLine, 0, "body", "move detail into references/ files the skill links to",
			"instructions are %d characters long; more than %d crowds a model's context", n, maxBodyChars)
	case instruction && n < minBodyChars:
		r.add(SeverityWarning, max(md.bodyLine, 1), 0, "body", "say what the skill does, when, and how, in the body after the front matter",
			"instructions are %s; fewer than %d characters rarely tell a model enough", plural(n, "character"), minBodyChars)
	}
}

const (
	minBodyChars = 50
	maxBodyChars = 50_000
)

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// link is a relative link in a markdown body.
type link struct {
	target    string
	line, col int
}

var mdLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// localLinks lists the links of a body that name files (not URLs or anchors),
// outside code blocks.
func localLinks(body string, firstLine int) []link {
	var out []link
	var open *fence
	line := firstLine - 1
	for l := range strings.SplitSeq(body, "\n") {
		line++
		t := strings.TrimLeft(l, " \t")
		if len(t) >= 3 && (t[0] == '`' || t[0] == '~') {
			c, n := t[0], 0
			for n < len(t) && t[n] == c {
				n++
			}
			info := strings.TrimSpace(t[n:])
			switch {
			case n < 3:
			case open == nil && !(c == '`' && strings.Contains(info, "`")):
				open = &fence{line: line, char: c, count: n}
				continue
			case open != nil && c == open.char && n >= open.count && info == "":
				open = nil
				continue
			}
		}
		if open != nil || !strings.Contains(l, "](") {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatchIndex(l, -1) {
			target := l[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if i := strings.IndexAny(target, "#?"); i >= 0 {
				target = target[:i]
			}
			if target == "" {
				continue
			}
			out = append(out, link{target: target, line: line, col: utf8.RuneCountInString(l[:m[2]]) + 1})
		}
	}
	return out
}
