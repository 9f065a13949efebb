package flow

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Limits of an expression.
const (
	// MaxExpressionBytes bounds an expression's source.
	MaxExpressionBytes = 4096
	// CostLimit bounds one evaluation in CEL's cost units (about one per operation,
	// and per element or byte a function walks over): far above any filter over an
	// event's fields, far below what could hold up the router (a few milliseconds).
	CostLimit = 100_000
)

// Event is what an expression reads of a trigger.
type Event struct {
	ID, Type, Source, Subject, Time string
	// Data is the decoded data: what encoding/json decodes into an any (map[string]any,
	// []any, float64, string, bool or nil), or a string when the data is not JSON.
	Data any
	// Ext returns an extension attribute by its lowercase name, "" when the event
	// has none; nil means no extensions. An empty Time is read from Ext("time").
	Ext func(name string) string
}

// Kind is what an expression must produce.
type Kind int

const (
	// Filter is a bool: does the skill take the event.
	Filter Kind = iota
	// Key is a string, a number or a bool, turned into a string: which counter of
	// a rate limit the event counts against.
	Key
	// Priority is a number of seconds, MinPriority to MaxPriority: how much
	// earlier than it was a run is queued (see PriorityOf).
	Priority
)

// Error is an expression that does not compile, at a position in its source.
type Error struct {
	// Line (from 1) and Column (from 1) of the first problem in the expression.
	Line, Column int
	Msg          string
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg) }

// ErrCost is an evaluation stopped at CostLimit.
var ErrCost = errors.New("the expression is too costly (cel cost limit)")

// Program is a compiled expression; safe for concurrent use.
type Program struct {
	src  string
	kind Kind
	prg  cel.Program
	// exts are the extension attributes the expression reads, by name.
	exts []string
	// index is a match's equality, when it has one (see MatchIndex).
	index *MatchIndex
	// reads are the event's attributes the expression reads, where it reads them.
	reads []Read
}

// Read is one place an expression reads an attribute of the event: Name is
// id, type, source, subject, time, data or extensions, Field the extension's
// name for extensions ("tenant") and the field of data it selects by name, if
// it does ("shop" in data.shop.id), and Line and Column (from 1) where the name
// is written in the source.
type Read struct {
	Name, Field  string
	Line, Column int
}

// String writes the read as the expression does: "subject", "extensions.tenant".
func (r Read) String() string {
	if r.Field != "" {
		return r.Name + "." + r.Field
	}
	return r.Name
}

// Reads are the places the expression reads the event's attributes, in the order
// they are written.
func (p *Program) Reads() []Read { return p.reads }

// String is the expression's source.
func (p *Program) String() string { return p.src }

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("id", cel.StringType),
		cel.Variable("type", cel.StringType),
		cel.Variable("source", cel.StringType),
		cel.Variable("subject", cel.StringType),
		cel.Variable("time", cel.StringType),
		cel.Variable("data", cel.DynType),
		cel.Variable("extensions", cel.MapType(cel.StringType, cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(64),
	)
	if err != nil {
		panic(err) // the declarations above are fixed
	}
	return e
}()

// compileMu makes compiles take turns: cel-go v0.33.2's checker races on the
// shared environment's symbol catalog when two compiles report an undeclared
// name at once (go test -race). Compiling is rare — at validation and once per
// skill version — so nothing waits on it; evaluating is not serialised.
var compileMu sync.Mutex

// Compile type-checks and compiles an expression of a kind.
func Compile(src string, kind Kind) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Msg: "the expression is empty"}
	}
	if len(src) > MaxExpressionBytes {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("the expression is %d bytes; at most %d", len(src), MaxExpressionBytes)}
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	a, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, issueError(iss.Errors())
	}
	out := a.OutputType()
	switch {
	case kind == Filter && !out.IsAssignableType(cel.BoolType):
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("a filter must be true or false; this is %s", out)}
	case kind == Key && !(out.IsAssignableType(cel.StringType) || out.IsAssignableType(cel.IntType) ||
		out.IsAssignableType(cel.UintType) || out.IsAssignableType(cel.DoubleType) || out.IsAssignableType(cel.BoolType)):
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("a key must be a string, a number or a bool; this is %s", out)}
	case kind == Priority:
		if err := checkPriority(a, out); err != nil {
			return nil, err
		}
	}
	exts, reads, err := extensionsRead(a)
	if err != nil {
		return nil, err
	}
	prg, err := program(env, a)
	if err != nil {
		return nil, err
	}
	return &Program{src: src, kind: kind, prg: prg, exts: exts, reads: reads}, nil
}

// program builds an expression's program. One whose cost CEL bounds before it
// runs, whatever the event — no comprehension, no function over the data's
// length: most filters — within CostLimit, runs without tracking its cost, which
// would double or triple its time; any other is stopped at CostLimit as it runs.
func program(e *cel.Env, a *cel.Ast) (cel.Program, error) {
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if est, err := e.EstimateCost(a, noHints{}); err != nil || est.Max > CostLimit {
		opts = append(opts, cel.CostLimit(CostLimit))
	}
	prg, err := e.Program(a, opts...)
	if err != nil {
		return nil, &Error{Line: 1, Column: 1, Msg: err.Error()}
	}
	return prg, nil
}

// noHints estimates a cost knowing nothing of the data: what the data's sizes
// can change is unbounded.
type noHints struct{}

func (noHints) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (noHints) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

func issueError(errs []*cel.Error) error {
	if len(errs) == 0 {
		return &Error{Line: 1, Column: 1, Msg: "the expression does not compile"}
	}
	e := errs[0]
	line, col := e.Location.Line(), e.Location.Column()+1
	if line < 1 {
		line, col = 1, 1
	}
	msg := e.Message
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return &Error{Line: line, Column: col, Msg: msg}
}

// extensionsRead lists the extension attributes an expression reads, and every
// place it reads an attribute of the event. Extensions are read by name
// (extensions.tenant, extensions["tenant"]) so that an evaluation looks up only
// those; any other use of the map is refused.
func extensionsRead(a *cel.Ast) ([]string, []Read, error) {
	native := a.NativeRep()
	var names []string
	var reads []Read
	for _, id := range ast.MatchDescendants(ast.NavigateAST(native), ast.KindMatcher(ast.IdentKind)) {
		loc := native.SourceInfo().GetStartLocation(id.ID())
		line, col := max(loc.Line(), 1), loc.Column()+1
		if n := id.AsIdent(); n != "extensions" {
			if attributes[n] {
				r := Read{Name: n, Line: line, Column: col}
				if n == "data" {
					r.Field, _ = fieldOf(id)
				}
				reads = append(reads, r)
			}
			continue
		}
		name, ok := "", false
		if p, has := id.Parent(); has {
			switch p.Kind() {
			case ast.SelectKind:
				name, ok = p.AsSelect().FieldName(), true
			case ast.CallKind:
				if c := p.AsCall(); c.FunctionName() == "_[_]" && len(c.Args()) == 2 && c.Args()[0].ID() == id.ID() {
					if k := c.Args()[1]; k.Kind() == ast.LiteralKind {
						name, ok = k.AsLiteral().Value().(string)
					}
				}
			}
		}
		if !ok {
			return nil, nil, &Error{Line: line, Column: col,
				Msg: `extensions are read by name: extensions.tenant or extensions["tenant"]`}
		}
		if !extName(name) {
			// Events carry extensions by lowercase name only: such a filter
			// would fail on every trigger.
			msg := fmt.Sprintf("extension %q: a CloudEvents extension name is lowercase letters and digits", name)
			if l := strings.ToLower(name); extName(l) {
				msg += ": extensions." + l
			}
			return nil, nil, &Error{Line: line, Column: col, Msg: msg}
		}
		names = append(names, name)
		reads = append(reads, Read{Name: "extensions", Field: name, Line: line, Column: col})
	}
	slices.SortFunc(reads, func(a, b Read) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column)) })
	return names, reads, nil
}

// fieldOf is the field of id an expression selects by name (data.shop,
// data["shop"]); has(data.shop) tests for it and reads nothing.
func fieldOf(id ast.NavigableExpr) (string, bool) {
	p, has := id.Parent()
	if !has {
		return "", false
	}
	switch p.Kind() {
	case ast.SelectKind:
		if sel := p.AsSelect(); !sel.IsTestOnly() {
			return sel.FieldName(), true
		}
	case ast.CallKind:
		if c := p.AsCall(); c.FunctionName() == "_[_]" && len(c.Args()) == 2 && c.Args()[0].ID() == id.ID() {
			if k := c.Args()[1]; k.Kind() == ast.LiteralKind {
				f, ok := k.AsLiteral().Value().(string)
				return f, ok
			}
		}
	}
	return "", false
}

// attributes are the variables an expression reads of the event, but for
// extensions, which are read by name.
var attributes = map[string]bool{"id": true, "type": true, "source": true, "subject": true, "time": true, "data": true}

// extName is the CloudEvents rule for an attribute name: lowercase ASCII letters
// and digits, not empty.
func extName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// activation resolves the variables of one evaluation without building a map of
// them: the event is read where it lies.
type activation struct {
	ev   *Event
	exts []string
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "id":
		return a.ev.ID, true
	case "type":
		return a.ev.Type, true
	case "source":
		return a.ev.Source, true
	case "subject":
		return a.ev.Subject, true
	case "time":
		if a.ev.Time == "" && a.ev.Ext != nil {
			return a.ev.Ext("time"), true // read only by the filters that use it
		}
		return a.ev.Time, true
	case "data":
		return a.ev.Data, true
	case "extensions":
		// Every extension the expression reads is in the map, "" when the event
		// has none: a filter on an extension is false, not an error, for events
		// without it.
		m := make(map[string]string, len(a.exts))
		for _, n := range a.exts {
			if a.ev.Ext != nil {
				m[n] = a.ev.Ext(n)
			} else {
				m[n] = ""
			}
		}
		return m, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

func (p *Program) eval(ev *Event) (ref.Val, error) {
	out, _, err := p.prg.Eval(&activation{ev: ev, exts: p.exts})
	if err != nil {
		if strings.Contains(err.Error(), "cost limit exceeded") {
			return nil, fmt.Errorf("%w: %v", ErrCost, err)
		}
		if strings.HasPrefix(err.Error(), "no such overload") {
			// CEL's words for comparing a string with a number.
			return nil, fmt.Errorf("%w: values of types the operator does not take together (a string where a number was meant? int(), double() and string() convert)", err)
		}
		return nil, err
	}
	return out, nil
}

// Match evaluates a filter. An error (a field the event lacks, a wrong type, the
// cost limit) is the filter's verdict too: the caller says so, it does not crash.
func (p *Program) Match(ev *Event) (bool, error) {
	out, err := p.eval(ev)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the filter gave %s, not true or false", out.Type())
	}
	return bool(b), nil
}

// KeyOf evaluates a key into a string.
func (p *Program) KeyOf(ev *Event) (string, error) {
	out, err := p.eval(ev)
	if err != nil {
		return "", err
	}
	switch v := out.(type) {
	case types.String:
		return string(v), nil
	case types.Int:
		return strconv.FormatInt(int64(v), 10), nil
	case types.Uint:
		return strconv.FormatUint(uint64(v), 10), nil
	case types.Double:
		return strconv.FormatFloat(float64(v), 'g', -1, 64), nil
	case types.Bool:
		return strconv.FormatBool(bool(v)), nil
	}
	return "", fmt.Errorf("the key gave %s, not a string, a number or a bool", out.Type())
}
