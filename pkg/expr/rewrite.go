package expr

import (
	"fmt"
	"sort"
	"strings"
)

// This file bridges the Python and Jinja that skill authors write and the Starlark
// that go.starlark.net runs, by rewriting source text before Starlark parses it:
//
//	f"{a}-{b!r}"             "{}-{!r}".format((a), (b))
//	any(x in s for x in l)   any([x in s for x in l])
//	a ** b                   __skillbus_pow__(a, b)   (renamed to an internal later)
//	x is not None            x != None
//	import json              pass
//	a ~ b      (templates)   a - b                    (turned into concatenation later)
//	true/none  (templates)   True/None
//
// Every rewrite works on tokens, so text inside string literals is never touched,
// and records a srcMap so errors point at what the user wrote.

type dialect uint8

const (
	dialectExpr     dialect = iota // a Python expression: a condition
	dialectTemplate                // a Jinja expression between {{ and }}
	dialectProgram                 // Python statements: a compute block
)

// powName is the identifier the ** rewrite calls, and definedName the one the
// `is defined` rewrite calls; the AST pass renames them to internals.
const (
	powName     = "__skillbus_pow__"
	definedName = "__skillbus_defined__"
)

// maxFStringNesting bounds f-strings within f-strings.
const maxFStringNesting = 8

// A srcError is an error at a byte offset of the source being rewritten.
type srcError struct {
	off int
	msg string
}

func (e *srcError) Error() string { return e.msg }

type rewritten struct {
	text   string
	m      *srcMap
	tildes map[int]bool // source offsets of Jinja '~' operators, now '-'
}

type edit struct {
	pos, end int
	class    int // 0: closing insertion, 1: opening insertion, 2: replacement
	k1, k2   int // order among edits of the same class at the same position
	text     string
	sub      *srcMap // map of a rewritten replacement, in absolute source offsets
}

type rewriter struct {
	src    string
	d      dialect
	ts     *tokens
	edits  []edit
	seq    int
	tildes map[int]bool
	depth  int
}

// rewrite rewrites src of dialect d into Starlark.
func rewrite(src string, d dialect, depth int) (rewritten, error) {
	if depth > maxFStringNesting {
		return rewritten{}, &srcError{0, "f-strings are nested too deeply"}
	}
	r := &rewriter{src: src, d: d, ts: newTokens(tokenize(src)), depth: depth}
	passes := []func() error{r.imports, r.is, r.jinjaLiterals, r.tildeConcat, r.filterBinding, r.genexps, r.pows, r.fstrings}
	for _, pass := range passes {
		if err := pass(); err != nil {
			return rewritten{}, err
		}
	}
	sort.SliceStable(r.edits, func(i, j int) bool {
		a, b := r.edits[i], r.edits[j]
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		if a.class != b.class {
			return a.class < b.class
		}
		if a.k1 != b.k1 {
			return a.k1 < b.k1
		}
		return a.k2 < b.k2
	})
	var b builder
	cursor := 0
	for _, e := range r.edits {
		if e.pos < cursor {
			continue // overlaps a replacement: only on malformed input, which Starlark rejects
		}
		b.copy(src, cursor, e.pos)
		cursor = e.pos
		switch {
		case e.class == 2 && e.sub != nil:
			b.sub(e.text, e.sub, 0)
			cursor = e.end
		case e.class == 2:
			b.synth(e.text, e.pos)
			cursor = e.end
		default:
			b.synth(e.text, e.pos)
		}
	}
	b.copy(src, cursor, len(src))
	text, m := b.result()
	return rewritten{text: text, m: m, tildes: r.tildes}, nil
}

func (r *rewriter) replace(start, end int, text string) {
	r.edits = append(r.edits, edit{pos: start, end: end, class: 2, text: text})
}

// wrap inserts open before start and close after end. Nested wraps that share a
// boundary are ordered so that they nest.
func (r *rewriter) wrap(start, end int, open, close string) {
	r.seq++
	r.edits = append(r.edits,
		edit{pos: start, end: start, class: 1, k1: -end, k2: r.seq, text: open},
		edit{pos: end, end: end, class: 0, k1: -start, k2: -r.seq, text: close})
}

// modules are the modules compute blocks may import; both are predeclared.
var modules = map[string]bool{"json": true, "math": true}

// imports turns `import json` into a no-op and rejects other imports: compute blocks
// are hermetic.
func (r *rewriter) imports() error {
	if r.d != dialectProgram {
		return nil
	}
	ts := r.ts.t
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.kind != tkName || (t.text != "import" && t.text != "from") {
			continue
		}
		if i > 0 && ts[i-1].kind != tkNewline && !ts[i-1].is(tkOp, ";") && !ts[i-1].is(tkOp, ":") {
			continue
		}
		j := i
		for j < len(ts) && ts[j].kind != tkNewline && !ts[j].is(tkOp, ";") {
			j++
		}
		text, err := importStmt(ts[i:j])
		if err != nil {
			return &srcError{t.start, err.Error()}
		}
		r.replace(t.start, ts[j-1].end, text)
		i = j
	}
	return nil
}

func importStmt(ts []token) (string, error) {
	var names []string
	for _, t := range ts[1:] {
		if t.kind == tkName || t.is(tkOp, ",") || t.is(tkOp, ".") || t.is(tkOp, "*") {
			names = append(names, t.text)
		}
	}
	errImport := func(module string) error {
		if module == "" {
			return fmt.Errorf("malformed import statement")
		}
		return fmt.Errorf("import of %q is not supported: compute blocks have no clock, filesystem, network, environment "+
			"or randomness; only the json and math modules exist (and are always available). Get values from the "+
			"outside world (such as the current time) from a tool step or an input and use its output here", module)
	}
	var stmts []string
	if ts[0].text == "from" {
		// from M import a [as b], ...
		if len(names) < 3 || names[1] != "import" {
			return "", errImport(strings.Join(firstN(names, 1), ""))
		}
		module := names[0]
		if !modules[module] {
			return "", errImport(module)
		}
		for _, group := range splitNames(names[2:]) {
			switch {
			case len(group) == 1 && group[0] == "*":
				return "", fmt.Errorf("from %s import * is not supported: use %s.NAME", module, module)
			case len(group) == 1 && isIdent(group[0]):
				stmts = append(stmts, fmt.Sprintf("%s = %s.%s", group[0], module, group[0]))
			case len(group) == 3 && group[1] == "as" && isIdent(group[0]) && isIdent(group[2]):
				stmts = append(stmts, fmt.Sprintf("%s = %s.%s", group[2], module, group[0]))
			default:
				return "", fmt.Errorf("malformed import statement")
			}
		}
	} else {
		// import M [as b], ...
		for _, group := range splitNames(names) {
			if len(group) == 0 || !modules[group[0]] {
				return "", errImport(strings.Join(firstN(group, 1), ""))
			}
			switch {
			case len(group) == 1:
			case len(group) == 3 && group[1] == "as" && isIdent(group[2]):
				stmts = append(stmts, fmt.Sprintf("%s = %s", group[2], group[0]))
			default:
				return "", errImport(strings.Join(group, ""))
			}
		}
	}
	if len(stmts) == 0 {
		return "pass", nil
	}
	return strings.Join(stmts, "; "), nil
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// splitNames splits a name list at commas, dropping parentheses.
func splitNames(names []string) [][]string {
	var groups [][]string
	var cur []string
	for _, n := range names {
		if n == "," {
			groups = append(groups, cur)
			cur = nil
			continue
		}
		cur = append(cur, n)
	}
	return append(groups, cur)
}

// jinjaTests are Jinja tests (`x is string`) that have no Python meaning; rather
// than compare against an undefined name, we reject them.
var jinjaTests = map[string]bool{
	"string": true, "number": true, "integer": true, "float": true, "mapping": true,
	"sequence": true, "iterable": true, "boolean": true, "callable": true, "even": true,
	"odd": true, "divisibleby": true, "lower": true, "upper": true, "sameas": true,
	"escaped": true, "eq": true, "ne": true, "gt": true, "ge": true, "lt": true, "le": true,
}

// is rewrites Python's `is`/`is not` (which Starlark lacks) as equality, and the
// Jinja tests `is defined`, `is none` and friends.
func (r *rewriter) is() error {
	ts := r.ts.t
	for i, t := range ts {
		if !t.is(tkName, "is") || !r.ts.operandEnd(i-1) {
			continue
		}
		j := i + 1
		neg := j < len(ts) && ts[j].is(tkName, "not")
		if neg {
			j++
		}
		eq, ne := "==", "!="
		if neg {
			eq, ne = ne, eq
		}
		text, end := eq, ts[j-1].end
		if j < len(ts) && ts[j].kind == tkName && (j+1 >= len(ts) || !ts[j+1].is(tkOp, ".") && !ts[j+1].is(tkOp, "(")) {
			switch name := ts[j].text; {
			case name == "defined" || name == "undefined":
				if err := r.defined(i, j, neg != (name == "undefined")); err != nil {
					return err
				}
				continue
			case name == "None" || name == "none":
				text, end = eq+" None", ts[j].end
			case name == "true" || name == "True":
				text, end = eq+" True", ts[j].end
			case name == "false" || name == "False":
				text, end = eq+" False", ts[j].end
			case jinjaTests[name]:
				return &srcError{t.start, fmt.Sprintf("the Jinja test \"is %s\" is not supported; write it in Python, "+
					"for example isinstance(x, dict), type(x) == \"string\" or x %% 2 == 0", name)}
			}
		}
		r.replace(t.start, end, text)
	}
	return nil
}

// defined rewrites `X is defined` (the is at token i, defined at token j) as
// __skillbus_defined__(lambda: X), negated with not: the AST pass turns it into a
// call that evaluates X and reports whether every name, key, attribute and index
// it reads exists. X is Jinja's unary operand of the test, as for a filter.
func (r *rewriter) defined(i, j int, neg bool) error {
	ts := r.ts
	s := ts.unaryStart(i-1, r.d)
	if s < 0 {
		return &srcError{ts.t[i].start, "`is defined` needs a name before it, as in x is defined"}
	}
	open := "(" + definedName + "(lambda: "
	if neg {
		open = "(not " + definedName + "(lambda: "
	}
	r.seq++
	r.edits = append(r.edits, edit{pos: ts.t[s].start, end: ts.t[s].start, class: 1, k1: -ts.t[j].end, k2: r.seq, text: open})
	r.replace(ts.t[i].start, ts.t[j].end, "))")
	return nil
}

// filterBinding gives filters Jinja's precedence in templates and conditions by
// parenthesizing each filtered operand with its filters (see unaryStart):
// 2 - x | abs becomes 2 - (x | abs), which Starlark would otherwise read as
// (2 - x) | abs. Compute blocks are Python, where | is an operator like any other.
func (r *rewriter) filterBinding() error {
	if r.d == dialectProgram {
		return nil
	}
	ts := r.ts
	done := map[int]bool{} // the | of chains already wrapped
	for i := range ts.t {
		if done[i] || !ts.filterAt(i, r.d) {
			continue
		}
		s := ts.unaryStart(i-1, r.d)
		if s < 0 {
			continue
		}
		e := ts.filterChainEnd(s, r.d, func(k int) { done[k] = true })
		if e < i {
			continue
		}
		r.wrap(ts.t[s].start, ts.t[e].end, "(", ")")
	}
	return nil
}

// jinjaLiterals accepts Jinja's lower-case true, false and none in templates.
func (r *rewriter) jinjaLiterals() error {
	if r.d != dialectTemplate {
		return nil
	}
	ts := r.ts.t
	for i, t := range ts {
		if t.kind != tkName || (i > 0 && ts[i-1].is(tkOp, ".")) || (i+1 < len(ts) && ts[i+1].is(tkOp, "=")) {
			continue
		}
		switch t.text {
		case "true", "false", "none":
			r.replace(t.start, t.end, strings.ToUpper(t.text[:1])+t.text[1:])
		}
	}
	return nil
}

// tildeConcat turns Jinja's string concatenation `a ~ b` into a - b, which has the
// same precedence as +; the AST pass turns it into a concatenation call.
func (r *rewriter) tildeConcat() error {
	if r.d != dialectTemplate {
		return nil
	}
	for i, t := range r.ts.t {
		if t.is(tkOp, "~") && r.ts.operandEnd(i-1) {
			r.replace(t.start, t.end, "-")
			if r.tildes == nil {
				r.tildes = map[int]bool{}
			}
			r.tildes[t.start] = true
		}
	}
	return nil
}

// genexps turns a generator expression into a list comprehension, since Starlark
// has none: f(x for x in y) and (x for x in y).
func (r *rewriter) genexps() error {
	ts := r.ts
	for i, t := range ts.t {
		m := ts.match[i]
		if !t.is(tkOp, "(") || m < 0 {
			continue
		}
		forAt := -1
		for j := i + 1; j < m; j++ {
			if tj := ts.t[j]; tj.kind == tkOp && (tj.text == "(" || tj.text == "[" || tj.text == "{") && ts.match[j] > j {
				j = ts.match[j] // skip nested brackets
				continue
			}
			if ts.t[j].is(tkOp, ",") {
				break
			}
			if ts.t[j].is(tkName, "for") {
				forAt = j
				break
			}
		}
		if forAt <= i+1 {
			continue
		}
		if ts.operandEnd(i - 1) {
			r.wrap(t.end, ts.t[m].start, "[", "]")
		} else {
			r.replace(t.start, t.end, "[")
			r.replace(ts.t[m].start, ts.t[m].end, "]")
		}
	}
	return nil
}

// pows rewrites the power operator, which Starlark lacks, as a call. ** binds
// tighter than unary minus on its left and is right-associative.
func (r *rewriter) pows() error {
	if r.d == dialectTemplate {
		return r.jinjaPows()
	}
	ts := r.ts
	chainEnd := map[int]int{} // for each rewritten **, where its right operand ends
	for i := len(ts.t) - 1; i >= 0; i-- {
		t := ts.t[i]
		if !t.is(tkOp, "**") || !ts.operandEnd(i-1) {
			continue
		}
		ls := ts.postfixStart(i - 1)
		re := ts.postfixEnd(i + 1)
		if ls < 0 || re < 0 {
			continue
		}
		if e, ok := chainEnd[re+1]; ok {
			re = e // right-associative: a ** (b ** c)
		}
		chainEnd[i] = re
		r.wrap(ts.t[ls].start, ts.t[re].end, powName+"(", ")")
		r.replace(t.start, t.end, ", ")
	}
	return nil
}

// jinjaPows rewrites ** in templates as Jinja reads it: left-associative, with
// unary operands, signs and filters included: -2 ** 2 is 4 and 2 ** 3 ** 2 is 64.
func (r *rewriter) jinjaPows() error {
	ts := r.ts
	startOf := map[int]int{} // for the last token of a rewritten **, where it starts
	for i := range ts.t {
		if !ts.t[i].is(tkOp, "**") || !ts.operandEnd(i-1) {
			continue
		}
		ls := ts.unaryStart(i-1, r.d)
		re := ts.unaryEnd(i+1, r.d)
		if ls < 0 || re < 0 {
			continue
		}
		if s, ok := startOf[i-1]; ok {
			ls = s // left-associative: (a ** b) ** c
		}
		startOf[re] = ls
		r.wrap(ts.t[ls].start, ts.t[re].end, powName+"(", ")")
		r.replace(ts.t[i].start, ts.t[i].end, ", ")
	}
	return nil
}

// fstrings rewrites f-strings as calls to str.format.
func (r *rewriter) fstrings() error {
	for _, t := range r.ts.t {
		if t.kind != tkString || !strings.Contains(t.prefix, "f") || !t.closed {
			continue
		}
		text, m, err := r.fstring(t)
		if err != nil {
			return err
		}
		r.edits = append(r.edits, edit{pos: t.start, end: t.end, class: 2, text: text, sub: m})
	}
	return nil
}

func (r *rewriter) fstring(t token) (string, *srcMap, error) {
	src := r.src
	var b builder
	b.synth(strings.ReplaceAll(t.prefix, "f", "")+t.quote, t.start)
	type arg struct {
		rw    rewritten
		start int
	}
	var args []arg
	lit := t.bodyStart
	i := t.bodyStart
	for i < t.bodyEnd {
		c := src[i]
		switch {
		case c == '\\':
			i += 2
		case (c == '{' || c == '}') && i+1 < t.bodyEnd && src[i+1] == c:
			i += 2 // {{ and }} mean { and } in both f-strings and str.format
		case c == '}':
			return "", nil, &srcError{i, "f-string: single '}' is not allowed (write '}}' for a literal brace)"}
		case c == '{':
			start := i + 1
			end, conv, err := r.fstringField(start, t.bodyEnd)
			if err != nil {
				return "", nil, err
			}
			exprText := src[start:end]
			if strings.TrimSpace(exprText) == "" {
				return "", nil, &srcError{i, "f-string: empty expression not allowed"}
			}
			d := dialectExpr
			if r.d == dialectTemplate {
				d = dialectTemplate
			}
			rw, err := rewrite(exprText, d, r.depth+1)
			if err != nil {
				if se, ok := err.(*srcError); ok {
					se.off += start
				}
				return "", nil, err
			}
			for off := range rw.tildes {
				if r.tildes == nil {
					r.tildes = map[int]bool{}
				}
				r.tildes[off+start] = true
			}
			args = append(args, arg{rw, start})
			b.copy(src, lit, i)
			b.synth("{"+conv+"}", i)
			i = fieldClose(src, end, t.bodyEnd) + 1
			lit = i
		default:
			i++
		}
	}
	b.copy(src, lit, min(i, t.bodyEnd))
	b.synth(t.quote+".format(", t.end-1)
	for k, a := range args {
		if k > 0 {
			b.synth(", ", a.start)
		}
		b.synth("(", a.start)
		b.sub(a.rw.text, a.rw.m, a.start)
		b.synth("\n)", a.start+len(a.rw.text))
	}
	b.synth(")", t.end-1)
	text, m := b.result()
	return text, m, nil
}

// fstringField scans the expression of an f-string replacement field starting at
// start and returns where it ends and its conversion ("!r" or "!s", or "").
func (r *rewriter) fstringField(start, limit int) (end int, conv string, err error) {
	src := r.src
	depth := 0
	for i := start; i < limit; i++ {
		c := src[i]
		switch c {
		case '\'', '"':
			q := c
			for i++; i < limit && src[i] != q; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']':
			depth--
		case '}':
			if depth == 0 {
				return i, "", nil
			}
			depth--
		case '!':
			if depth == 0 && (i+1 >= limit || src[i+1] != '=') {
				if i+2 < limit && strings.ContainsRune("rsa", rune(src[i+1])) && (src[i+2] == '}' || src[i+2] == ':') {
					if src[i+2] == ':' {
						return 0, "", &srcError{i + 2, fmt.Sprintf("f-string: format spec %q is not supported; format the value with str methods or the %% operator", src[i+2:fieldClose(src, i+2, limit)])}
					}
					conv = "!" + string(src[i+1])
					if conv == "!a" {
						conv = "!r"
					}
					return i, conv, nil
				}
				return 0, "", &srcError{i, "f-string: invalid conversion (want !r or !s)"}
			}
		case ':':
			if depth == 0 {
				return 0, "", &srcError{i, fmt.Sprintf("f-string: format spec %q is not supported; format the value with str methods or the %% operator", src[i:fieldClose(src, i, limit)])}
			}
		case '=':
			if depth == 0 && i+1 < limit && strings.ContainsRune("}!:", rune(src[i+1])) && i > start && !strings.ContainsRune("=!<>", rune(src[i-1])) {
				return 0, "", &srcError{i, "f-string: the self-documenting '=' specifier is not supported"}
			}
		}
	}
	return 0, "", &srcError{start - 1, "f-string: unclosed '{' (write '{{' for a literal brace)"}
}

// fieldClose returns the offset of the '}' that closes the field containing i.
func fieldClose(src string, i, limit int) int {
	for ; i < limit; i++ {
		if src[i] == '}' {
			return i
		}
	}
	return limit - 1
}

// normalize converts line endings to \n and, for compute blocks, removes
// indentation common to all lines (as textwrap.dedent would).
func normalize(src string, dedent bool) (string, *srcMap) {
	var b builder
	indent := ""
	if dedent {
		indent = commonIndent(src)
	}
	start := 0
	for start <= len(src) {
		end := strings.IndexAny(src[start:], "\r\n")
		if end < 0 {
			end = len(src)
		} else {
			end += start
		}
		line := src[start:end]
		from := start
		if strings.TrimSpace(line) != "" && strings.HasPrefix(line, indent) {
			from += len(indent)
		}
		b.copy(src, from, end)
		if end == len(src) {
			break
		}
		b.synth("\n", end)
		start = end + 1
		if src[end] == '\r' && start < len(src) && src[start] == '\n' {
			start++
		}
	}
	return b.result()
}

func commonIndent(src string) string {
	indent, first := "", true
	for line := range strings.Lines(src) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		ws := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if first {
			indent, first = ws, false
			continue
		}
		for !strings.HasPrefix(ws, indent) {
			indent = indent[:len(indent)-1]
		}
	}
	return indent
}
