package flow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// A wait_for_event step's match is a CEL expression over the event that may end
// the wait and the run that waits:
//
//	event    the event: event.id, event.type, event.source, event.subject,
//	         event.time (strings) and event.data (JSON decoded)
//	inputs   the run's inputs: inputs.order_id
//	steps    results of the steps before the wait, by id: steps.create_order.id
//
// The run's side is kept in the wait's record when the run parks, so a router
// evaluates the match without the run. Only what the expression reads is kept
// (Keep): the fields it selects of inputs and of the results of the steps it
// names — all of a value it reads other than by field name, and every step's
// result when it reads steps other than by name.

// WaitMatch is a compiled wait_for_event match; safe for concurrent use.
type WaitMatch struct {
	src string
	prg cel.Program
	// steps are the step results the expression reads by name; allSteps is set
	// when it reads steps otherwise (steps[x], size(steps)).
	steps    []string
	allSteps bool
	// inputs and stepFields are the fields read of inputs and of each step's
	// result; inputs is nil when the expression does not read inputs.
	inputs     *fields
	stepFields map[string]*fields
	refs       []Ref
}

// Ref is a field of inputs or steps a match selects by a fixed name
// (inputs.order, steps["create"]), where the name is written.
type Ref struct {
	Root string // "inputs" or "steps"
	Name string // the input, or the step (by id or output name)
	// Line and Column are 1-based, in the source, of the name.
	Line, Column int
}

// fields is what an expression reads of a value: all of it, or some of its
// fields, each read as a fields of its own.
type fields struct {
	all bool
	sub map[string]*fields
}

// add marks the value at path as read.
func (f *fields) add(path []string) {
	for _, name := range path {
		if f.all {
			return
		}
		if f.sub == nil {
			f.sub = map[string]*fields{}
		}
		next := f.sub[name]
		if next == nil {
			next = &fields{}
			f.sub[name] = next
		}
		f = next
	}
	f.all, f.sub = true, nil
}

// keep is what v holds of the fields f reads: v as it is when f reads all of
// it or v is no object.
func (f *fields) keep(v any) any {
	obj, ok := v.(map[string]any)
	if f.all || !ok {
		return v
	}
	out := make(map[string]any, len(f.sub))
	for name, sub := range f.sub {
		if x, ok := obj[name]; ok {
			out[name] = sub.keep(x)
		}
	}
	return out
}

var waitEnv = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("inputs", cel.DynType),
		cel.Variable("steps", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(64),
	)
	if err != nil {
		panic(err) // the declarations above are fixed
	}
	return e
}()

// CompileWaitMatch type-checks and compiles a wait_for_event match, which must be
// true or false. An error is an *Error, at its position in src.
func CompileWaitMatch(src string) (*WaitMatch, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Msg: "the expression is empty"}
	}
	if len(src) > MaxExpressionBytes {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("the expression is %d bytes; at most %d", len(src), MaxExpressionBytes)}
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	a, iss := waitEnv.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, issueError(iss.Errors())
	}
	if !a.OutputType().IsAssignableType(cel.BoolType) {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("a match must be true or false; this is %s", a.OutputType())}
	}
	prg, err := waitEnv.Program(a, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &Error{Line: 1, Column: 1, Msg: err.Error()}
	}
	m := &WaitMatch{src: src, prg: prg}
	m.reads(a)
	return m, nil
}

// String is the match's source.
func (m *WaitMatch) String() string { return m.src }

// Refs are the inputs and steps the match selects by name, in the order they are
// written, so that a skill's loader can check each is declared.
func (m *WaitMatch) Refs() []Ref { return m.refs }

// Steps are the step results the match reads; all is true when it may read any.
func (m *WaitMatch) Steps() (names []string, all bool) { return m.steps, m.allSteps }

// Keep is what the match reads of a run's inputs and of its steps' results
// (steps: those of the earlier steps it names): a wait keeps only that.
func (m *WaitMatch) Keep(inputs any, steps map[string]any) (any, map[string]any) {
	var in any
	if m.inputs != nil && inputs != nil {
		in = m.inputs.keep(inputs)
	}
	var out map[string]any
	for name, v := range steps {
		f := m.stepFields[name]
		if f == nil && !m.allSteps {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(steps))
		}
		if m.allSteps {
			out[name] = v
		} else {
			out[name] = f.keep(v)
		}
	}
	return in, out
}

// reads records what the expression reads of inputs and steps: the path of
// field names (x.f, or x["f"] with a literal) it selects from each use, as far
// as the path is fixed.
func (m *WaitMatch) reads(a *cel.Ast) {
	for _, id := range ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), ast.KindMatcher(ast.IdentKind)) {
		root := id.AsIdent()
		if root != "inputs" && root != "steps" {
			continue
		}
		path := fieldPath(id)
		if len(path) > 0 {
			m.refs = append(m.refs, nameRef(a.NativeRep().SourceInfo(), id, root, path[0]))
		}
		if root == "inputs" {
			if m.inputs == nil {
				m.inputs = &fields{}
			}
			m.inputs.add(path)
			continue
		}
		if len(path) == 0 {
			m.allSteps = true
			continue
		}
		if m.stepFields == nil {
			m.stepFields = map[string]*fields{}
		}
		f := m.stepFields[path[0]]
		if f == nil {
			f = &fields{}
			m.stepFields[path[0]] = f
			m.steps = append(m.steps, path[0])
		}
		f.add(path[1:])
	}
	slices.SortStableFunc(m.refs, func(x, y Ref) int {
		return cmp.Or(cmp.Compare(x.Line, y.Line), cmp.Compare(x.Column, y.Column))
	})
	if m.allSteps {
		m.steps, m.stepFields = nil, nil
	}
}

// nameRef is the first field selected from the identifier id, at the name: for
// x.f, after the dot; for x["f"], the string literal. (A selection's own position
// is its macro's inside has(), so x.f is placed from x.)
func nameRef(info *ast.SourceInfo, id ast.NavigableExpr, root, name string) Ref {
	r := Ref{Root: root, Name: name}
	p, _ := id.Parent()
	loc, shift := info.GetStartLocation(id.ID()), len(root)+1
	if p.Kind() == ast.CallKind {
		loc, shift = info.GetStartLocation(p.AsCall().Args()[1].ID()), 0
	}
	if loc.Line() >= 1 {
		r.Line, r.Column = loc.Line(), loc.Column()+1+shift
	}
	return r
}

// fieldPath is the field names selected from e, outermost last, up to the
// first use that is not a selection by a fixed name.
func fieldPath(e ast.NavigableExpr) []string {
	var path []string
	for {
		p, ok := e.Parent()
		if !ok {
			return path
		}
		switch p.Kind() {
		case ast.SelectKind:
			path = append(path, p.AsSelect().FieldName())
		case ast.CallKind:
			c := p.AsCall()
			if c.FunctionName() != "_[_]" || len(c.Args()) != 2 || c.Args()[0].ID() != e.ID() || c.Args()[1].Kind() != ast.LiteralKind {
				return path
			}
			name, ok := c.Args()[1].AsLiteral().Value().(string)
			if !ok {
				return path
			}
			path = append(path, name)
		default:
			return path
		}
		e = p
	}
}

// WaitEvent is the event a match reads as event.
type WaitEvent struct {
	ID, Type, Source, Subject, Time string
	// Data is the decoded data, as in Event.
	Data any
}

type waitActivation struct {
	ev     *WaitEvent
	inputs any
	steps  map[string]any
}

func (a *waitActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "event":
		e := a.ev
		return map[string]any{"id": e.ID, "type": e.Type, "source": e.Source, "subject": e.Subject, "time": e.Time, "data": e.Data}, true
	case "inputs":
		if a.inputs == nil {
			return map[string]any{}, true
		}
		return a.inputs, true
	case "steps":
		if a.steps == nil {
			return map[string]any{}, true
		}
		return a.steps, true
	}
	return nil, false
}

func (a *waitActivation) Parent() interpreter.Activation { return nil }

// Match evaluates the match for an event and a waiting run's inputs and step
// results. An error (a field missing, the cost limit) is no match; the caller
// says why.
func (m *WaitMatch) Match(ev *WaitEvent, inputs any, steps map[string]any) (bool, error) {
	out, _, err := m.prg.Eval(&waitActivation{ev: ev, inputs: inputs, steps: steps})
	if err != nil {
		if strings.Contains(err.Error(), "cost limit exceeded") {
			return false, fmt.Errorf("%w: %v", ErrCost, err)
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the match gave %s, not true or false", out.Type())
	}
	return bool(b), nil
}
