package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// MatchIndex is what a match compares for equality between the two events, when
// it does so at its top: `event.<path> == trigger.<path>` (either way round),
// alone or as one of the conditions joined by &&. A match can only be true for
// two events whose values there are equal, so each event can be filed under a
// token of its value (Token), and an event finds the runs it may match among
// those filed under its own token.
type MatchIndex struct {
	event, trigger cel.Program
	src            string
}

// UnindexedToken is the token of a value that is not a string, number, bool or
// null (a list, a map): every such value shares it.
const UnindexedToken = "_"

// Index is the match's index, or nil when it compares nothing for equality at
// its top (then every event may match every other).
func (p *Program) Index() *MatchIndex { return p.index }

// String is the equality indexed, as written.
func (ix *MatchIndex) String() string { return ix.src }

// EventToken is the token of the arriving event's value; ok is false when the
// value cannot be read (a field the event lacks): the match is then never true.
func (ix *MatchIndex) EventToken(e *Event) (string, bool) { return token(ix.event, e) }

// TriggerToken is EventToken for the trigger of a run.
func (ix *MatchIndex) TriggerToken(e *Event) (string, bool) { return token(ix.trigger, e) }

func token(prg cel.Program, e *Event) (string, bool) {
	out, _, err := prg.Eval(pairActivation{event: e, trigger: e})
	if err != nil {
		return "", false
	}
	canon, ok := canonical(out)
	if !ok {
		return "", false
	}
	if canon == "" {
		return UnindexedToken, true
	}
	sum := sha256.Sum256([]byte(canon))
	return hex.EncodeToString(sum[:8]), true
}

// canonical is a value as a string that two values CEL holds equal share: ""
// for a value of no scalar type, ok false for one equal to nothing (NaN).
func canonical(v ref.Val) (string, bool) {
	switch v := v.(type) {
	case types.String:
		return "s" + string(v), true
	case types.Bool:
		return "b" + strconv.FormatBool(bool(v)), true
	case types.Null:
		return "z", true
	case types.Int:
		return "n" + strconv.FormatInt(int64(v), 10), true
	case types.Uint:
		return "n" + strconv.FormatUint(uint64(v), 10), true
	case types.Double:
		f := float64(v)
		switch {
		case math.IsNaN(f):
			return "", false
		case f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64:
			return "n" + strconv.FormatInt(int64(f), 10), true
		case f == math.Trunc(f) && f >= 0 && f < math.MaxUint64:
			return "n" + strconv.FormatUint(uint64(f), 10), true
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", true
}

// matchIndex finds the equality a compiled match can be indexed by.
func matchIndex(a *cel.Ast) *MatchIndex {
	nat := a.NativeRep()
	var eq func(e celast.Expr) *MatchIndex
	eq = func(e celast.Expr) *MatchIndex {
		if e.Kind() != celast.CallKind {
			return nil
		}
		c := e.AsCall()
		switch {
		case c.FunctionName() == operators.LogicalAnd && len(c.Args()) == 2:
			for _, arg := range c.Args() {
				if ix := eq(arg); ix != nil {
					return ix
				}
			}
		case c.FunctionName() == operators.Equals && len(c.Args()) == 2:
			l, r := c.Args()[0], c.Args()[1]
			lr, rr := rootOf(l), rootOf(r)
			if lr == "trigger" && rr == "event" {
				l, r, lr, rr = r, l, rr, lr
			}
			if lr != "event" || rr != "trigger" {
				return nil
			}
			ev, err1 := sideProgram(l, nat.SourceInfo())
			tr, err2 := sideProgram(r, nat.SourceInfo())
			if err1 != nil || err2 != nil {
				return nil
			}
			src, _ := cel.ExprToString(e, nat.SourceInfo())
			return &MatchIndex{event: ev, trigger: tr, src: src}
		}
		return nil
	}
	return eq(nat.Expr())
}

// rootOf is "event" or "trigger" for a path into one of them (fields, and
// indexes by constants), "" for any other expression.
func rootOf(e celast.Expr) string {
	for {
		switch e.Kind() {
		case celast.IdentKind:
			if n := e.AsIdent(); n == "event" || n == "trigger" {
				return n
			}
			return ""
		case celast.SelectKind:
			if e.AsSelect().IsTestOnly() {
				return ""
			}
			e = e.AsSelect().Operand()
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
				return ""
			}
			e = c.Args()[0]
		default:
			return ""
		}
	}
}

func sideProgram(e celast.Expr, info *celast.SourceInfo) (cel.Program, error) {
	src, err := cel.ExprToString(e, info)
	if err != nil {
		return nil, err
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	a, iss := matchEnv.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	return program(matchEnv, a)
}
