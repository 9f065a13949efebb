package expr

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds a small tokenizer for Python-like source. It is not a parser: it
// knows just enough (strings, comments, brackets, names) for the source rewrites in
// rewrite.go to never touch the inside of a string literal. Starlark's own scanner
// and parser do the real checking afterwards. It must accept any input without
// panicking.

type tokKind uint8

const (
	tkName tokKind = iota + 1
	tkNumber
	tkString
	tkOp
	tkNewline
	tkComment
)

type token struct {
	kind       tokKind
	start, end int
	text       string // the token's source text

	// For strings only.
	prefix             string // lower-cased prefix, such as "f" or "rb"
	quote              string // ', ", ''' or """
	bodyStart, bodyEnd int
	closed             bool
}

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }

// keywords are the Python keywords that cannot end an operand.
var keywords = map[string]bool{
	"and": true, "as": true, "assert": true, "async": true, "await": true, "break": true,
	"class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true,
	"except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true,
}

var ops3 = []string{"**=", "//=", ">>=", "<<=", "..."}
var ops2 = []string{"**", "//", "==", "!=", "<=", ">=", "->", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>"}

func tokenize(src string) []token {
	var toks []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			i++
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			continue
		}
		var t token
		switch {
		case c == '\n' || c == '\r':
			t = token{kind: tkNewline, start: i, end: i + 1, text: "\n"}
		case c == '#':
			t = scanComment(src, i)
		case c == '"' || c == '\'':
			t = scanString(src, i, i)
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			t = scanNumber(src, i)
		default:
			t = scanNameOrOp(src, i)
		}
		toks = append(toks, t)
		i = t.end
	}
	return toks
}

// scanComment scans a comment from the '#' at i to the end of its line.
func scanComment(src string, i int) token {
	j := strings.IndexByte(src[i:], '\n')
	if j < 0 {
		j = len(src)
	} else {
		j += i
	}
	return token{kind: tkComment, start: i, end: j, text: src[i:j]}
}

// scanNumber scans a numeric literal starting at i, exponents and hex included.
func scanNumber(src string, i int) token {
	hex := strings.HasPrefix(src[i:], "0x") || strings.HasPrefix(src[i:], "0X")
	j := i + 1
	for j < len(src) {
		d := src[j]
		switch {
		case isDigit(d) || isLetter(d) || d == '_' || d == '.':
		case (d == '+' || d == '-') && (src[j-1] == 'e' || src[j-1] == 'E') && !hex:
		default:
			return token{kind: tkNumber, start: i, end: j, text: src[i:j]}
		}
		j++
	}
	return token{kind: tkNumber, start: i, end: j, text: src[i:j]}
}

// scanNameOrOp scans an identifier (or a prefixed string literal such as r"..."), or
// else the longest operator starting at i.
func scanNameOrOp(src string, i int) token {
	r, size := utf8.DecodeRuneInString(src[i:])
	if isIdentRune(r, true) {
		j := i + size
		for j < len(src) {
			r, size := utf8.DecodeRuneInString(src[j:])
			if !isIdentRune(r, false) {
				break
			}
			j += size
		}
		if j < len(src) && (src[j] == '"' || src[j] == '\'') && isStringPrefix(src[i:j]) {
			return scanString(src, i, j)
		}
		return token{kind: tkName, start: i, end: j, text: src[i:j]}
	}
	n := size
	if hasAnyPrefix(src[i:], ops3) {
		n = 3
	} else if hasAnyPrefix(src[i:], ops2) {
		n = 2
	}
	return token{kind: tkOp, start: i, end: i + n, text: src[i : i+n]}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// scanString scans a string literal whose prefix starts at start and whose opening
// quote is at q.
func scanString(src string, start, q int) token {
	quote := src[q : q+1]
	if strings.HasPrefix(src[q:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	t := token{kind: tkString, start: start, prefix: strings.ToLower(src[start:q]), quote: quote, bodyStart: q + len(quote)}
	j := t.bodyStart
	for j < len(src) {
		switch {
		case src[j] == '\\':
			j += 2
			continue
		case strings.HasPrefix(src[j:], quote):
			t.bodyEnd, t.end, t.closed = j, j+len(quote), true
			t.text = src[start:t.end]
			return t
		case len(quote) == 1 && (src[j] == '\n' || src[j] == '\r'):
			t.bodyEnd, t.end = j, j
			t.text = src[start:j]
			return t
		}
		j++
	}
	t.bodyEnd, t.end = len(src), len(src)
	t.text = src[start:]
	return t
}

func isStringPrefix(s string) bool {
	switch strings.ToLower(s) {
	case "r", "u", "b", "f", "br", "rb", "fr", "rf":
		return true
	}
	return false
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isIdentRune(r rune, first bool) bool {
	if r < utf8.RuneSelf {
		c := byte(r)
		return isLetter(c) || c == '_' || (!first && isDigit(c))
	}
	return unicode.IsLetter(r) || (!first && unicode.IsDigit(r))
}

// isIdent reports whether s is a valid identifier.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !isIdentRune(r, i == 0) {
			return false
		}
	}
	return true
}

// tokens wraps a token slice with the bracket structure, ignoring comments.
type tokens struct {
	t     []token
	match []int // index of the matching bracket, or -1
}

func newTokens(all []token) *tokens {
	ts := &tokens{}
	for _, t := range all {
		if t.kind != tkComment {
			ts.t = append(ts.t, t)
		}
	}
	ts.match = make([]int, len(ts.t))
	var stack []int
	for i, t := range ts.t {
		ts.match[i] = -1
		if t.kind != tkOp {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			stack = append(stack, i)
		case ")", "]", "}":
			if n := len(stack); n > 0 && closes(ts.t[stack[n-1]].text, t.text) {
				ts.match[i], ts.match[stack[n-1]] = stack[n-1], i
				stack = stack[:n-1]
			}
		}
	}
	return ts
}

func closes(open, close string) bool {
	return open == "(" && close == ")" || open == "[" && close == "]" || open == "{" && close == "}"
}

// operandEnd reports whether token i can end an operand, so that a following
// operator is binary and a following bracket is a call or index.
func (ts *tokens) operandEnd(i int) bool {
	if i < 0 || i >= len(ts.t) {
		return false
	}
	t := ts.t[i]
	switch t.kind {
	case tkName:
		return !keywords[t.text]
	case tkNumber, tkString:
		return true
	case tkOp:
		return t.text == ")" || t.text == "]" || t.text == "}"
	}
	return false
}

// postfixStart returns the index of the first token of the postfix expression
// (operand with calls, indexing and attributes) that ends at token i, or -1.
func (ts *tokens) postfixStart(i int) int {
	for i >= 0 {
		t := ts.t[i]
		switch {
		case t.kind == tkOp && (t.text == ")" || t.text == "]" || t.text == "}"):
			open := ts.match[i]
			if open < 0 {
				return -1
			}
			if ot := ts.t[open].text; (ot == "(" || ot == "[") && ts.operandEnd(open-1) {
				i = open - 1 // a call or index: keep going left
				continue
			}
			return open
		case t.kind == tkName && !keywords[t.text], t.kind == tkNumber, t.kind == tkString:
			if i >= 2 && ts.t[i-1].is(tkOp, ".") {
				i -= 2
				continue
			}
			return i
		default:
			return -1
		}
	}
	return -1
}

// postfixEnd returns the index of the last token of the unary-prefixed postfix
// expression that starts at token i, or -1.
func (ts *tokens) postfixEnd(i int) int {
	for i < len(ts.t) && ts.t[i].kind == tkOp && (ts.t[i].text == "-" || ts.t[i].text == "+" || ts.t[i].text == "~") {
		i++
	}
	if i >= len(ts.t) {
		return -1
	}
	t := ts.t[i]
	switch {
	case t.kind == tkOp && (t.text == "(" || t.text == "[" || t.text == "{"):
		if ts.match[i] < 0 {
			return -1
		}
		i = ts.match[i]
	case t.kind == tkName && !keywords[t.text], t.kind == tkNumber, t.kind == tkString:
	default:
		return -1
	}
	for i+1 < len(ts.t) {
		n := ts.t[i+1]
		switch {
		case n.is(tkOp, ".") && i+2 < len(ts.t) && ts.t[i+2].kind == tkName:
			i += 2
		case (n.is(tkOp, "(") || n.is(tkOp, "[")) && ts.match[i+1] > 0:
			i = ts.match[i+1]
		default:
			return i
		}
	}
	return i
}

// isUnaryOp reports whether token i is a unary + or -, not a binary one.
func (ts *tokens) isUnaryOp(i int) bool {
	if i < 0 || i >= len(ts.t) {
		return false
	}
	t := ts.t[i]
	return t.kind == tkOp && (t.text == "-" || t.text == "+") && !ts.operandEnd(i-1)
}

// filterAt reports whether token i is a '|' that applies a filter: it follows an
// operand and a filter name follows it. In a template every | is a filter; in a
// condition only a | followed by a filter's name is (otherwise it is Python's or).
func (ts *tokens) filterAt(i int, d dialect) bool {
	if i <= 0 || i+1 >= len(ts.t) || !ts.t[i].is(tkOp, "|") || !ts.operandEnd(i-1) {
		return false
	}
	n := ts.t[i+1]
	if n.kind != tkName || keywords[n.text] || i+2 < len(ts.t) && ts.t[i+2].is(tkOp, ".") {
		return false
	}
	return d == dialectTemplate || filters[n.text] != nil || filterAliases[n.text] != ""
}

// unaryStart returns the index of the first token of Jinja's unary expression
// that ends at token i: an operand with its attributes, calls and subscripts, the
// filters applied to it, and the unary signs before it. Jinja binds a filter (and
// a test) tighter than any operator but those signs: -x | abs is abs(-x), and
// 2 - x | abs is 2 - abs(x). It returns -1 if there is none.
func (ts *tokens) unaryStart(i int, d dialect) int {
	s := ts.postfixStart(i)
	for s >= 2 && ts.filterAt(s-1, d) {
		p := ts.postfixStart(s - 2)
		if p < 0 {
			break
		}
		s = p
	}
	if s < 0 {
		return -1
	}
	for ts.isUnaryOp(s - 1) {
		s--
	}
	return s
}

// unaryEnd returns the index of the last token of Jinja's unary expression that
// starts at token i, filters included, or -1.
func (ts *tokens) unaryEnd(i int, d dialect) int { return ts.filterChainEnd(i, d, nil) }

// filterChainEnd is unaryEnd, calling pipe with the index of each | of the
// filters it passes.
func (ts *tokens) filterChainEnd(i int, d dialect, pipe func(int)) int {
	e := ts.postfixEnd(i)
	for e >= 0 && ts.filterAt(e+1, d) {
		if pipe != nil {
			pipe(e + 1)
		}
		e += 2
		if e+1 < len(ts.t) && ts.t[e+1].is(tkOp, "(") && ts.match[e+1] > e+1 {
			e = ts.match[e+1]
		}
	}
	return e
}
