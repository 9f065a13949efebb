package expr

import (
	"context"
	"errors"
	"fmt"
	"github.com/skillbus/skillbus/pkg/failure"
	"regexp"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// stateKey is the thread-local key of an evaluation's *state.
const stateKey = "skillbus/expr.state"

// state is what one evaluation knows beyond its Starlark thread.
type state struct {
	u         *unit
	allocLeft int64
	maxSteps  uint64
	stepsHit  bool
	missing   []string // free names that env lacked, and so were None
}

func stateOf(th *starlark.Thread) *state {
	st, _ := th.Local(stateKey).(*state)
	return st
}

// charge takes n bytes from the evaluation's allocation budget, before they are
// allocated.
func charge(th *starlark.Thread, n int64) error { return stateOf(th).charge(n) }

func (st *state) charge(n int64) error {
	if st == nil || n <= 0 {
		return nil
	}
	if n > st.allocLeft {
		st.allocLeft = -1
		return st.allocErr()
	}
	st.allocLeft -= n
	return nil
}

// allocLeft returns the evaluation's remaining allocation budget.
func allocLeft(th *starlark.Thread) int64 {
	if st := stateOf(th); st != nil {
		return max(st.allocLeft, 0)
	}
	return defaultMaxAlloc
}

// work charges n steps for work a builtin does on n elements, which the
// interpreter counts as one step.
func work(th *starlark.Thread, n int) error { return stateOf(th).work(th, n) }

func (st *state) work(th *starlark.Thread, n int) error {
	if st == nil || n <= 0 {
		return nil
	}
	th.Steps += uint64(n)
	if th.Steps >= st.maxSteps {
		st.stepsHit = true
		return &limitError{st.stepsMsg()}
	}
	return nil
}

func allocErr(th *starlark.Thread) error {
	if st := stateOf(th); st != nil {
		return st.allocErr()
	}
	return &limitError{"exceeded the allocation limit"}
}

func (st *state) allocErr() error {
	return &limitError{fmt.Sprintf("exceeded the allocation limit of %d MiB (does a value keep growing? "+
		"build long strings with \"\".join(parts))", st.u.cfg.limits.MaxAlloc>>20)}
}

func (st *state) stepsMsg() string {
	return fmt.Sprintf("exceeded the limit of %d evaluation steps (an endless loop, or too much work for one step?)", st.maxSteps)
}

func onMaxSteps(th *starlark.Thread) {
	if st := stateOf(th); st != nil {
		st.stepsHit = true
	}
	th.Cancel("step limit")
}

func printHook(th *starlark.Thread, msg string) {
	if st := stateOf(th); st != nil && st.u.cfg.print != nil {
		st.u.cfg.print(msg)
	}
}

// An evaluation is the reusable machinery of one evaluation: evaluations are
// pooled, since allocating a thread and maps for each is a good part of the cost
// of evaluating a small expression.
type evaluation struct {
	th    starlark.Thread
	st    state
	pre   starlark.StringDict
	reuse bool
}

var evaluations = sync.Pool{New: func() any {
	e := &evaluation{pre: starlark.StringDict{}}
	e.th.Name = "skillbus/expr"
	e.th.Print = printHook
	e.th.OnMaxSteps = onMaxSteps
	e.th.SetLocal(stateKey, &e.st)
	return e
}}

// release returns e to the pool, unless a context.AfterFunc may still cancel
// its thread.
func (e *evaluation) release() {
	if e.reuse {
		clear(e.pre)
		e.st = state{missing: e.st.missing[:0]}
		evaluations.Put(e)
	}
}

// exec runs u in env and returns the Starlark value of its result. The caller
// must release the evaluation when it is done with the value.
func (u *unit) exec(ctx context.Context, env Env) (starlark.Value, *evaluation, error) {
	e := evaluations.Get().(*evaluation)
	e.st = state{u: u, allocLeft: u.cfg.limits.MaxAlloc, maxSteps: u.cfg.limits.MaxSteps, missing: e.st.missing}
	e.reuse = true
	th := &e.th
	th.Steps = 0
	th.Uncancel()
	th.SetMaxExecutionSteps(e.st.maxSteps)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { th.Cancel("context done") })
		defer func() {
			if !stop() {
				e.reuse = false
			}
		}()
	}
	for _, f := range u.free {
		if f.internal {
			e.pre[f.name] = f.builtin
			continue
		}
		if v, ok := env[f.name]; ok {
			e.pre[f.name] = toStarlark(v, origin{name: f.name})
			continue
		}
		if f.builtin != nil {
			e.pre[f.name] = f.builtin
			continue
		}
		e.pre[f.name] = starlark.None
		e.st.missing = append(e.st.missing, f.name)
	}
	globals, err := u.prog.Init(th, e.pre)
	if err != nil {
		return nil, e, u.evalErr(ctx, env, &e.st, err)
	}
	v := globals[u.result]
	if v == nil {
		v = starlark.None
	}
	return v, e, nil
}

func (u *unit) eval(ctx context.Context, env Env) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, u.ctxErr(err)
	}
	if u.fast != nil {
		if v, ok := u.evalFast(env); ok {
			return v, nil
		}
	}
	v, e, err := u.exec(ctx, env)
	defer e.release()
	if err != nil {
		return nil, err
	}
	out, err := toGo(&e.th, v, e.st.allocLeft)
	if err != nil {
		return nil, u.resultErr(err)
	}
	return out, nil
}

// resultErr describes an error converting the value of u.
func (u *unit) resultErr(err error) error {
	e := &Error{Name: u.cfg.name, Msg: err.Error()}
	if len(u.parts) == 1 && u.result == exprResult {
		p := u.parts[0]
		off := p.base
		for off < len(p.text.text) && strings.IndexByte(" \t\r\n", p.text.text[off]) >= 0 {
			off++
		}
		e = p.errorAt(off, err.Error())
	}
	var le *limitError
	if errors.As(err, &le) {
		return fatal(e)
	}
	return repairable(e)
}

func (u *unit) evalBool(ctx context.Context, env Env) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, u.ctxErr(err)
	}
	if u.fast != nil {
		if v, ok := u.evalFast(env); ok {
			return Truthy(v), nil
		}
	}
	v, e, err := u.exec(ctx, env)
	defer e.release()
	if err != nil {
		return false, err
	}
	return bool(v.Truth()), nil
}

// evalFast evaluates a dotted name by looking it up in env, when that gives the
// same value as Starlark would, and reports whether it could.
func (u *unit) evalFast(env Env) (any, bool) {
	v, ok := env[u.fast[0]]
	if !ok {
		if _, isBuiltin := builtins[u.fast[0]]; isBuiltin || len(u.fast) > 1 {
			return nil, false
		}
		return nil, true
	}
	for _, key := range u.fast[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return normalizeGo(v)
}

func (u *unit) ctxErr(err error) error {
	return fmt.Errorf("%s: evaluation stopped: %w", u.cfg.where(), err)
}

var beforeAssignment = regexp.MustCompile(`(?:global|local) variable (\w+) referenced before assignment`)

// errorHints add to a Starlark error what to write instead, for the mistakes
// authors make most.
var errorHints = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`^unknown binary op: (string \+ (int|float)|(int|float) \+ string)$`),
		"convert one side: str(x) to join them as text, int(x) or float(x) to add them as numbers"},
	{regexp.MustCompile(`^key (".*"|\S+) not in dict$`),
		"d.get(key) gives None instead of failing, d.get(key, default) a default; key in d tests for it"},
	{regexp.MustCompile(`^dict has no \.\w+ field or method$`),
		"a dict's keys are read with d[\"key\"] or d.get(\"key\"), not d.key"},
}

// evalErr converts an evaluation error into an *Error at the user's position, with
// its failure class.
func (u *unit) evalErr(ctx context.Context, env Env, st *state, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return u.ctxErr(cerr)
	}
	var pos syntax.Position
	msg := err.Error()
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		msg = ee.Msg
		pos = u.innermost(ee.CallStack)
	}
	var le *limitError
	switch {
	case st.stepsHit:
		return fatal(u.errorAt(pos, st.stepsMsg()))
	case errors.As(err, &le):
		return fatal(u.errorAt(pos, le.msg))
	}
	if len(st.missing) > 0 && strings.Contains(msg, "NoneType") {
		msg += fmt.Sprintf(" (not defined, so None: %s; no input or step output has that name, or its step was skipped)",
			strings.Join(st.missing, ", "))
	}
	for _, h := range errorHints {
		if h.re.MatchString(msg) {
			msg += " (" + h.hint + ")"
			break
		}
	}
	if m := beforeAssignment.FindStringSubmatch(msg); m != nil {
		if _, ok := env[m[1]]; ok {
			msg += fmt.Sprintf(" (this block assigns %s, which makes %s a variable of the block everywhere in it, "+
				"hiding the workflow's %s; give the variable another name)", m[1], m[1], m[1])
		}
	}
	e := u.errorAt(pos, msg)
	var me *missingError
	if errors.As(err, &me) && me.key != "" {
		return (&failure.Fault{Kind: failure.FaultReference, Name: me.key, Have: me.keys, Value: me.path, Field: u.cfg.name, Err: e}).Repairable()
	}
	return repairable(e)
}

// innermost returns the position of the innermost call frame in u's source.
func (u *unit) innermost(stack starlark.CallStack) syntax.Position {
	for i := len(stack) - 1; i >= 0; i-- {
		if partOf(u.parts, stack[i].Pos) != nil {
			return stack[i].Pos
		}
	}
	return syntax.Position{}
}

func (u *unit) errorAt(pos syntax.Position, msg string) *Error {
	if p := partOf(u.parts, pos); p != nil && pos.Line > 0 {
		off := p.srcOffset(pos)
		if off+1 < len(p.text.text) && p.text.text[off] == '.' {
			off++ // point at the attribute name, not the dot
		}
		return p.errorAt(off, msg)
	}
	return &Error{Name: u.cfg.name, Msg: msg}
}
