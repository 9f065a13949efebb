package flow

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// A cancel_on rule's match compares two events: the one that arrives (event)
// and the one that started the run it may cancel (trigger). Each is an object
// with the fields id, type, source, subject, time (strings, "" when absent) and
// data (decoded as for a filter):
//
//	event.data.order_id == trigger.data.order_id
var matchEnv = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("event", cel.DynType),
		cel.Variable("trigger", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(64),
	)
	if err != nil {
		panic(err) // the declarations above are fixed
	}
	return e
}()

// CompileMatch type-checks and compiles a match over two events (see matchEnv).
func CompileMatch(src string) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Msg: "the expression is empty"}
	}
	if len(src) > MaxExpressionBytes {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("the expression is %d bytes; at most %d", len(src), MaxExpressionBytes)}
	}
	a, prg, err := compileMatch(src)
	if err != nil {
		return nil, err
	}
	return &Program{src: src, kind: Filter, prg: prg, index: matchIndex(a)}, nil
}

func compileMatch(src string) (*cel.Ast, cel.Program, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	a, iss := matchEnv.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, nil, issueError(iss.Errors())
	}
	if out := a.OutputType(); !out.IsAssignableType(cel.BoolType) {
		return nil, nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("a match must be true or false; this is %s", out)}
	}
	prg, err := program(matchEnv, a)
	if err != nil {
		return nil, nil, err
	}
	return a, prg, nil
}

type pairActivation struct{ event, trigger *Event }

func (a pairActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "event":
		return a.event.object(), true
	case "trigger":
		return a.trigger.object(), true
	}
	return nil, false
}

func (pairActivation) Parent() interpreter.Activation { return nil }

func (e *Event) object() map[string]any {
	t := e.Time
	if t == "" && e.Ext != nil {
		t = e.Ext("time")
	}
	return map[string]any{"id": e.ID, "type": e.Type, "source": e.Source, "subject": e.Subject, "time": t, "data": e.Data}
}

// MatchPair evaluates a match compiled by CompileMatch over the event that
// arrives and the trigger of a run. An error is a verdict, as for Match.
func (p *Program) MatchPair(event, trigger *Event) (bool, error) {
	out, _, err := p.prg.Eval(pairActivation{event: event, trigger: trigger})
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
