package flow

import (
	"fmt"
	"math"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// Bounds of a queue priority, in seconds.
const (
	MinPriority = -600
	MaxPriority = 600
)

// checkPriority refuses a priority expression that is not a number, or whose
// result is a number literal out of bounds: the whole expression (300) or a
// branch of a conditional (data.vip ? 900 : 0). Such a literal would only ever
// be clamped, which is never what its author meant.
func checkPriority(a *cel.Ast, out *cel.Type) error {
	if !(out.IsAssignableType(cel.IntType) || out.IsAssignableType(cel.UintType) || out.IsAssignableType(cel.DoubleType)) {
		return &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("a queue priority must be a number of seconds; this is %s", out)}
	}
	native := a.NativeRep()
	var walk func(e ast.Expr) error
	walk = func(e ast.Expr) error {
		switch e.Kind() {
		case ast.LiteralKind:
			v, ok := literalNumber(e.AsLiteral())
			if ok && (v < MinPriority || v > MaxPriority) {
				loc := native.SourceInfo().GetStartLocation(e.ID())
				return &Error{Line: max(loc.Line(), 1), Column: loc.Column() + 1,
					Msg: fmt.Sprintf("a queue priority is %d to %d seconds; %v is out of range", MinPriority, MaxPriority, v)}
			}
		case ast.CallKind:
			if c := e.AsCall(); c.FunctionName() == operators.Conditional && len(c.Args()) == 3 {
				if err := walk(c.Args()[1]); err != nil {
					return err
				}
				return walk(c.Args()[2])
			}
		}
		return nil
	}
	return walk(native.Expr())
}

func literalNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case types.Int:
		return float64(n), true
	case types.Uint:
		return float64(n), true
	case types.Double:
		return float64(n), true
	}
	return 0, false
}

// PriorityOf evaluates a priority into whole seconds, clamped to MinPriority and
// MaxPriority (a value computed from the data may fall outside; a fraction is
// rounded to the nearest second).
func (p *Program) PriorityOf(ev *Event) (int, error) {
	out, err := p.eval(ev)
	if err != nil {
		return 0, err
	}
	var f float64
	switch v := out.(type) {
	case types.Int:
		return int(min(max(int64(v), MinPriority), MaxPriority)), nil
	case types.Uint:
		return int(min(uint64(v), MaxPriority)), nil
	case types.Double:
		f = float64(v)
	default:
		return 0, fmt.Errorf("the queue priority gave %s, not a number", out.Type())
	}
	if math.IsNaN(f) {
		return 0, fmt.Errorf("the queue priority gave NaN, not a number")
	}
	return int(math.Round(min(max(f, MinPriority), MaxPriority))), nil
}
