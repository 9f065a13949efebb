package skill

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/expr"
)

// checkReferences compiles every template, condition and compute block of the
// workflow and checks the names they read: each must be provided by the engine, an
// earlier step (its id or output), or the step's own loop variable; attributes of
// inputs must be declared inputs.
func (wb *workflowBuilder) checkReferences(b *builder, index map[string]int) {
	w := wb.w
	d := wb.d
	inputNames := make([]string, 0, len(w.Inputs))
	for _, in := range w.Inputs {
		inputNames = append(inputNames, in.Name)
	}
	// definedBy maps each name a step defines to the first step defining it.
	definedBy := map[string]int{}
	for i, st := range w.Steps {
		for _, n := range []string{st.ID, st.Output} {
			if n != "" {
				if _, ok := definedBy[n]; !ok {
					definedBy[n] = i
				}
			}
		}
	}
	for _, s := range wb.sites {
		scope := s.scope
		switch scope {
		case scopeAll:
			scope = len(w.Steps)
		case scopeConfirm:
			scope = len(w.Steps)
			if k, ok := index[w.Confirmations[s.confirm].Step]; ok {
				scope = k
			}
		}
		refs, err := compileSite(s)
		if err != nil {
			wb.reportCompileError(s, err)
			continue
		}
		if len(refs) == 0 {
			continue
		}
		idents := scanIdents(s.src, s.kind == siteTemplate)
		var visible []string
		for i := range scope {
			if id := w.Steps[i].ID; id != "" {
				visible = append(visible, id)
			}
			if out := w.Steps[i].Output; out != "" {
				visible = append(visible, out)
			}
		}
		known := append(slices.Clone(reservedNames), visible...)
		if s.loopVar != "" {
			known = append(known, s.loopVar)
		}
		for _, name := range refs {
			if slices.Contains(known, name) {
				continue
			}
			p := wb.identPos(s, idents, name)
			k, defined := definedBy[name]
			switch {
			case defined && k == scope && s.scope >= 0:
				d.add(SeverityError, p.line, p.col, s.field, "a step cannot read its own result; use it in a later step",
					"%s is the result of this step, which is not available yet", name)
			case defined && k >= scope:
				what := fmt.Sprintf("step %s (line %d)", name, w.Steps[k].Line)
				if name != w.Steps[k].ID {
					what = fmt.Sprintf("%s comes from step %s (line %d), which", name, w.Steps[k].ID, w.Steps[k].Line)
				}
				if s.scope == scopeConfirm {
					d.add(SeverityError, p.line, p.col, s.field, "a confirmation is asked before its step runs; it can use earlier steps only",
						"%s has not run when this confirmation is asked", what)
					break
				}
				d.add(SeverityError, p.line, p.col, s.field, "move the step that uses it after "+w.Steps[k].ID,
					"%s runs later", what)
			case slices.Contains(inputNames, name):
				d.add(SeverityError, p.line, p.col, s.field, "inputs are read through inputs",
					"unknown step or name %s; did you mean inputs.%s?", name, name)
			default:
				d.add(SeverityError, p.line, p.col, s.field, knownHint(known),
					"unknown step or name %s%s", name, didYouMean(name, known))
			}
		}
		if !slices.Contains(refs, "inputs") {
			continue
		}
		for _, id := range idents {
			if id.name != "inputs" || id.attr == "" || slices.Contains(inputNames, id.attr) {
				continue
			}
			p := wb.offsetPos(s, id.attrOff)
			switch {
			case len(inputNames) == 0:
				d.add(SeverityError, p.line, p.col, s.field, "declare it under inputs:", "unknown input %s: the skill declares no inputs", id.attr)
			default:
				d.add(SeverityError, p.line, p.col, s.field, "declared inputs: "+strings.Join(inputNames, ", "),
					"unknown input %s%s", id.attr, didYouMean(id.attr, inputNames))
			}
		}
	}
}

func knownHint(known []string) string {
	if len(known) > 12 {
		return ""
	}
	return "names available here: " + strings.Join(known, ", ")
}

// compileSite compiles a site and returns the names it reads.
func compileSite(s site) ([]string, error) {
	switch s.kind {
	case siteExpr:
		e, err := expr.ParseExpr(s.src)
		if err != nil {
			return nil, err
		}
		return e.Refs(), nil
	case siteProgram:
		p, err := expr.ParseProgram(s.src)
		if err != nil {
			return nil, err
		}
		return p.Refs(), nil
	}
	t, err := expr.ParseTemplate(s.src)
	if err != nil {
		return nil, err
	}
	return t.Refs(), nil
}

func (wb *workflowBuilder) reportCompileError(s site, err error) {
	what := map[siteKind]string{siteTemplate: "template", siteExpr: "condition", siteProgram: "compute block"}[s.kind]
	var e *expr.Error
	if !errors.As(err, &e) {
		wb.d.add(SeverityError, s.at.line, s.at.col, s.field, "", "invalid %s: %v", what, err)
		return
	}
	p := s.at
	if e.Line > 0 {
		p = wb.srcPos(s, e.Line, e.Col)
	}
	hint := ""
	switch {
	case strings.Contains(e.Msg, "unclosed {{"):
		hint = "close it with }}"
	case strings.Contains(e.Msg, "syntax error"):
		hint = "expressions use Python syntax (Starlark); see doc.go"
	}
	wb.d.add(SeverityError, p.line, p.col, s.field, hint, "invalid %s: %s", what, e.Msg)
}

// identPos is where name first appears in a site's source.
func (wb *workflowBuilder) identPos(s site, idents []ident, name string) at {
	for _, id := range idents {
		if id.name == name {
			return wb.offsetPos(s, id.off)
		}
	}
	return s.at
}

// offsetPos maps a byte offset in a site's source to a file position.
func (wb *workflowBuilder) offsetPos(s site, off int) at {
	off = min(max(off, 0), len(s.src))
	line := 1 + strings.Count(s.src[:off], "\n")
	start := strings.LastIndexByte(s.src[:off], '\n') + 1
	return wb.srcPos(s, line, 1+utf8.RuneCountInString(s.src[start:off]))
}

// srcPos maps a 1-based line and column of a site's source to a file position: for
// a block scalar, its lines are the file's lines below the indicator, indented; for
// a one-line value, the column is offset by the value's column and its quote.
func (wb *workflowBuilder) srcPos(s site, line, col int) at {
	p := s.at
	switch {
	case s.block:
		p.line += line - 1
		p.col = 0
		if text, ok := wb.d.line(p.line); ok {
			p.col = utf8.RuneCountInString(text) - utf8.RuneCountInString(strings.TrimLeft(text, " ")) + col
		}
	case line == 1 && p.col > 0:
		p.col += col - 1
		if s.quoted {
			p.col++
		}
	default:
		p.line += line - 1
		p.col = 0
	}
	return p
}

// ident is a name read in a source: a bare identifier (not an attribute of
// something else), and for inputs the attribute or key read from it.
type ident struct {
	name    string
	off     int
	attr    string
	attrOff int
}

// dictMethods are methods of inputs, not inputs.
var dictMethods = []string{"get", "keys", "values", "items"}

// scanIdents lists the bare identifiers of a source, outside string literals and
// comments; for a template, inside its {{ }} and {% %} parts only. It is a scanner,
// not a parser: the expression package has checked the syntax and found the free
// names; this finds where they are, and what inputs.x reads.
func scanIdents(src string, template bool) []ident {
	if !template {
		return scanCode(src, 0, len(src), nil)
	}
	var out []ident
	for i := 0; i+1 < len(src); {
		j := strings.Index(src[i:], "{")
		if j < 0 {
			break
		}
		start := i + j
		if start+1 >= len(src) || src[start+1] != '{' && src[start+1] != '%' {
			i = start + 1
			continue
		}
		closer := "}}"
		if src[start+1] == '%' {
			closer = "%}"
		}
		end := strings.Index(src[start+2:], closer)
		if end < 0 {
			end = len(src)
		} else {
			end += start + 2
		}
		out = scanCode(src, start+2, end, out)
		i = end + 2
	}
	return out
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || '0' <= c && c <= '9' }

// scanCode scans src[from:to] as expression code.
func scanCode(src string, from, to int, out []ident) []ident {
	prevDot := false
	for i := from; i < to; {
		c := src[i]
		switch {
		case c == '#':
			for i < to && src[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			i = skipString(src, i, to, "", &out)
			prevDot = false
		case isIdentStart(c):
			j := i
			for j < to && isIdentByte(src[j]) {
				j++
			}
			word := src[i:j]
			if j < to && (src[j] == '"' || src[j] == '\'') && len(word) <= 2 && strings.Trim(strings.ToLower(word), "rbfu") == "" {
				i = skipString(src, j, to, strings.ToLower(word), &out)
				prevDot = false
				continue
			}
			if !prevDot {
				id := ident{name: word, off: i}
				if word == "inputs" {
					id.attr, id.attrOff = inputAttr(src, j, to)
				}
				out = append(out, id)
			}
			prevDot = false
			i = j
		case c == '.':
			prevDot = true
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case '0' <= c && c <= '9':
			for i < to && (isIdentByte(src[i]) || src[i] == '.') {
				i++
			}
			prevDot = false
		default:
			prevDot = false
			i++
		}
	}
	return out
}

// inputAttr reads what follows inputs at i: .name, ["name"] or .get("name").
func inputAttr(src string, i, to int) (string, int) {
	skip := func(i int) int {
		for i < to && (src[i] == ' ' || src[i] == '\t') {
			i++
		}
		return i
	}
	literal := func(i int) (string, int) {
		i = skip(i)
		if i >= to || src[i] != '"' && src[i] != '\'' {
			return "", 0
		}
		q := src[i]
		j := i + 1
		for j < to && src[j] != q && src[j] != '\\' && src[j] != '\n' {
			j++
		}
		if j >= to || src[j] != q {
			return "", 0
		}
		return src[i+1 : j], i + 1
	}
	i = skip(i)
	if i >= to {
		return "", 0
	}
	switch src[i] {
	case '[':
		return literal(i + 1)
	case '.':
		j := skip(i + 1)
		k := j
		for k < to && isIdentByte(src[k]) {
			k++
		}
		name := src[j:k]
		if !slices.Contains(dictMethods, name) {
			return name, j
		}
		if name == "get" {
			if k = skip(k); k < to && src[k] == '(' {
				return literal(k + 1)
			}
		}
	}
	return "", 0
}

// skipString skips a string literal starting at the quote at i and returns the
// offset after it. The replacement fields of an f-string are code and are scanned.
func skipString(src string, i, to int, prefix string, out *[]ident) int {
	q := src[i]
	raw := strings.Contains(prefix, "r")
	fstr := strings.Contains(prefix, "f")
	triple := i+2 < to && src[i+1] == q && src[i+2] == q
	j := i + 1
	if triple {
		j = i + 3
	}
	for j < to {
		c := src[j]
		switch {
		case c == '\\' && !raw:
			j += 2
			continue
		case c == q && (!triple || j+2 < to && src[j+1] == q && src[j+2] == q):
			if triple {
				return j + 3
			}
			return j + 1
		case c == '\n' && !triple:
			return j
		case fstr && c == '{':
			if j+1 < to && src[j+1] == '{' {
				j += 2
				continue
			}
			end := j + 1
			depth := 1
			for end < to && depth > 0 && src[end] != q {
				switch src[end] {
				case '{':
					depth++
				case '}':
					depth--
				}
				end++
			}
			*out = scanCode(src, j+1, max(end-1, j+1), *out)
			j = end
			continue
		}
		j++
	}
	return to
}

// line returns the text of a line of the decoder's file, when it has the source.
func (d *decoder) line(n int) (string, bool) {
	if d.src == "" || n < 1 {
		return "", false
	}
	src := d.src
	for range n - 1 {
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return "", false
		}
		src = src[i+1:]
	}
	if i := strings.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return src, true
}
