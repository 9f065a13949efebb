package expr

import (
	"context"
	"encoding/json"
	"reflect"

	"go.starlark.net/starlark"
)

// Env holds the names visible to expressions: inputs, step outputs and the like.
// Values are JSON-like Go values: nil, bool, string, integers, float64, json.Number,
// map[string]any, []any, []string and map[string]string. Other maps, slices and
// structs are accepted through their JSON encoding.
//
// Evaluation never modifies an Env or the values in it, so one Env may be shared by
// concurrent evaluations.
type Env map[string]any

// Limits bound the work of one evaluation. A zero field takes its default.
type Limits struct {
	// MaxSteps bounds the steps of an evaluation: Starlark interpreter steps
	// (roughly, bytecode instructions) plus the work of builtins on big values,
	// counted in comparable units (a list element, 16 bytes of a string scanned,
	// a value converted or printed). Default 1_000_000, about 15ms of work.
	MaxSteps uint64
	// MaxAlloc bounds, in bytes, what one evaluation may allocate through
	// operations that make values grow: + and * on strings and lists, %, str.join,
	// str.replace, str.format and f-strings, list.extend, building lists and dicts
	// from other collections, str(), JSON encoding, template rendering and the
	// size of the result. List elements count 32 bytes each. It stops
	// `'x' * 10**10` or a loop that doubles a list before the memory is taken.
	// Default 16 MiB.
	MaxAlloc int64
}

const (
	defaultMaxSteps = 1_000_000
	defaultMaxAlloc = 16 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = defaultMaxSteps
	}
	if l.MaxAlloc <= 0 {
		l.MaxAlloc = defaultMaxAlloc
	}
	return l
}

// An Option configures how a template, expression, compute block or value is
// compiled and run. Options are fixed at compile time, so compiled objects stay
// immutable.
type Option func(*config)

type config struct {
	limits Limits
	name   string
	print  func(msg string)
}

// WithLimits sets the limits of every evaluation.
func WithLimits(l Limits) Option {
	return func(c *config) { c.limits = l.withDefaults() }
}

// WithName names what is compiled, such as "steps.create_branch.condition"; errors
// start with the name. For CompileValue it is the root of the paths in errors
// ("args" gives "args.headers.Authorization").
func WithName(name string) Option {
	return func(c *config) { c.name = name }
}

// WithPrint receives the output of print() calls in compute blocks and expressions,
// which is discarded otherwise. It may be called concurrently.
func WithPrint(fn func(msg string)) Option {
	return func(c *config) { c.print = fn }
}

func newConfig(opts []Option) *config {
	c := &config{limits: Limits{}.withDefaults()}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Template is a string that may contain {{ expr }} parts, compiled once and safe for
// concurrent use.
type Template struct {
	src     string
	lit     string // the value of a literal template
	literal bool
	u       *unit
}

// ParseTemplate compiles src. A string without {{ is a literal. A template that is
// exactly one {{ expr }}, with optional surrounding whitespace, evaluates to the
// native value of expr; any other template renders to a string.
func ParseTemplate(src string, opts ...Option) (*Template, error) {
	cfg := newConfig(opts)
	return parseTemplate(src, cfg)
}

// Eval evaluates the template in env.
func (t *Template) Eval(ctx context.Context, env Env) (any, error) {
	if t.literal {
		return t.lit, nil
	}
	return t.u.eval(ctx, env)
}

// Refs returns the free names the template refers to, sorted, without builtins
// and filters.
func (t *Template) Refs() []string {
	if t.literal {
		return nil
	}
	return clone(t.u.refs)
}

// IsLiteral reports whether the template has no {{ expressions }}.
func (t *Template) IsLiteral() bool { return t.literal }

// String returns the template's source.
func (t *Template) String() string { return t.src }

// Expr is a condition: one Python expression, compiled once and safe for
// concurrent use.
type Expr struct {
	src string
	u   *unit
}

// ParseExpr compiles a condition such as
//
//	not check_existing_branch or '✅' not in str(check_existing_branch)
//
// A condition written as a single template, "{{ x | length > 0 }}", is accepted too
// and uses the template dialect.
func ParseExpr(src string, opts ...Option) (*Expr, error) {
	cfg := newConfig(opts)
	u, err := parseCondition(src, cfg)
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, u: u}, nil
}

// Eval evaluates the expression in env.
func (e *Expr) Eval(ctx context.Context, env Env) (any, error) { return e.u.eval(ctx, env) }

// EvalBool evaluates the expression in env and reports whether its value is true,
// by Python's rules. It is cheaper than Truthy(Eval(...)) for big values.
func (e *Expr) EvalBool(ctx context.Context, env Env) (bool, error) { return e.u.evalBool(ctx, env) }

// Refs returns the free names the expression refers to, sorted, without builtins.
func (e *Expr) Refs() []string { return clone(e.u.refs) }

// String returns the expression's source.
func (e *Expr) String() string { return e.src }

// Program is a compute block: Python statements whose value is the final value of
// the variable result. It is compiled once and safe for concurrent use.
type Program struct {
	src string
	u   *unit
}

// ParseProgram compiles a compute block.
func ParseProgram(src string, opts ...Option) (*Program, error) {
	cfg := newConfig(opts)
	u, err := parseProgram(src, cfg)
	if err != nil {
		return nil, err
	}
	return &Program{src: src, u: u}, nil
}

// Run runs the block in env and returns the final value of result, or nil if the
// block never assigns it.
func (p *Program) Run(ctx context.Context, env Env) (any, error) { return p.u.eval(ctx, env) }

// Refs returns the names the block reads from env, sorted, without builtins and
// without the names the block assigns.
func (p *Program) Refs() []string { return clone(p.u.refs) }

// String returns the block's source.
func (p *Program) String() string { return p.src }

// Builtins returns the names of the builtins and filters, sorted. A name in env
// hides a builtin of the same name, but Refs never reports builtins, so callers that
// check names statically may want to keep step ids and outputs off this list.
func Builtins() []string { return clone(builtinNames) }

// IsBuiltin reports whether name is a builtin or a filter.
func IsBuiltin(name string) bool {
	_, ok := builtins[name]
	return ok
}

// Truthy reports whether v is true by Python's rules: nil, false, zero, and empty
// strings, lists and maps are false; everything else is true.
func Truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case int:
		return v != 0
	case int64:
		return v != 0
	case float64:
		return v != 0
	case json.Number:
		f, err := v.Float64()
		return err != nil || f != 0
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	case starlark.Value:
		return bool(v.Truth())
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return rv.Len() > 0
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() != 0
	case reflect.Pointer, reflect.Interface:
		return !rv.IsNil()
	}
	return true
}

func clone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

// where returns the prefix for messages about cfg's subject.
func (c *config) where() string {
	if c.name == "" {
		return "expression"
	}
	return c.name
}
