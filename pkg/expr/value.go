package expr

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// Value is a nested structure of maps, lists, strings and scalars, such as a step's
// args or a skill's outputs, whose strings are templates. It is compiled once and
// safe for concurrent use.
type Value struct {
	root node
	refs []string
}

type node interface {
	eval(ctx context.Context, env Env) (any, error)
}

type (
	litNode  struct{ v any }
	tmplNode struct{ t *Template }
	mapNode  struct {
		keys []string
		vals []node
	}
	listNode struct{ elems []node }
)

// CompileValue compiles v: map[string]any, map[string]string, []any, []string,
// strings (templates) and scalars (nil, bools, numbers). Errors name the path of
// the failing string below the name given by WithName, as in
// args.headers.Authorization.
func CompileValue(v any, opts ...Option) (*Value, error) {
	cfg := newConfig(opts)
	refs := map[string]bool{}
	root, err := compileNode(v, cfg.name, cfg, refs)
	if err != nil {
		return nil, err
	}
	return &Value{root: root, refs: slices.Sorted(maps.Keys(refs))}, nil
}

// Eval evaluates v's templates in env and returns a new structure: maps and lists
// are fresh on every call, so callers may modify them.
func (v *Value) Eval(ctx context.Context, env Env) (any, error) { return v.root.eval(ctx, env) }

// Refs returns the free names v's templates refer to, sorted, without builtins and
// filters.
func (v *Value) Refs() []string { return clone(v.refs) }

func compileNode(v any, path string, cfg *config, refs map[string]bool) (node, error) {
	switch v := v.(type) {
	case string:
		c := *cfg
		c.name = path
		t, err := parseTemplate(v, &c)
		if err != nil {
			return nil, err
		}
		if t.literal {
			return litNode{t.lit}, nil
		}
		for _, r := range t.u.refs {
			refs[r] = true
		}
		return tmplNode{t}, nil
	case nil, bool, int64, float64:
		return litNode{v}, nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return litNode{i}, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, repairable(&Error{Name: path, Msg: fmt.Sprintf("invalid number %q", string(v))})
		}
		return litNode{f}, nil
	case map[string]any:
		n := mapNode{keys: slices.Sorted(maps.Keys(v))}
		for _, k := range n.keys {
			child, err := compileNode(v[k], joinPath(path, k), cfg, refs)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, child)
		}
		return n, nil
	case []any:
		n := listNode{elems: make([]node, len(v))}
		for i, x := range v {
			child, err := compileNode(x, path+"["+strconv.Itoa(i)+"]", cfg, refs)
			if err != nil {
				return nil, err
			}
			n.elems[i] = child
		}
		return n, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return litNode{rv.Int()}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := rv.Uint(); u <= 1<<63-1 {
			return litNode{int64(u)}, nil
		}
		return litNode{float64(rv.Uint())}, nil
	case reflect.Float32:
		return litNode{rv.Float()}, nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return compileNode(m, path, cfg, refs)
		}
	case reflect.Slice, reflect.Array:
		s := make([]any, rv.Len())
		for i := range s {
			s[i] = rv.Index(i).Interface()
		}
		return compileNode(s, path, cfg, refs)
	}
	return nil, repairable(&Error{Name: path, Msg: fmt.Sprintf("unsupported value of Go type %T", v)})
}

// joinPath appends key to path: a.b, or a["b c"] for keys that are not names.
func joinPath(path, key string) string {
	switch {
	case isIdent(key) && path == "":
		return key
	case isIdent(key):
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func (n litNode) eval(context.Context, Env) (any, error) { return n.v, nil }

func (n tmplNode) eval(ctx context.Context, env Env) (any, error) { return n.t.Eval(ctx, env) }

func (n mapNode) eval(ctx context.Context, env Env) (any, error) {
	m := make(map[string]any, len(n.keys))
	for i, k := range n.keys {
		v, err := n.vals[i].eval(ctx, env)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

func (n listNode) eval(ctx context.Context, env Env) (any, error) {
	s := make([]any, len(n.elems))
	for i, e := range n.elems {
		v, err := e.eval(ctx, env)
		if err != nil {
			return nil, err
		}
		s[i] = v
	}
	return s, nil
}
