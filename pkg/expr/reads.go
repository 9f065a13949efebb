package expr

import (
	"slices"

	"go.starlark.net/resolve"
	"go.starlark.net/syntax"
)

// A Read is one place where an expression reads a name from env, found by the
// parser that compiles it, so that callers checking names when a skill is loaded
// point at the same text that runs.
type Read struct {
	// Name is the name read: an input, step output or the like.
	Name string
	// Line and Col are where Name is, 1-based, Col in characters, in the source
	// given to ParseTemplate, ParseExpr or ParseProgram.
	Line, Col int
	// Key is the constant key read from the name, if any: name.key,
	// name["key"] or name.get("key"). A method call (name.items()) reads no key.
	Key string
	// KeyLine and KeyCol are where Key is (inside the quotes for a string).
	KeyLine, KeyCol int
}

// Reads returns where the template reads names from env, in source order.
func (t *Template) Reads() []Read {
	if t.literal {
		return nil
	}
	return slices.Clone(t.u.reads)
}

// Reads returns where the expression reads names from env, in source order.
func (e *Expr) Reads() []Read { return slices.Clone(e.u.reads) }

// Reads returns where the block reads names from env, in source order. Names
// the block assigns are not reads of env.
func (p *Program) Reads() []Read { return slices.Clone(p.u.reads) }

// findReads walks a resolved file for its reads of the names in refs.
func (u *unit) findReads(f *syntax.File) {
	if len(u.refs) == 0 {
		return
	}
	free := func(e syntax.Expr) *syntax.Ident {
		id, ok := e.(*syntax.Ident)
		if !ok || !slices.Contains(u.refs, id.Name) {
			return nil
		}
		if b, ok := id.Binding.(*resolve.Binding); !ok || b.Scope != resolve.Predeclared {
			return nil
		}
		return id
	}
	keys := map[*syntax.Ident]keyRead{}
	var idents []*syntax.Ident
	syntax.Walk(f, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok && free(id) != nil {
			idents = append(idents, id)
		} else if id, k, ok := readsKey(n, free); ok {
			keys[id] = k
		}
		return true
	})
	seen := map[syntax.Position]bool{}
	for _, id := range idents {
		if seen[id.NamePos] {
			continue
		}
		seen[id.NamePos] = true
		r := Read{Name: id.Name}
		var ok bool
		if r.Line, r.Col, ok = u.position(id.NamePos, 0); !ok {
			continue
		}
		if k, has := keys[id]; has {
			skip := 0
			if k.quoted {
				skip = 1
			}
			if line, col, ok := u.position(k.pos, skip); ok {
				r.Key, r.KeyLine, r.KeyCol = k.name, line, col
			}
		}
		u.reads = append(u.reads, r)
	}
	slices.SortFunc(u.reads, func(a, b Read) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}

// position maps a Starlark position, plus skip bytes, to the line and column of
// the text the user wrote.
func (u *unit) position(pos syntax.Position, skip int) (line, col int, ok bool) {
	if pos.Line == 0 {
		return 0, 0, false
	}
	p := partOf(u.parts, pos)
	if p == nil {
		return 0, 0, false
	}
	line, col = p.text.position(p.srcOffset(pos) + skip)
	return line, col, true
}

func strLiteral(e syntax.Expr) *syntax.Literal {
	lit, ok := e.(*syntax.Literal)
	if !ok || lit.Token != syntax.STRING {
		return nil
	}
	if _, ok := lit.Value.(string); !ok {
		return nil
	}
	return lit
}

// A keyRead is a constant key read from a name: where it is, and whether the
// position is a string's opening quote.
type keyRead struct {
	name   string
	pos    syntax.Position
	quoted bool
}

// readsKey reports whether n reads a constant key from a free name: x.key,
// x["key"], and the internal calls that x.get("key") and x.count become.
func readsKey(n syntax.Node, free func(syntax.Expr) *syntax.Ident) (*syntax.Ident, keyRead, bool) {
	switch n := n.(type) {
	case *syntax.DotExpr:
		if id := free(n.X); id != nil {
			return id, keyRead{n.Name.Name, n.Name.NamePos, false}, true
		}
	case *syntax.IndexExpr:
		if id, lit := free(n.X), strLiteral(n.Y); id != nil && lit != nil {
			return id, keyRead{lit.Value.(string), lit.TokenPos, true}, true
		}
	case *syntax.CallExpr:
		fn, ok := n.Fn.(*syntax.Ident)
		if !ok || len(n.Args) < 2 || fn.Name != "|attr" && fn.Name != "|m.get" {
			break
		}
		if id, lit := free(n.Args[0]), strLiteral(n.Args[1]); id != nil && lit != nil {
			return id, keyRead{lit.Value.(string), lit.TokenPos, fn.Name == "|m.get"}, true
		}
	}
	return nil, keyRead{}, false
}
