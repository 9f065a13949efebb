package repair

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chosen is the text the senders of triggers chose, as a skill could read it: every
// key and string of their data, and what decoding each gives — JSON (fromjson,
// json.decode), escapes (\u0074), percent- and HTML-encoding, base64 and hex —
// again and again, up to MaxChosenDepth decodings deep. A name is chosen by a
// sender when it occurs in any of that text, ignoring case (lower, upper, title),
// also once the text's separators are dropped (replace, split and join) or spelt
// backwards (reverse).
//
// It does not follow computation: a skill that builds names out of its inputs
// (chr, slices of a string) builds what no decoding shows. Beyond its bounds — more
// than MaxChosenBytes of text — every name counts as chosen.
type Chosen struct {
	texts []string // lower case
	seen  map[string]bool
	bytes int
	over  bool
}

// Bounds of a Chosen.
const (
	MaxChosenDepth = 6
	MaxChosenBytes = 8 << 20
)

// AddData adds a trigger's data: JSON, or any text.
func (c *Chosen) AddData(data []byte) {
	if len(data) == 0 {
		return
	}
	c.decode(string(data), 0)
}

// AddText adds one string the sender chose (a trigger's source or type).
func (c *Chosen) AddText(s string) {
	if s != "" {
		c.decode(s, 0)
	}
}

// Has reports whether a sender chose name (see Chosen).
func (c *Chosen) Has(name string) bool {
	if c == nil || name == "" {
		return false
	}
	if c.over {
		return true
	}
	n := strings.ToLower(name)
	r := reverse(n)
	for _, t := range c.texts {
		if strings.Contains(t, n) || strings.Contains(t, r) {
			return true
		}
	}
	return false
}

func (c *Chosen) keep(s string) {
	if c.over {
		return
	}
	s = strings.ToLower(s)
	sq := squeeze(s)
	if c.bytes += len(s) + len(sq); c.bytes > MaxChosenBytes {
		c.over, c.texts = true, nil
		return
	}
	c.texts = append(c.texts, s)
	if sq != s {
		c.texts = append(c.texts, sq)
	}
}

// decode keeps s and what every decoding of it gives, depth decodings deep already.
func (c *Chosen) decode(s string, depth int) {
	if c.over || s == "" || c.seen[s] {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[s] = true
	c.keep(s)
	if c.over || depth >= MaxChosenDepth {
		return
	}
	next := func(t string) {
		if t != s && t != "" {
			c.decode(t, depth+1)
		}
	}
	if t := strings.TrimSpace(s); t != "" && strings.ContainsAny(t[:1], `{["`) {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			c.walk(v, depth+1)
		}
	}
	if strings.ContainsRune(s, '\\') {
		next(unescape(s))
	}
	if strings.ContainsAny(s, "%+") {
		if t, err := url.QueryUnescape(s); err == nil {
			next(t)
		} else if t, err := url.PathUnescape(s); err == nil {
			next(t)
		}
	}
	if strings.ContainsRune(s, '&') {
		next(html.UnescapeString(s))
	}
	for _, run := range encodedRuns(s) {
		if t, ok := fromBase64(run); ok {
			next(t)
		}
		if len(run)%2 == 0 {
			if b, err := hex.DecodeString(run); err == nil && printable(b) {
				next(string(b))
			}
		}
	}
}

// walk decodes every key and string of v, a decoded JSON value.
func (c *Chosen) walk(v any, depth int) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c.decode(k, depth)
			c.walk(e, depth)
		}
	case []any:
		for _, e := range v {
			c.walk(e, depth)
		}
	case string:
		c.decode(v, depth)
	}
}

// encodedRuns returns the runs of s that may be base64 (standard or URL alphabet,
// with its padding) or hex, 4 characters or more.
func encodedRuns(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isEncoded(s[j]) {
			j++
		}
		if j == i {
			i++
			continue
		}
		k := j
		for k < len(s) && k-j < 2 && s[k] == '=' {
			k++
		}
		if j-i >= 4 {
			out = append(out, s[i:k])
		}
		i = k
	}
	return out
}

func isEncoded(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '+' || b == '/' || b == '_' || b == '-'
}

func fromBase64(s string) (string, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && printable(b) {
			return string(b), true
		}
	}
	return "", false
}

// printable: text, as a name would be decoded from.
func printable(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// unescape reads backslash escapes as Go, JSON, YAML and Starlark string literals
// write them (\u0074, \U00000074, \x74, \164, \n); an escape it cannot read stays.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		r, _, tail, err := strconv.UnquoteChar(s[i:], 0)
		if err != nil {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteRune(r)
		i = len(s) - len(tail)
	}
	return b.String()
}

// squeeze drops every character of s that is no letter, digit or underscore.
func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
