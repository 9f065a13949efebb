package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Wire names spelt as string literals: a subject fragment of one of skillbus's
// subject families (".events.", "skillbus.exec.>", ...), a CloudEvents binding
// header ("ce-..."), a skillbus header ("Skillbus-..."), a trace-context header or
// a skillbus extension attribute. events/ defines each of them once.
var (
	wireSubject = regexp.MustCompile(`^(skillbus)?\.(trigger|exec|events|live|repair|dead|registry|router|worker|tool)\.`)
	wireNames   = map[string]bool{
		"traceparent": true, "tracestate": true, "skilldepth": true, "skillparent": true,
		"skillseq": true, "correlationid": true, "causationid": true, "executionid": true,
	}
)

// wireAllowed are the literals outside events/ that look like wire names but are
// not, or that must be spelt out, each with why: "path: literal".
var wireAllowed = map[string]string{
	// An OpenTelemetry attribute key, not a subject.
	`pkg/telemetry/span.go: skillbus.tool.name`: "span attribute key",
	// A replayed job drops every skillbus header of the dead letter, known today or
	// added later: the family's prefix, not one header.
	`pkg/dlq/replay.go: Skillbus-`: "prefix of every skillbus header",
}

// wireLiteral reports why the literal s is a wire name, or "".
func wireLiteral(s string) string {
	switch {
	case wireSubject.MatchString(s):
		return "a subject fragment: build it with events.Subjects"
	case len(s) > 3 && strings.EqualFold(s[:3], "ce-"):
		return "a CloudEvents header: use events.HeaderCE*"
	case strings.HasPrefix(s, "Skillbus-"):
		return "a skillbus header: use events.Header*"
	case wireNames[s]:
		return "an extension or trace-context name: use events.Ext* or events.Header*"
	}
	return ""
}

// wireLiterals returns the wire names spelt as literals in f (struct tags aside:
// a tag cannot name a constant), each as "position: literal: why".
func wireLiterals(fset *token.FileSet, rel string, f *ast.File) []string {
	tags := map[*ast.BasicLit]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
			tags[fl.Tag] = true
		}
		return true
	})
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING || tags[lit] {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		why := wireLiteral(s)
		if why == "" {
			return true
		}
		if _, ok := wireAllowed[rel+": "+s]; ok {
			return true
		}
		out = append(out, fset.Position(lit.Pos()).String()+": "+strconv.Quote(s)+": "+why)
		return true
	})
	return out
}

// TestWireNamesLiveInEvents fails when non-test code outside events/ spells a wire
// name (a subject fragment, a ce-* or Skillbus-* header, a trace-context header or
// an extension name) as a string literal instead of using events' constants and
// subject builders, so that every process, and every program of a user built on
// pkg/, agrees on the wire by construction.
func TestWireNamesLiveInEvents(t *testing.T) {
	seen := map[string]bool{}
	n := walkNonTestGo(t, "events", func(fset *token.FileSet, rel string, f *ast.File) {
		for _, e := range wireLiterals(fset, rel, f) {
			t.Error(e)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			if lit, ok := node.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					seen[rel+": "+s] = true
				}
			}
			return true
		})
	})
	for k := range wireAllowed {
		if !seen[k] {
			t.Errorf("wireAllowed lists %q, which no longer occurs: remove it", k)
		}
	}
	t.Logf("%d non-test files outside events/ looked at", n)
}

// TestWireLiterals checks the checker: it must find each kind of wire name and
// pass what only looks like one.
func TestWireLiterals(t *testing.T) {
	src := `package p
type T struct{ TP string ` + "`json:\"traceparent\"`" + ` }
var (
	a = prefix + ".events." + id
	b = "skillbus.exec.>"
	c = "Ce-Type"
	d = "Skillbus-Route"
	e = "traceparent"
	f = "skilldepth"
	g = prefix + ".trigger.>"
	ok1 = "gen_ai.tool.name"
	ok2 = "events"
	ok3 = "base.exec.>"
	ok4 = "see skillbus.tool.<name>"
)`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := wireLiterals(fset, "p.go", f)
	want := []string{`".events."`, `"skillbus.exec.>"`, `"Ce-Type"`, `"Skillbus-Route"`, `"traceparent"`, `"skilldepth"`, `".trigger.>"`}
	if len(got) != len(want) {
		t.Fatalf("found %d wire literals, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], ": "+w+": ") {
			t.Errorf("finding %d = %s, want the literal %s", i, got[i], w)
		}
	}
}
