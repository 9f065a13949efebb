package expr

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions are the Starlark dialect options: compute blocks are module-level
// scripts, so they need top-level control flow, reassignment and while loops.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// The file names Starlark knows expressions and compute blocks by.
const (
	exprFile    = "expr"
	programFile = "compute"
)

// Global variables that hold the value of a unit.
const (
	exprResult    = "|r"
	programResult = "result"
)

// A unit is compiled Starlark for one template, condition or compute block. It is
// immutable after compilation.
type unit struct {
	prog   *starlark.Program
	free   []freeVar // names resolved as predeclared, filled in at each evaluation
	refs   []string  // the free names that are not builtins
	reads  []Read    // where refs are read, in source order
	parts  []*part
	cfg    *config
	result string   // the global holding the value
	fast   []string // a dotted name (a.b.c) that may be evaluated without Starlark
}

type freeVar struct {
	name     string
	builtin  starlark.Value // nil unless name is a builtin
	internal bool           // an internal name (see builtins.go); env cannot hide it
}

// A part is one piece of source given to Starlark, and what maps its positions back
// to the text the user wrote.
type part struct {
	name string // the subject's name, for errors
	// Starlark positions carry the file name of the compiled function, not of
	// the parsed text, so the parts of a template are told apart by line: each
	// is parsed as if it started at line firstLine of one file.
	firstLine int
	text      *lineIndex // the whole text the user wrote (template, condition or block)
	base      int        // offset of the part's source in text
	final     *lineIndex // the rewritten source that Starlark parsed
	maps      []*srcMap  // final → rewrite input → part source, applied in order
	tildes    map[int]bool
	wrapped   bool // an expression, parsed in parentheses
}

var (
	gotToken   = regexp.MustCompile(`^got '([^']+)'`)
	gotKeyword = regexp.MustCompile(`^got ([a-z]+),`)
)

// pythonOnly explains the Python keywords that Starlark lacks.
var pythonOnly = map[string]string{
	"try":    "there are no exceptions: check values before using them, and use fail(msg) to stop with an error",
	"except": "there are no exceptions: check values before using them, and use fail(msg) to stop with an error",
	"raise":  "use fail(msg) to stop with an error",
	"del":    "there is no del: use .pop() or build a new list or dict",
	"class":  "there are no classes: use dicts",
	"with":   "there is no with: compute blocks have no files or other resources",
	"global": "there is no global: top-level variables can be reassigned anyway",
	"yield":  "there are no generators: build a list",
	"assert": "there is no assert: use if ...: fail(msg)",
}

// srcOffset returns the offset in p.text of a Starlark position in p.final.
func (p *part) srcOffset(pos syntax.Position) int {
	off := p.final.offset(int(pos.Line)-p.firstLine+1, int(pos.Col))
	for _, m := range p.maps {
		off = m.toSrc(off)
	}
	return p.base + off
}

// isTilde reports whether pos is a Jinja '~' that the rewriter turned into '-'.
func (p *part) isTilde(pos syntax.Position) bool {
	if len(p.tildes) == 0 || len(p.maps) == 0 {
		return false
	}
	return p.tildes[p.maps[0].toSrc(p.final.offset(int(pos.Line)-p.firstLine+1, int(pos.Col)))]
}

func (p *part) errorAt(off int, msg string) *Error {
	line, col := p.text.position(off)
	return &Error{Name: p.name, Line: line, Col: col, Msg: msg, Text: p.text.lineText(line)}
}

// parseErr converts an error from the rewriter or Starlark's parser or resolver.
func (p *part) parseErr(err error, normMap *srcMap) error {
	var se *srcError
	var sx syntax.Error
	var rl resolve.ErrorList
	switch {
	case errors.As(err, &se):
		return repairable(p.errorAt(p.base+normMap.toSrc(se.off), se.msg))
	case errors.As(err, &sx):
		msg := sx.Msg
		if p.wrapped {
			if off := p.final.offset(int(sx.Pos.Line)-p.firstLine+1, int(sx.Pos.Col)); off >= len(p.final.text)-2 && strings.Contains(msg, "got ") {
				msg = "unexpected end of expression (" + msg + ")"
			}
		}
		if m := gotKeyword.FindStringSubmatch(sx.Msg); m != nil && pythonOnly[m[1]] != "" {
			msg += " (" + pythonOnly[m[1]] + ")"
		}
		off := p.srcOffset(sx.Pos)
		// Starlark reports the position after the token it did not want.
		if m := gotToken.FindStringSubmatch(sx.Msg); m != nil && off >= len(m[1]) && strings.HasSuffix(p.text.text[:off], m[1]) {
			off -= len(m[1])
		}
		return repairable(p.errorAt(off, "syntax error: "+msg))
	case errors.As(err, &rl) && len(rl) > 0:
		return repairable(p.errorAt(p.srcOffset(rl[0].Pos), rl[0].Msg))
	}
	return repairable(&Error{Name: p.name, Msg: err.Error()})
}

// newExprPart rewrites and parses one expression. The expression is src, found at
// offset base of text.
func newExprPart(name string, text *lineIndex, base int, src string, d dialect, firstLine int) (*part, syntax.Expr, error) {
	p := &part{name: name, firstLine: firstLine, text: text, base: base}
	if isBlank(src) {
		return nil, nil, repairable(p.errorAt(base, "empty expression"))
	}
	norm, nm := normalize(src, false)
	rw, err := rewrite(norm, d, 0)
	if err != nil {
		return nil, nil, p.parseErr(err, nm)
	}
	// Parentheses let an expression span lines, as Jinja and YAML block scalars
	// allow; the newline keeps a trailing comment from swallowing the ')'.
	var b builder
	b.synth("(", 0)
	b.sub(rw.text, rw.m, 0)
	b.synth("\n)", len(norm))
	final, wm := b.result()
	p.final, p.maps, p.tildes, p.wrapped = newLineIndex(final), []*srcMap{wm, nm}, rw.tildes, true
	e, err := fileOptions.ParseExpr(exprFile, syntax.FilePortion{Content: []byte(final), FirstLine: int32(firstLine), FirstCol: 1}, 0)
	if err != nil {
		return nil, nil, p.parseErr(err, nm)
	}
	return p, e, nil
}

// isBlank reports whether src holds nothing but whitespace and comments.
func isBlank(src string) bool {
	for _, t := range tokenize(src) {
		if t.kind != tkNewline && t.kind != tkComment {
			return false
		}
	}
	return true
}

func parseCondition(src string, cfg *config) (*unit, error) {
	text := newLineIndex(src)
	if strings.HasPrefix(strings.TrimSpace(src), "{{") {
		pieces, err := splitTemplate(src)
		if err != nil {
			return nil, templateErr(cfg, text, err)
		}
		if e, ok := singleExpr(pieces); ok {
			return compileExprs(cfg, text, src, []tmplPiece{e}, dialectTemplate, true)
		}
		return nil, repairable(&Error{Name: cfg.name, Line: 1, Col: 1, Text: text.lineText(1),
			Msg: "a condition is one expression: write it without {{ }}, or as a single {{ expression }}"})
	}
	return compileExprs(cfg, text, src, []tmplPiece{{expr: true, start: 0, end: len(src)}}, dialectExpr, true)
}

// compileExprs compiles the expression pieces of a template (or a condition) into
// one unit. With single, the unit's value is the value of the one expression;
// otherwise it is the rendering of all pieces as a string.
func compileExprs(cfg *config, text *lineIndex, src string, pieces []tmplPiece, d dialect, single bool) (*unit, error) {
	var parts []*part
	var args []syntax.Expr
	var fast []string
	line := 1
	for _, pc := range pieces {
		if !pc.expr {
			args = append(args, strLit(pc.lit, syntax.Position{}))
			continue
		}
		p, e, err := newExprPart(cfg.name, text, pc.start, src[pc.start:pc.end], d, line)
		if err != nil {
			return nil, err
		}
		line += len(p.final.starts) + 1
		if single {
			fast = fastPath(e)
		}
		x := &xform{p: p, d: d}
		e = x.expr(e)
		if x.err != nil {
			return nil, x.err
		}
		parts = append(parts, p)
		args = append(args, e)
	}
	file := exprFile
	start := syntax.MakePosition(&file, 1, 1)
	rhs := args[0]
	if !single {
		rhs = call("|render", start, args...)
	}
	f := &syntax.File{Path: exprFile, Options: fileOptions, Stmts: []syntax.Stmt{
		&syntax.AssignStmt{Op: syntax.EQ, OpPos: start, LHS: ident(exprResult, start), RHS: rhs},
	}}
	u, err := buildUnit(cfg, parts, f, exprResult)
	if err != nil {
		return nil, err
	}
	u.fast = fast
	return u, nil
}

func parseProgram(src string, cfg *config) (*unit, error) {
	text := newLineIndex(src)
	p := &part{name: cfg.name, firstLine: 1, text: text}
	norm, nm := normalize(src, true)
	rw, err := rewrite(norm, dialectProgram, 0)
	if err != nil {
		return nil, p.parseErr(err, nm)
	}
	p.final, p.maps, p.tildes = newLineIndex(rw.text), []*srcMap{rw.m, nm}, rw.tildes
	f, err := fileOptions.Parse(programFile, rw.text, 0)
	if err != nil {
		return nil, p.parseErr(err, nm)
	}
	x := &xform{p: p, d: dialectProgram, bound: boundNames(f.Stmts)}
	x.stmts(f.Stmts)
	if x.err != nil {
		return nil, x.err
	}
	return buildUnit(cfg, []*part{p}, f, programResult)
}

// buildUnit resolves and compiles f, making every name that is not bound in f a
// predeclared name, to be filled from env or the builtins at each evaluation.
func buildUnit(cfg *config, parts []*part, f *syntax.File, result string) (*unit, error) {
	var names []string
	isPredeclared := func(name string) bool {
		if name == "True" || name == "False" || name == "None" {
			return false
		}
		names = append(names, name)
		return true
	}
	prog, err := starlark.FileProgram(f, isPredeclared)
	if err != nil {
		var rl resolve.ErrorList
		if errors.As(err, &rl) && len(rl) > 0 {
			if p := partOf(parts, rl[0].Pos); p != nil {
				return nil, repairable(p.errorAt(p.srcOffset(rl[0].Pos), rl[0].Msg))
			}
		}
		return nil, repairable(&Error{Name: cfg.name, Msg: err.Error()})
	}
	if prog.NumLoads() > 0 {
		_, pos := prog.Load(0)
		msg := "load() is not supported: everything available is predeclared"
		if p := partOf(parts, pos); p != nil {
			return nil, repairable(p.errorAt(p.srcOffset(pos), msg))
		}
		return nil, repairable(&Error{Name: cfg.name, Msg: msg})
	}
	u := &unit{prog: prog, parts: parts, cfg: cfg, result: result}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if strings.HasPrefix(name, "|") {
			b, ok := internals[name]
			if !ok {
				return nil, fmt.Errorf("expr: internal error: no internal %q", name)
			}
			u.free = append(u.free, freeVar{name: name, builtin: b, internal: true})
			continue
		}
		b := builtins[name]
		u.free = append(u.free, freeVar{name: name, builtin: b})
		if b == nil {
			u.refs = append(u.refs, name)
		}
	}
	u.findReads(f)
	return u, nil
}

func partOf(parts []*part, pos syntax.Position) *part {
	line := int(pos.Line)
	for _, p := range parts {
		if p.final != nil && line >= p.firstLine && line < p.firstLine+len(p.final.starts) {
			return p
		}
	}
	return nil
}

// fastPath returns the names of a dotted name expression (a, a.b, a.b.c), which
// evaluation can look up in env without starting Starlark, or nil.
func fastPath(e syntax.Expr) []string {
	var path []string
	for {
		switch x := e.(type) {
		case *syntax.ParenExpr:
			e = x.X
		case *syntax.DotExpr:
			path = append(path, x.Name.Name)
			e = x.X
		case *syntax.Ident:
			switch x.Name {
			case "True", "False", "None", powName:
				return nil
			}
			path = append(path, x.Name)
			slices.Reverse(path)
			return path
		default:
			return nil
		}
	}
}
