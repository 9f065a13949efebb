package events_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/events"
)

// eventTypeConsts returns the io.skillbus.* event types declared as Type* constants in
// the non-test sources of this package, by name, with their values worked out from
// Prefix + "kind".
func eventTypeConsts(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Type") || i >= len(vs.Values) {
						continue
					}
					v, ok := constString(vs.Values[i])
					if !ok {
						t.Errorf("%s: cannot work out the value of %s", fset.Position(n.Pos()), n.Name)
						continue
					}
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("found no Type* constants")
	}
	return out
}

// constString evaluates a string literal, Prefix, or a sum of those.
func constString(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		if e.Name == "Prefix" {
			return events.Prefix, true
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := constString(e.X)
			b, ok2 := constString(e.Y)
			return a + b, ok1 && ok2
		}
	case *ast.ParenExpr:
		return constString(e.X)
	}
	return "", false
}

var docRow = regexp.MustCompile("^\\| `(io\\.skillbus\\.[A-Za-z0-9_.-]+)` \\|")

// documentedTypes returns the types of docs/events.md's type table.
func documentedTypes(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := docRow.FindStringSubmatch(line); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// Every declared event type is in the catalog, has a schema and a row in
// docs/events.md; every documented type, catalog entry and schema file is declared.
func TestCatalogIsConsistent(t *testing.T) {
	consts := eventTypeConsts(t)
	declared := map[string]bool{}
	for name, typ := range consts {
		declared[typ] = true
		if !strings.HasPrefix(typ, events.Prefix) {
			t.Errorf("%s = %q does not start with %q", name, typ, events.Prefix)
		}
		if _, ok := events.Catalog[typ]; !ok {
			t.Errorf("%s (%s) has no entry in events.Catalog", name, typ)
		}
		if events.Schema(typ) == nil {
			t.Errorf("%s (%s) has no schema: add it to events.Catalog and run go test ./events -update", name, typ)
		}
	}
	docs := documentedTypes(t)
	for name, typ := range consts {
		if !docs[typ] {
			t.Errorf("%s (%s) has no row in docs/events.md's type table", name, typ)
		}
	}
	for typ := range docs {
		if !declared[typ] {
			t.Errorf("docs/events.md documents %s, which no Type* constant declares", typ)
		}
	}
	for typ := range events.Catalog {
		if !declared[typ] {
			t.Errorf("events.Catalog has %s, which no Type* constant declares", typ)
		}
	}
	schemaFiles, err := filepath.Glob(filepath.Join("schema", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range schemaFiles {
		typ := strings.TrimSuffix(filepath.Base(p), ".json")
		if !declared[typ] {
			t.Errorf("%s is the schema of %s, which no Type* constant declares", p, typ)
		}
	}
}

var typeLiteral = regexp.MustCompile(`^io\.skillbus\.[A-Za-z0-9_.-]*$`)

// literalAllowed lists the places under pkg/ and internal/ that may spell an
// io.skillbus.* type as a literal, and why.
var literalAllowed = map[string]string{
	// The benchmark's triggers have a made-up type of their own; no skill or
	// process of skillbus reacts to it.
	"internal/bench/skillbus.go": "synthetic benchmark trigger type",
}

// The code under pkg/ and internal/ names event and trigger types by the constants of
// this package, not by string literals that can drift from them. A literal is allowed
// only as the value of a package-level constant (which then is the declaration).
func TestNoRawTypeLiterals(t *testing.T) {
	var found []string
	for _, dir := range []string{"pkg", "internal"} {
		root := filepath.Join("..", dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel("..", path)
			rel = filepath.ToSlash(rel)
			if _, ok := literalAllowed[rel]; ok {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			declValues := map[*ast.BasicLit]bool{}
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
					for _, s := range g.Specs {
						for _, v := range s.(*ast.ValueSpec).Values {
							if lit, ok := v.(*ast.BasicLit); ok {
								declValues[lit] = true
							}
						}
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || declValues[lit] {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil && typeLiteral.MatchString(s) {
					pos := fset.Position(lit.Pos())
					found = append(found, rel+":"+strconv.Itoa(pos.Line)+": "+lit.Value)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: use the constant of package events (or declare one) instead of the literal", f)
	}
}
