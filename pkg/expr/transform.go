package expr

import (
	"fmt"
	"github.com/skillbus/skillbus/pkg/failure"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// This file rewrites parsed Starlark before it is resolved:
//
//   - Jinja filters: x | f(a) becomes |f(x, a), with |f an internal name env
//     cannot hide;
//   - operations that can allocate without bound (+, *, %, <<, and the string and
//     list methods in guardedMethods) become calls to internal builtins that
//     check the allocation budget first;
//   - == and != between values that may come from env become calls that compare
//     attrdicts with dicts and attrlists with lists;
//   - Jinja's ~ (rewritten to '-' in the text) becomes string concatenation;
//   - the ** rewrite's call becomes the internal |pow.

// guardedMethods are methods whose calls go through the internal builtins |m.NAME:
// those that can allocate without bound, those that do work in proportion to the
// length of a string (counted as steps), and Python's methods that Starlark lacks.
var guardedMethods = map[string]bool{
	"join": true, "replace": true, "format": true, "split": true, "rsplit": true,
	"splitlines": true, "ljust": true, "rjust": true, "center": true, "zfill": true,
	"extend": true, "sort": true, "reverse": true, "copy": true,
	"lower": true, "upper": true, "strip": true, "lstrip": true, "rstrip": true,
	"title": true, "capitalize": true, "find": true, "rfind": true, "index": true,
	"rindex": true, "count": true, "startswith": true, "endswith": true,
	"partition": true, "rpartition": true, "removeprefix": true, "removesuffix": true,
}

// callMethods are the methods whose calls x.name(...) become |m.NAME(x, ...): the
// guarded methods, and the dict methods, which a call reaches even when the
// mapping has a key of the same name (attribute access reads the key).
var callMethods = func() map[string]bool {
	m := map[string]bool{"get": true, "keys": true, "values": true, "items": true}
	for name := range guardedMethods {
		m[name] = true
	}
	return m
}()

type xform struct {
	p     *part
	d     dialect
	bound map[string]bool // names a compute block assigns
	err   error
}

func (x *xform) fail(pos syntax.Position, format string, args ...any) {
	if x.err == nil {
		x.err = repairable(x.p.errorAt(x.p.srcOffset(pos), fmt.Sprintf(format, args...)))
	}
}

func ident(name string, pos syntax.Position) *syntax.Ident {
	return &syntax.Ident{NamePos: pos, Name: name}
}

func call(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: ident(name, pos), Lparen: pos, Args: args, Rparen: pos}
}

func strLit(s string, pos syntax.Position) *syntax.Literal {
	return &syntax.Literal{Token: syntax.STRING, TokenPos: pos, Raw: strconv.Quote(s), Value: s}
}

func isNumLit(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Literal:
		return e.Token == syntax.INT || e.Token == syntax.FLOAT
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && isNumLit(e.X)
	case *syntax.ParenExpr:
		return isNumLit(e.X)
	}
	return false
}

// isScalarLit reports whether e is a literal whose equality needs no help.
func isScalarLit(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Literal:
		return true
	case *syntax.Ident:
		return e.Name == "None" || e.Name == "True" || e.Name == "False"
	case *syntax.ParenExpr:
		return isScalarLit(e.X)
	}
	return isNumLit(e)
}

// isLiteralCollection reports whether e is a list, tuple or dict display, whose
// size the source bounds.
func isLiteralCollection(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.ListExpr, *syntax.TupleExpr, *syntax.DictExpr:
		return true
	case *syntax.ParenExpr:
		return isLiteralCollection(e.X)
	case *syntax.Literal:
		return true
	}
	return false
}

func (x *xform) exprs(es []syntax.Expr) []syntax.Expr {
	for i, e := range es {
		es[i] = x.expr(e)
	}
	return es
}

func (x *xform) expr(e syntax.Expr) syntax.Expr {
	if e == nil || x.err != nil {
		return e
	}
	switch e := e.(type) {
	case *syntax.Ident:
		if e.Name == powName {
			e.Name = "|pow"
		}
	case *syntax.Literal:
	case *syntax.ParenExpr:
		e.X = x.expr(e.X)
	case *syntax.UnaryExpr:
		e.X = x.expr(e.X)
	case *syntax.BinaryExpr:
		return x.binary(e)
	case *syntax.CallExpr:
		return x.call(e)
	case *syntax.DotExpr:
		e.X = x.expr(e.X)
		if guardedMethods[e.Name.Name] {
			return call("|attr", e.Dot, e.X, strLit(e.Name.Name, e.Name.NamePos))
		}
	case *syntax.IndexExpr:
		return x.index(e)
	case *syntax.SliceExpr:
		// s[a:b] slices a string by characters, not bytes
		args := []syntax.Expr{x.expr(e.X), orNone(x.expr(e.Lo), e.Lbrack), orNone(x.expr(e.Hi), e.Lbrack), orNone(x.expr(e.Step), e.Lbrack)}
		return &syntax.CallExpr{Fn: ident("|slice", e.Lbrack), Lparen: e.Lbrack, Args: args, Rparen: e.Rbrack}
	case *syntax.CondExpr:
		e.Cond = x.expr(e.Cond)
		e.True = x.expr(e.True)
		e.False = x.expr(e.False)
	case *syntax.ListExpr:
		e.List = x.exprs(e.List)
	case *syntax.TupleExpr:
		e.List = x.exprs(e.List)
	case *syntax.DictExpr:
		for _, entry := range e.List {
			if entry, ok := entry.(*syntax.DictEntry); ok {
				entry.Key = x.expr(entry.Key)
				entry.Value = x.expr(entry.Value)
			}
		}
	case *syntax.Comprehension:
		e.Body = x.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.Vars = x.target(c.Vars)
				c.X = call("|iter", c.For, x.expr(c.X))
			case *syntax.IfClause:
				c.Cond = x.expr(c.Cond)
			}
		}
	case *syntax.LambdaExpr:
		x.params(e.Params)
		e.Body = x.expr(e.Body)
	}
	return e
}

// call transforms a call: the `is defined` rewrite's, and method calls that go
// through internals (see callMethods).
func (x *xform) call(e *syntax.CallExpr) syntax.Expr {
	if id, ok := e.Fn.(*syntax.Ident); ok && id.Name == definedName && len(e.Args) == 1 {
		if lambda, ok := e.Args[0].(*syntax.LambdaExpr); ok {
			return x.lazy("|defined", id.NamePos, lambda.Body)
		}
	}
	if dot, ok := e.Fn.(*syntax.DotExpr); ok && callMethods[dot.Name.Name] {
		args := append([]syntax.Expr{x.expr(dot.X)}, x.exprs(e.Args)...)
		return &syntax.CallExpr{Fn: ident("|m."+dot.Name.Name, dot.Dot), Lparen: dot.Dot, Args: args, Rparen: e.Rparen}
	}
	e.Fn = x.expr(e.Fn)
	e.Args = x.exprs(e.Args)
	return e
}

// index transforms x[i]; s[i] is the i-th character, not byte, of a string. A
// constant string key needs no help.
func (x *xform) index(e *syntax.IndexExpr) syntax.Expr {
	e.X = x.expr(e.X)
	e.Y = x.expr(e.Y)
	if strLiteral(e.Y) != nil {
		return e
	}
	return &syntax.CallExpr{Fn: ident("|index", e.Lbrack), Lparen: e.Lbrack, Args: []syntax.Expr{e.X, e.Y}, Rparen: e.Rbrack}
}

func (x *xform) binary(e *syntax.BinaryExpr) syntax.Expr {
	if e.Op == syntax.PIPE {
		if f := x.filter(e); f != nil || x.err != nil {
			return f
		}
	}
	e.X = x.expr(e.X)
	e.Y = x.expr(e.Y)
	switch e.Op {
	case syntax.PLUS:
		if !isNumLit(e.X) && !isNumLit(e.Y) {
			return call("|add", e.OpPos, e.X, e.Y)
		}
	case syntax.STAR:
		if !isNumLit(e.X) || !isNumLit(e.Y) {
			return call("|mul", e.OpPos, e.X, e.Y)
		}
	case syntax.PERCENT:
		if !isNumLit(e.X) && !isNumLit(e.Y) {
			return call("|mod", e.OpPos, e.X, e.Y)
		}
	case syntax.LTLT:
		if !isNumLit(e.X) || !isNumLit(e.Y) {
			return call("|lsh", e.OpPos, e.X, e.Y)
		}
	case syntax.MINUS:
		if x.p.isTilde(e.OpPos) {
			return call("|concat", e.OpPos, e.X, e.Y)
		}
	case syntax.IN, syntax.NOT_IN:
		if !isLiteralCollection(e.Y) {
			name := "|in"
			if e.Op == syntax.NOT_IN {
				name = "|notin"
			}
			return call(name, e.OpPos, e.X, e.Y)
		}
	case syntax.EQL, syntax.NEQ:
		if !isScalarLit(e.X) && !isScalarLit(e.Y) {
			name := "|eq"
			if e.Op == syntax.NEQ {
				name = "|ne"
			}
			return call(name, e.OpPos, e.X, e.Y)
		}
	}
	return e
}

// filter turns x | f and x | f(args) into a call of filter f, or returns nil if e
// is not a filter application (in Python, | is also bitwise or and set union).
func (x *xform) filter(e *syntax.BinaryExpr) syntax.Expr {
	var name *syntax.Ident
	var args []syntax.Expr
	lparen, rparen := e.OpPos, e.OpPos
	switch y := e.Y.(type) {
	case *syntax.Ident:
		name = y
		lparen, rparen = y.NamePos, y.NamePos
	case *syntax.CallExpr:
		if id, ok := y.Fn.(*syntax.Ident); ok {
			name, args, lparen, rparen = id, y.Args, y.Lparen, y.Rparen
		}
	}
	if name != nil && filterAliases[name.Name] != "" && !x.bound[name.Name] {
		name = ident(filterAliases[name.Name], name.NamePos)
	}
	if x.d != dialectTemplate {
		if name == nil || filters[name.Name] == nil || x.bound[name.Name] {
			return nil
		}
	} else if name == nil {
		x.fail(e.OpPos, "a filter must be a name, like x | lower or x | replace(' ', '-')")
		return nil
	} else if filters[name.Name] == nil {
		msg := fmt.Sprintf("unknown filter %q", name.Name)
		if near := nearest(name.Name, filterNames); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		if x.err == nil {
			e := x.p.errorAt(x.p.srcOffset(name.NamePos), msg)
			x.err = (&failure.Fault{Kind: failure.FaultUnknownFilter, Name: name.Name, Have: filterNames, Field: x.p.name, Err: e}).Repairable()
		}
		return nil
	}
	var operand syntax.Expr
	if name.Name == "default" {
		operand = x.lazy("|lazy", e.OpPos, e.X) // an undefined operand is None
	} else {
		operand = x.expr(e.X)
	}
	args = append([]syntax.Expr{operand}, x.exprs(args)...)
	return &syntax.CallExpr{Fn: ident("|"+name.Name, name.NamePos), Lparen: lparen, Args: args, Rparen: rparen}
}

func orNone(e syntax.Expr, pos syntax.Position) syntax.Expr {
	if e == nil {
		return ident("None", pos)
	}
	return e
}

// filterAliases are Jinja's other names of filters, which are not builtins.
var filterAliases = map[string]string{"d": "default"}

// lazy returns a call of the internal fn (|defined or |lazy) with the name e's
// value starts from, when that is a name from env, and e as a function of no
// arguments, so that fn can tell a missing name, key, attribute or index from
// any other failure.
func (x *xform) lazy(fn string, pos syntax.Position, e syntax.Expr) syntax.Expr {
	root := ""
	for r := e; r != nil; {
		switch v := r.(type) {
		case *syntax.ParenExpr:
			r = v.X
		case *syntax.DotExpr:
			r = v.X
		case *syntax.IndexExpr:
			r = v.X
		case *syntax.SliceExpr:
			r = v.X
		case *syntax.CallExpr:
			r = v.Fn
		case *syntax.Ident:
			if !x.bound[v.Name] {
				root = v.Name
			}
			r = nil
		default:
			r = nil
		}
	}
	body := x.expr(e)
	return call(fn, pos, strLit(root, pos), &syntax.LambdaExpr{Lambda: pos, Body: body})
}

// target transforms the subexpressions of an assignment target.
func (x *xform) target(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X = x.expr(e.X)
		e.Y = x.expr(e.Y)
	case *syntax.DotExpr:
		e.X = x.expr(e.X)
	case *syntax.TupleExpr:
		for i, el := range e.List {
			e.List[i] = x.target(el)
		}
	case *syntax.ListExpr:
		for i, el := range e.List {
			e.List[i] = x.target(el)
		}
	case *syntax.ParenExpr:
		e.X = x.target(e.X)
	}
	return e
}

// operand returns a copy of assignment target e to read its value in x op= y, or
// nil. Subexpressions are shared: they are only read.
func operand(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.Ident:
		return ident(e.Name, e.NamePos)
	case *syntax.IndexExpr:
		return &syntax.IndexExpr{X: e.X, Lbrack: e.Lbrack, Y: e.Y, Rbrack: e.Rbrack}
	case *syntax.DotExpr:
		return &syntax.DotExpr{X: e.X, Dot: e.Dot, NamePos: e.NamePos, Name: ident(e.Name.Name, e.NamePos)}
	case *syntax.ParenExpr:
		return operand(e.X)
	}
	return nil
}

func (x *xform) params(params []syntax.Expr) {
	for _, p := range params {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = x.expr(b.Y)
		}
	}
}

func (x *xform) stmts(stmts []syntax.Stmt) {
	for _, s := range stmts {
		if x.err != nil {
			return
		}
		switch s := s.(type) {
		case *syntax.AssignStmt:
			s.RHS = x.expr(s.RHS)
			s.LHS = x.target(s.LHS)
			guard := map[syntax.Token]string{syntax.PLUS_EQ: "|iadd", syntax.STAR_EQ: "|mul", syntax.PERCENT_EQ: "|mod", syntax.LTLT_EQ: "|lsh"}[s.Op]
			if guard == "" || (s.Op == syntax.PLUS_EQ || s.Op == syntax.PERCENT_EQ) && isNumLit(s.RHS) {
				continue
			}
			if op := operand(s.LHS); op != nil {
				s.RHS = call(guard, s.OpPos, op, s.RHS)
				s.Op = syntax.EQ
			}
		case *syntax.ExprStmt:
			s.X = x.expr(s.X)
		case *syntax.IfStmt:
			s.Cond = x.expr(s.Cond)
			x.stmts(s.True)
			x.stmts(s.False)
		case *syntax.ForStmt:
			s.Vars = x.target(s.Vars)
			s.X = call("|iter", s.For, x.expr(s.X))
			x.stmts(s.Body)
		case *syntax.WhileStmt:
			s.Cond = x.expr(s.Cond)
			x.stmts(s.Body)
		case *syntax.DefStmt:
			x.params(s.Params)
			x.stmts(s.Body)
		case *syntax.ReturnStmt:
			s.Result = x.expr(s.Result)
		}
	}
}

// boundNames returns the names a compute block assigns anywhere, so that x | name
// stays bitwise or when name is one of its variables.
func boundNames(stmts []syntax.Stmt) map[string]bool {
	bound := map[string]bool{}
	syntax.Walk(&syntax.File{Stmts: stmts}, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.AssignStmt:
			addTargets(bound, n.LHS)
		case *syntax.ForStmt:
			addTargets(bound, n.Vars)
		case *syntax.ForClause:
			addTargets(bound, n.Vars)
		case *syntax.DefStmt:
			bound[n.Name.Name] = true
			for _, p := range n.Params {
				addTargets(bound, p)
			}
		case *syntax.LambdaExpr:
			for _, p := range n.Params {
				addTargets(bound, p)
			}
		}
		return true
	})
	return bound
}

func addTargets(bound map[string]bool, e syntax.Expr) {
	switch e := e.(type) {
	case *syntax.Ident:
		bound[e.Name] = true
	case *syntax.TupleExpr:
		for _, el := range e.List {
			addTargets(bound, el)
		}
	case *syntax.ListExpr:
		for _, el := range e.List {
			addTargets(bound, el)
		}
	case *syntax.ParenExpr:
		addTargets(bound, e.X)
	case *syntax.BinaryExpr: // a parameter with a default
		addTargets(bound, e.X)
	case *syntax.UnaryExpr: // *args
		addTargets(bound, e.X)
	}
}

// nearest returns the candidate closest to name, if any is close enough to be a
// likely misspelling.
func nearest(name string, candidates []string) string {
	limit := min(3, max(1, utf8.RuneCountInString(name)/4))
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 64
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
