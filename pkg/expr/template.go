package expr

import (
	"errors"
	"strings"
)

// A tmplPiece is literal text or the source span of one {{ expression }}.
type tmplPiece struct {
	expr       bool
	lit        string
	start, end int
}

const stmtMsg = "{% ... %} statements are not supported in templates: use a compute step " +
	"(Python) for loops and logic, a condition: to skip a step, or an inline expression " +
	"such as {{ a if cond else b }}"

// splitTemplate splits a template into literal text and expressions. It supports
// {# comments #} and Jinja's whitespace control ({{- and -}}).
func splitTemplate(src string) ([]tmplPiece, error) {
	var pieces []tmplPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			pieces = append(pieces, tmplPiece{lit: lit.String()})
			lit.Reset()
		}
	}
	i := 0
	for i < len(src) {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 {
			lit.WriteString(src[i:])
			break
		}
		j += i
		lit.WriteString(src[i:j])
		next := byte(0)
		if j+1 < len(src) {
			next = src[j+1]
		}
		switch next {
		case '{':
			start := j + 2
			trimLeft := start < len(src) && src[start] == '-'
			if trimLeft {
				start++
			}
			end, trimRight, ok := exprEnd(src, start)
			if !ok {
				return nil, &srcError{j, "unclosed {{ (no matching }})"}
			}
			if trimLeft {
				s := strings.TrimRight(lit.String(), " \t\r\n")
				lit.Reset()
				lit.WriteString(s)
			}
			flush()
			pieces = append(pieces, tmplPiece{expr: true, start: start, end: end})
			i = end + 2
			if trimRight {
				i = end + 3
				for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
					i++
				}
			}
		case '%':
			if strings.Contains(src[j+2:], "%}") {
				return nil, &srcError{j, stmtMsg}
			}
			lit.WriteString("{%")
			i = j + 2
		case '#':
			k := strings.Index(src[j+2:], "#}")
			if k < 0 {
				lit.WriteString("{#")
				i = j + 2
				continue
			}
			i = j + 2 + k + 2
		default:
			lit.WriteByte('{')
			i = j + 1
		}
	}
	flush()
	return pieces, nil
}

// exprEnd finds the }} (or -}}) that closes an expression starting at start,
// skipping string literals and brackets, as in {{ {'a': {'b': 1}} }}.
func exprEnd(src string, start int) (end int, trimRight, ok bool) {
	depth := 0
	for i := start; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"':
			q := src[i : i+1]
			if strings.HasPrefix(src[i:], strings.Repeat(q, 3)) {
				q = strings.Repeat(q, 3)
			}
			k := i + len(q)
			for k < len(src) && !strings.HasPrefix(src[k:], q) {
				if src[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(src) {
				return 0, false, false
			}
			i = k + len(q) - 1
		case '(', '[', '{':
			depth++
		case ')', ']':
			if depth > 0 {
				depth--
			}
		case '}':
			if depth > 0 {
				depth--
			} else if i+1 < len(src) && src[i+1] == '}' {
				return i, false, true
			}
		case '-':
			if depth == 0 && strings.HasPrefix(src[i:], "-}}") {
				return i, true, true
			}
		}
	}
	return 0, false, false
}

// singleExpr returns the expression of a template that is exactly one expression
// with optional surrounding whitespace.
func singleExpr(pieces []tmplPiece) (tmplPiece, bool) {
	var e tmplPiece
	n := 0
	for _, p := range pieces {
		if p.expr {
			e = p
			n++
		} else if strings.TrimSpace(p.lit) != "" {
			return tmplPiece{}, false
		}
	}
	return e, n == 1
}

func parseTemplate(src string, cfg *config) (*Template, error) {
	if !strings.Contains(src, "{{") && !strings.Contains(src, "{%") {
		return &Template{src: src, lit: src, literal: true}, nil
	}
	text := newLineIndex(src)
	pieces, err := splitTemplate(src)
	if err != nil {
		return nil, templateErr(cfg, text, err)
	}
	var lit strings.Builder
	exprs := 0
	for _, p := range pieces {
		if p.expr {
			exprs++
		}
		lit.WriteString(p.lit)
	}
	if exprs == 0 {
		return &Template{src: src, lit: lit.String(), literal: true}, nil
	}
	if e, ok := singleExpr(pieces); ok {
		u, err := compileExprs(cfg, text, src, []tmplPiece{e}, dialectTemplate, true)
		if err != nil {
			return nil, err
		}
		return &Template{src: src, u: u}, nil
	}
	u, err := compileExprs(cfg, text, src, pieces, dialectTemplate, false)
	if err != nil {
		return nil, err
	}
	return &Template{src: src, u: u}, nil
}

func templateErr(cfg *config, text *lineIndex, err error) error {
	var se *srcError
	if errors.As(err, &se) {
		p := &part{name: cfg.name, text: text}
		return repairable(p.errorAt(se.off, se.msg))
	}
	return repairable(&Error{Name: cfg.name, Msg: err.Error()})
}
