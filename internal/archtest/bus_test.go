package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestBusIsTheDoorToNATS fails when code outside pkg/bus, tests aside, reaches for
// the bus's raw connection (Bus.NC) or JetStream context (Bus.JS) instead of the
// bus's named operations (Stream, EnsureConsumer, Publish, Request, ...). A
// component that takes a *nats.Conn by design gets it from Bus.Conn, whose
// callers are few and named in its doc comment.
//
// It looks at selectors named NC or JS, whatever their type: no other type of the
// module has a field of either name, so that no such field hides a raw
// connection either.
func TestBusIsTheDoorToNATS(t *testing.T) {
	n := walkNonTestGo(t, "pkg/bus", func(fset *token.FileSet, _ string, f *ast.File) {
		ast.Inspect(f, func(node ast.Node) bool {
			if s, ok := node.(*ast.SelectorExpr); ok && (s.Sel.Name == "NC" || s.Sel.Name == "JS") {
				t.Errorf("%s: .%s: use the bus's named operations (package bus), or Bus.Conn for a component that takes a *nats.Conn by design",
					fset.Position(s.Sel.Pos()), s.Sel.Name)
			}
			return true
		})
	})
	t.Logf("%d non-test files outside pkg/bus looked at", n)
}

// walkNonTestGo parses every non-test Go file of the module outside the directory
// skip (and hidden and testdata directories), hands each to visit with its path
// relative to the module's root, and returns how many it parsed.
func walkNonTestGo(t *testing.T, skip string, visit func(fset *token.FileSet, rel string, f *ast.File)) int {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == skip || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		n++
		visit(fset, rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
