package expr

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// attrdict and attrlist wrap the maps and slices of env without copying them. They
// convert an element when it is used, allow attribute access to keys
// (inputs.issue_key, as Python-like workflow expressions expect), and are read-only: env is shared
// by concurrent evaluations.
//
// Their Starlark types are "attrdict" and "attrlist", not "dict" and "list":
// Starlark's own dict and list assume that a value of their type name is their Go
// type.

// An origin says where a wrapped value came from, for error messages: a name in
// env, or a key or index of a parent.
type origin struct {
	parent starlark.Value // *attrdict or *attrlist; nil for a name in env
	name   string
	index  int
}

func (o origin) path() string {
	switch p := o.parent.(type) {
	case *attrdict:
		if isIdent(o.name) {
			return p.path() + "." + o.name
		}
		return p.path() + "[" + strconv.Quote(o.name) + "]"
	case *attrlist:
		return p.path() + "[" + strconv.Itoa(o.index) + "]"
	}
	if o.name == "" {
		return "value"
	}
	return o.name
}

type attrdict struct {
	m map[string]any
	origin
}

var (
	_ starlark.IterableMapping = (*attrdict)(nil)
	_ starlark.HasAttrs        = (*attrdict)(nil)
	_ starlark.Sequence        = (*attrdict)(nil)
	_ starlark.Comparable      = (*attrdict)(nil)
)

// attrdictMethods are the dict methods of an attrdict. A key of the same name
// wins for attribute access (d.items), a method for a call (d.items()).
var attrdictMethods = map[string]*starlark.Builtin{
	"get": starlark.NewBuiltin("get", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var key string
		var dflt starlark.Value = starlark.None
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
			return nil, err
		}
		d := b.Receiver().(*attrdict)
		if v, ok := d.m[key]; ok {
			return toStarlark(v, origin{parent: d, name: key}), nil
		}
		return dflt, nil
	}),
	"keys": starlark.NewBuiltin("keys", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		d := b.Receiver().(*attrdict)
		if err := charge(th, int64(len(d.m))*elemBytes); err != nil {
			return nil, err
		}
		keys := d.keys()
		vals := make([]starlark.Value, len(keys))
		for i, k := range keys {
			vals[i] = starlark.String(k)
		}
		return starlark.NewList(vals), nil
	}),
	"values": starlark.NewBuiltin("values", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		d := b.Receiver().(*attrdict)
		if err := charge(th, int64(len(d.m))*elemBytes); err != nil {
			return nil, err
		}
		keys := d.keys()
		vals := make([]starlark.Value, len(keys))
		for i, k := range keys {
			vals[i] = toStarlark(d.m[k], origin{parent: d, name: k})
		}
		return starlark.NewList(vals), nil
	}),
	"items": starlark.NewBuiltin("items", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		d := b.Receiver().(*attrdict)
		if err := charge(th, int64(len(d.m))*entryBytes); err != nil {
			return nil, err
		}
		items := d.Items()
		vals := make([]starlark.Value, len(items))
		for i, kv := range items {
			vals[i] = kv
		}
		return starlark.NewList(vals), nil
	}),
	"copy": starlark.NewBuiltin("copy", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		return b.Receiver().(*attrdict).toDict(th)
	}),
}

// readOnlyMethods are the mutating methods of dict and list, which attrdicts and
// attrlists refuse.
var readOnlyMethods = map[string]bool{
	"pop": true, "popitem": true, "setdefault": true, "update": true, "clear": true,
	"append": true, "extend": true, "insert": true, "remove": true, "sort": true, "reverse": true,
}

func readOnlyErr(v starlark.Value, path, what string) error {
	conv := "dict"
	if _, ok := v.(*attrlist); ok {
		conv = "list"
	}
	return fmt.Errorf("%s is read-only (it comes from the workflow context); %s a copy instead: %s(%s)", path, what, conv, path)
}

func (d *attrdict) String() string        { return reprString(d) }
func (d *attrdict) Type() string          { return "attrdict" }
func (d *attrdict) Freeze()               {}
func (d *attrdict) Truth() starlark.Bool  { return len(d.m) > 0 }
func (d *attrdict) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: dict") }
func (d *attrdict) Len() int              { return len(d.m) }

func (d *attrdict) keys() []string {
	keys := make([]string, 0, len(d.m))
	for k := range d.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Attr reads d.name: the key name when d has it, so that inputs.items is the
// input named items; a dict method otherwise. A call d.name(...) is compiled
// to a method call (see callMethods), so d.items() is the method even when d has
// a key items.
func (d *attrdict) Attr(name string) (starlark.Value, error) {
	if v, ok := d.m[name]; ok {
		return toStarlark(v, origin{parent: d, name: name}), nil
	}
	if b, ok := attrdictMethods[name]; ok {
		return b.BindReceiver(d), nil
	}
	if readOnlyMethods[name] {
		return nil, readOnlyErr(d, d.path(), "change")
	}
	return nil, d.missing(name)
}

func (d *attrdict) AttrNames() []string {
	names := d.keys()
	for name := range attrdictMethods {
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// missing describes a missing key, with the keys there are.
func (d *attrdict) missing(key string) error {
	keys := d.keys()
	var b strings.Builder
	fmt.Fprintf(&b, "%s has no key %q", d.path(), key)
	if near := nearest(key, keys); near != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", near)
	}
	switch {
	case len(keys) == 0:
		b.WriteString("; it is empty")
	case len(keys) <= 30:
		fmt.Fprintf(&b, "; its keys are: %s", strings.Join(keys, ", "))
	default:
		fmt.Fprintf(&b, "; its keys include: %s, … (%d in all)", strings.Join(keys[:30], ", "), len(keys))
	}
	return &missingError{msg: b.String(), key: key, keys: keys, path: d.path()}
}

// A missingError is a read of a key, attribute or index that is not there: what
// Jinja calls undefined, so that `x.key is defined` is false rather than an error.
// key, keys and path (set for a missing key of a dict) describe it for a repair.
type missingError struct {
	msg  string
	key  string
	keys []string
	path string
}

func (e *missingError) Error() string { return e.msg }

func (d *attrdict) Get(k starlark.Value) (starlark.Value, bool, error) {
	key, ok := k.(starlark.String)
	if !ok {
		return nil, false, nil
	}
	if v, ok := d.m[string(key)]; ok {
		return toStarlark(v, origin{parent: d, name: string(key)}), true, nil
	}
	return nil, false, d.missing(string(key))
}

func (d *attrdict) SetKey(k, v starlark.Value) error {
	return readOnlyErr(d, d.path(), "change")
}

func (d *attrdict) Iterate() starlark.Iterator {
	return &keyIter{keys: d.keys()}
}

func (d *attrdict) Items() []starlark.Tuple {
	keys := d.keys()
	items := make([]starlark.Tuple, len(keys))
	for i, k := range keys {
		items[i] = starlark.Tuple{starlark.String(k), toStarlark(d.m[k], origin{parent: d, name: k})}
	}
	return items
}

func (d *attrdict) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	switch op {
	case syntax.EQL:
		return deepEqual(d, y, depth)
	case syntax.NEQ:
		eq, err := deepEqual(d, y, depth)
		return !eq, err
	}
	return false, fmt.Errorf("%s %s %s not supported", d.Type(), op, y.Type())
}

// toDict copies d into a Starlark dict, with its elements still wrapped.
func (d *attrdict) toDict(th *starlark.Thread) (*starlark.Dict, error) {
	if err := charge(th, int64(len(d.m))*entryBytes); err != nil {
		return nil, err
	}
	out := starlark.NewDict(len(d.m))
	for _, k := range d.keys() {
		if err := out.SetKey(starlark.String(k), toStarlark(d.m[k], origin{parent: d, name: k})); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type keyIter struct {
	keys []string
	i    int
}

func (it *keyIter) Next(p *starlark.Value) bool {
	if it.i >= len(it.keys) {
		return false
	}
	*p = starlark.String(it.keys[it.i])
	it.i++
	return true
}

func (it *keyIter) Done() {}

type attrlist struct {
	s []any
	origin
}

var (
	_ starlark.Sliceable  = (*attrlist)(nil)
	_ starlark.Sequence   = (*attrlist)(nil)
	_ starlark.Container  = (*attrlist)(nil)
	_ starlark.HasAttrs   = (*attrlist)(nil)
	_ starlark.Comparable = (*attrlist)(nil)
)

var attrlistMethods = map[string]*starlark.Builtin{
	"index": starlark.NewBuiltin("index", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
			return nil, err
		}
		l := b.Receiver().(*attrlist)
		c := newComparer(th)
		for i := range l.s {
			if eq, err := c.equal(l.Index(i), x, maxCompareDepth); err != nil {
				return nil, err
			} else if eq {
				return starlark.MakeInt(i), nil
			}
		}
		return nil, fmt.Errorf("index: value not in list")
	}),
	"count": starlark.NewBuiltin("count", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
			return nil, err
		}
		l := b.Receiver().(*attrlist)
		c := newComparer(th)
		n := 0
		for i := range l.s {
			if eq, err := c.equal(l.Index(i), x, maxCompareDepth); err != nil {
				return nil, err
			} else if eq {
				n++
			}
		}
		return starlark.MakeInt(n), nil
	}),
	"copy": starlark.NewBuiltin("copy", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		return b.Receiver().(*attrlist).toList(th)
	}),
}

func (l *attrlist) String() string        { return reprString(l) }
func (l *attrlist) Type() string          { return "attrlist" }
func (l *attrlist) Freeze()               {}
func (l *attrlist) Truth() starlark.Bool  { return len(l.s) > 0 }
func (l *attrlist) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: list") }
func (l *attrlist) Len() int              { return len(l.s) }

func (l *attrlist) Index(i int) starlark.Value {
	return toStarlark(l.s[i], origin{parent: l, index: i})
}

func (l *attrlist) Slice(start, end, step int) starlark.Value {
	var elems []starlark.Value
	for i := start; (step > 0 && i < end) || (step < 0 && i > end); i += step {
		elems = append(elems, l.Index(i))
	}
	return starlark.NewList(elems)
}

func (l *attrlist) Iterate() starlark.Iterator { return &listIter{l: l} }

func (l *attrlist) SetIndex(int, starlark.Value) error {
	return readOnlyErr(l, l.path(), "change")
}

func (l *attrlist) Has(x starlark.Value) (bool, error) {
	for i := range l.s {
		if eq, err := deepEqual(l.Index(i), x, maxCompareDepth); err != nil || eq {
			return eq, err
		}
	}
	return false, nil
}

func (l *attrlist) Attr(name string) (starlark.Value, error) {
	if b, ok := attrlistMethods[name]; ok {
		return b.BindReceiver(l), nil
	}
	if readOnlyMethods[name] {
		return nil, readOnlyErr(l, l.path(), "change")
	}
	return nil, nil
}

func (l *attrlist) AttrNames() []string {
	names := make([]string, 0, len(attrlistMethods))
	for name := range attrlistMethods {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (l *attrlist) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	switch op {
	case syntax.EQL:
		return deepEqual(l, y, depth)
	case syntax.NEQ:
		eq, err := deepEqual(l, y, depth)
		return !eq, err
	}
	return false, fmt.Errorf("%s %s %s not supported", l.Type(), op, y.Type())
}

// toList copies l into a Starlark list, with its elements still wrapped.
func (l *attrlist) toList(th *starlark.Thread) (*starlark.List, error) {
	if err := charge(th, int64(len(l.s))*elemBytes); err != nil {
		return nil, err
	}
	elems := make([]starlark.Value, len(l.s))
	for i := range l.s {
		elems[i] = l.Index(i)
	}
	return starlark.NewList(elems), nil
}

type listIter struct {
	l *attrlist
	i int
}

func (it *listIter) Next(p *starlark.Value) bool {
	if it.i >= len(it.l.s) {
		return false
	}
	*p = it.l.Index(it.i)
	it.i++
	return true
}

func (it *listIter) Done() {}

// maxCompareDepth bounds the recursion of equality, as Starlark's own does.
const maxCompareDepth = 10

// deepEqual compares x and y, treating attrdicts as dicts and attrlists as lists.
func deepEqual(x, y starlark.Value, depth int) (bool, error) {
	return (*comparer)(nil).equal(x, y, depth)
}

// A comparer compares values, counting each comparison as a step of work on its
// thread (if it has one), so that comparing lists that hold the same big list
// many times over is stopped.
type comparer struct {
	th *starlark.Thread
	st *state
}

func newComparer(th *starlark.Thread) *comparer { return &comparer{th: th, st: stateOf(th)} }

func (c *comparer) equal(x, y starlark.Value, depth int) (bool, error) {
	if depth < 1 {
		return false, fmt.Errorf("comparison exceeded maximum recursion depth")
	}
	if c != nil {
		if err := c.st.work(c.th, 1); err != nil {
			return false, err
		}
	}
	xm, xIsMap := asMapping(x)
	ym, yIsMap := asMapping(y)
	if xIsMap || yIsMap {
		if !xIsMap || !yIsMap || starlark.Len(x) != starlark.Len(y) {
			return false, nil
		}
		for _, kv := range xm.Items() {
			yv, found, _ := ym.Get(kv[0])
			if !found {
				return false, nil
			}
			if eq, err := c.equal(kv[1], yv, depth-1); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	_, xIsTuple := x.(starlark.Tuple)
	_, yIsTuple := y.(starlark.Tuple)
	if isListLike(x) || isListLike(y) || xIsTuple && yIsTuple {
		if isListLike(x) != isListLike(y) {
			return false, nil
		}
		xs, ys := x.(starlark.Indexable), y.(starlark.Indexable)
		if xs.Len() != ys.Len() {
			return false, nil
		}
		for i := 0; i < xs.Len(); i++ {
			if eq, err := c.equal(xs.Index(i), ys.Index(i), depth-1); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	return starlark.EqualDepth(x, y, depth)
}

func asMapping(v starlark.Value) (starlark.IterableMapping, bool) {
	switch v := v.(type) {
	case *attrdict:
		return v, true
	case *starlark.Dict:
		return v, true
	}
	return nil, false
}

func isListLike(v starlark.Value) bool {
	switch v.(type) {
	case *attrlist, *starlark.List:
		return true
	}
	return false
}
