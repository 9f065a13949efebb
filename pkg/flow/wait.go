package flow

import (
	"fmt"
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
// evaluates the match without the run; only the results of the steps the
// expression names are kept (all of them when it reads steps other than by name).

// WaitMatch is a compiled wait_for_event match; safe for concurrent use.
type WaitMatch struct {
	src string
	prg cel.Program
	// steps are the step results the expression reads by name; allSteps is set
	// when it reads steps otherwise (steps[x], size(steps)).
	steps    []string
	allSteps bool
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
	m.steps, m.allSteps = stepsRead(a)
	return m, nil
}

// String is the match's source.
func (m *WaitMatch) String() string { return m.src }

// Steps are the step results the match reads; all is true when it may read any.
func (m *WaitMatch) Steps() (names []string, all bool) { return m.steps, m.allSteps }

// stepsRead lists the names the expression reads from steps by name.
func stepsRead(a *cel.Ast) (names []string, all bool) {
	for _, id := range ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), ast.KindMatcher(ast.IdentKind)) {
		if id.AsIdent() != "steps" {
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
			return nil, true
		}
		names = append(names, name)
	}
	return names, false
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
