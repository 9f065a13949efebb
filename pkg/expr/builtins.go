package expr

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// The tables in this file are built once at package initialization and never
// modified; Starlark builtins are immutable, so evaluations share them.

var (
	// builtins are the predeclared names: Starlark's universe, with the
	// built-ins that walk or build collections replaced by versions that count
	// their work; Python additions; the filters; and the json and math modules.
	builtins     map[string]starlark.Value
	builtinNames []string // sorted
	// filters are the Jinja filters, which are builtins too.
	filters     map[string]*starlark.Builtin
	filterNames []string // sorted
	// internals are names that only the rewrites produce; they start with | so
	// that no user-written name can hide or reach them.
	internals map[string]starlark.Value
)

func init() {
	filters = makeFilters()
	filterNames = slices.Sorted(maps.Keys(filters))
	builtins = makeBuiltins()
	builtinNames = slices.Sorted(maps.Keys(builtins))
	internals = makeInternals()
}

func makeFilters() map[string]*starlark.Builtin {
	return map[string]*starlark.Builtin{
		"default":    starlark.NewBuiltin("default", fDefault),
		"lower":      strFilter("lower", strings.ToLower),
		"upper":      strFilter("upper", strings.ToUpper),
		"title":      strMethodFilter("title"),
		"capitalize": strMethodFilter("capitalize"),
		"trim":       strMethodFilter("strip"),
		"strip":      strMethodFilter("strip"),
		"replace":    starlark.NewBuiltin("replace", fReplace),
		"join":       starlark.NewBuiltin("join", fJoin),
		"length":     starlark.NewBuiltin("length", fLength),
		"count":      starlark.NewBuiltin("count", fLength),
		"tojson":     starlark.NewBuiltin("tojson", fToJSON),
		"fromjson":   jsonDecode("fromjson"),
		"first":      starlark.NewBuiltin("first", fFirst),
		"last":       starlark.NewBuiltin("last", fLast),
		"int":        starlark.Universe["int"].(*starlark.Builtin),
		"float":      starlark.Universe["float"].(*starlark.Builtin),
		"string":     starlark.NewBuiltin("string", bStr),
		"list":       sized("list", elemBytes),
		"sort":       starlark.NewBuiltin("sort", fSort),
		"sorted":     sized("sorted", elemBytes),
		"unique":     starlark.NewBuiltin("unique", fUnique),
		"split":      starlark.NewBuiltin("split", fSplit),
		"truncate":   starlark.NewBuiltin("truncate", fTruncate),
		"abs":        starlark.Universe["abs"].(*starlark.Builtin),
		"round":      starlark.NewBuiltin("round", bRound),
		"sum":        starlark.NewBuiltin("sum", bSum),
		"min":        sized("min", 0),
		"max":        sized("max", 0),
		"map":        starlark.NewBuiltin("map", bMap),
		"reverse":    starlark.NewBuiltin("reverse", fReverse),
	}
}

var jsonModule = &starlarkstruct.Module{
	Name: "json",
	Members: starlark.StringDict{
		"encode":        starlark.NewBuiltin("json.encode", jsonEncode),
		"encode_indent": starlark.NewBuiltin("json.encode_indent", jsonEncodeIndent),
		"decode":        jsonDecode("json.decode"),
		"indent":        json.Module.Members["indent"],
		"dumps":         starlark.NewBuiltin("json.dumps", jsonDumps),
		"loads":         jsonDecode("json.loads"),
	},
}

func makeBuiltins() map[string]starlark.Value {
	b := map[string]starlark.Value{}
	for name, v := range starlark.Universe {
		b[name] = v
	}
	for name, v := range filters {
		b[name] = v
	}
	for _, name := range []string{"tuple", "enumerate", "zip", "reversed", "set"} {
		b[name] = sized(name, elemBytes)
	}
	b["dict"] = sized("dict", entryBytes)
	b["any"] = sized("any", 0)
	b["all"] = sized("all", 0)
	b["str"] = starlark.NewBuiltin("str", bStr)
	b["len"] = starlark.NewBuiltin("len", bLen)
	b["repr"] = starlark.NewBuiltin("repr", bRepr)
	b["print"] = starlark.NewBuiltin("print", bPrint)
	b["pow"] = starlark.NewBuiltin("pow", bPow)
	b["getattr"] = starlark.NewBuiltin("getattr", bGetattr)
	b["fail"] = starlark.NewBuiltin("fail", bFail)
	b["isinstance"] = starlark.NewBuiltin("isinstance", bIsinstance)
	b["filter"] = starlark.NewBuiltin("filter", bFilter)
	b["json"] = jsonModule
	b["math"] = math.Module
	for _, v := range b {
		v.Freeze()
	}
	return b
}

func makeInternals() map[string]starlark.Value {
	in := map[string]starlark.Value{
		"|add":     binop("+", add),
		"|iadd":    binop("+=", iadd),
		"|mul":     binop("*", mul),
		"|mod":     binop("%", mod),
		"|lsh":     binop("<<", lsh),
		"|pow":     binop("**", pow),
		"|concat":  binop("~", concat),
		"|eq":      binop("==", eq),
		"|in":      binop("in", in),
		"|notin":   binop("not in", notIn),
		"|ne":      binop("!=", ne),
		"|render":  starlark.NewBuiltin("render", render),
		"|attr":    starlark.NewBuiltin("getattr", attr),
		"|defined": starlark.NewBuiltin("defined", isDefined),
		"|index":   starlark.NewBuiltin("index", index),
		"|slice":   starlark.NewBuiltin("slice", slice),
		"|iter":    starlark.NewBuiltin("iter", iterText),
		"|lazy":    starlark.NewBuiltin("default", lazyValue),
	}
	for name := range callMethods {
		in["|m."+name] = method(name)
	}
	for name, f := range filters {
		in["|"+name] = f
	}
	// Where Jinja's filter and Python's function of the same name differ, the
	// filter is Jinja's: 2.5 | round is 2.0, '3.7' | int is 3.
	in["|round"] = starlark.NewBuiltin("round", fRound)
	in["|int"] = starlark.NewBuiltin("int", fInt)
	in["|float"] = starlark.NewBuiltin("float", fFloat)
	return in
}

func binop(op string, fn func(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error)) *starlark.Builtin {
	return starlark.NewBuiltin(op, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) != 2 || len(kwargs) != 0 {
			return nil, fmt.Errorf("internal error: %s needs two operands", op)
		}
		return fn(th, args[0], args[1])
	})
}

// sized wraps a universe builtin that walks or builds a collection so that its
// work counts as steps and what it builds counts against the allocation limit.
func sized(name string, perElem int64) *starlark.Builtin {
	u := starlark.Universe[name].(*starlark.Builtin)
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 && iteratesText[name] {
			if s, ok := args[0].(starlark.String); ok {
				chars, err := characters(th, s)
				if err != nil {
					return nil, err
				}
				args = append(starlark.Tuple{chars}, args[1:]...)
			}
		}
		for _, a := range args {
			if _, ok := a.(starlark.String); ok {
				continue
			}
			if n := starlark.Len(a); n > 0 {
				steps := n
				if name == "sorted" {
					steps = n * max(1, bitsOf(n)/4)
				}
				if err := work(th, steps); err != nil {
					return nil, err
				}
				if err := charge(th, int64(n)*perElem); err != nil {
					return nil, err
				}
			}
		}
		return u.CallInternal(th, args, kwargs)
	})
}

// text returns the string form of v for the string filters: None is "", strings
// are themselves, anything else is its str().
func text(th *starlark.Thread, v starlark.Value) (string, error) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil
	case starlark.NoneType:
		return "", nil
	}
	return strValue(th, v)
}

// strValue returns str(v), within the allocation limit.
func strValue(th *starlark.Thread, v starlark.Value) (string, error) {
	if s, ok := v.(starlark.String); ok {
		return string(s), nil
	}
	w := &writer{limit: allocLeft(th), th: th}
	w.str(v)
	if w.err != nil {
		return "", w.err
	}
	if err := charge(th, w.n); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

// largestText returns the length of the longest str() of values, or an error if
// one is longer than the allocation budget left.
func largestText(th *starlark.Thread, values ...starlark.Value) (int64, error) {
	left := allocLeft(th)
	var largest int64
	for _, v := range values {
		if s, ok := v.(starlark.String); ok {
			largest = max(largest, int64(len(s)))
			continue
		}
		w := &writer{limit: left, count: true, th: th}
		w.str(v)
		if w.err != nil {
			return 0, w.err
		}
		largest = max(largest, w.n)
	}
	return largest, nil
}

func bStr(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value = starlark.String("")
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0, &x); err != nil {
		return nil, err
	}
	s, err := strValue(th, x)
	return starlark.String(s), err
}

func bRepr(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	w := &writer{limit: allocLeft(th), th: th}
	w.repr(x, 0)
	if w.err != nil {
		return nil, w.err
	}
	if err := charge(th, w.n); err != nil {
		return nil, err
	}
	return starlark.String(w.b.String()), nil
}

func bPrint(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "sep?", &sep); err != nil {
		return nil, err
	}
	parts := make([]string, len(args))
	for i, a := range args {
		s, err := strValue(th, a)
		if err != nil {
			return nil, err
		}
		parts[i] = s
	}
	if th.Print != nil {
		th.Print(th, strings.Join(parts, sep))
	}
	return starlark.None, nil
}

// bGetattr is getattr(x, name[, default]); it hands out the checked versions of
// the methods in guardedMethods.
func bGetattr(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, dflt starlark.Value
	var name string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &name, &dflt); err != nil {
		return nil, err
	}
	if handles(x, name) {
		return internals["|m."+name].(*starlark.Builtin).BindReceiver(x), nil
	}
	v, err := getAttr(x, name)
	if err != nil && dflt != nil {
		return dflt, nil
	}
	return v, err
}

// bFail is fail(*args, sep=" "), which stops the evaluation with an error.
func bFail(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "sep?", &sep); err != nil {
		return nil, err
	}
	parts := make([]string, len(args))
	for i, a := range args {
		s, err := strValue(th, a)
		if err != nil {
			return nil, err
		}
		parts[i] = s
	}
	return nil, fmt.Errorf("fail: %s", strings.Join(parts, sep))
}

func bIsinstance(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, types starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &types); err != nil {
		return nil, err
	}
	check := func(t starlark.Value) (bool, error) {
		tb, ok := t.(*starlark.Builtin)
		if !ok {
			return false, fmt.Errorf("isinstance: want a type such as str, int, float, bool, list, dict, tuple or set, got %s", t.Type())
		}
		want := tb.Name()
		switch x.Type() {
		case "string":
			return want == "str" || want == "string", nil
		case "attrdict":
			return want == "dict", nil
		case "attrlist":
			return want == "list", nil
		}
		return x.Type() == want, nil
	}
	if tuple, ok := types.(starlark.Tuple); ok {
		for _, t := range tuple {
			if ok, err := check(t); ok || err != nil {
				return starlark.Bool(ok), err
			}
		}
		return starlark.False, nil
	}
	ok, err := check(types)
	return starlark.Bool(ok), err
}

func bFilter(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fn, iterable starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &fn, &iterable); err != nil {
		return nil, err
	}
	var out []starlark.Value
	err := each(th, b.Name(), iterable, func(x starlark.Value) error {
		keep := x.Truth()
		if fn != starlark.None {
			v, err := starlark.Call(th, fn, starlark.Tuple{x}, nil)
			if err != nil {
				return err
			}
			keep = v.Truth()
		}
		if keep {
			out = append(out, x)
		}
		return nil
	})
	return starlark.NewList(out), err
}

// bMap is Python's map(function, iterable, ...), returning a list, and Jinja's map
// filter: items | map(attribute='name') and items | map('lower').
func bMap(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		if _, ok := args[0].(starlark.Callable); ok {
			return pyMap(th, args[0], args[1:], kwargs)
		}
	}
	var iterable, filter starlark.Value
	var attribute string
	var dflt starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &iterable, "filter?", &filter, "attribute?", &attribute, "default?", &dflt); err != nil {
		return nil, err
	}
	var f *starlark.Builtin
	if filter != nil {
		name, ok := filter.(starlark.String)
		if !ok || filters[string(name)] == nil {
			return nil, fmt.Errorf("map: want a filter name such as 'lower', got %s", filter.String())
		}
		f = filters[string(name)]
	} else if attribute == "" {
		return nil, fmt.Errorf("map: want a function, a filter name, or attribute=")
	}
	var out []starlark.Value
	err := each(th, b.Name(), iterable, func(x starlark.Value) error {
		if f != nil {
			v, err := starlark.Call(th, f, starlark.Tuple{x}, nil)
			out = append(out, v)
			return err
		}
		v, err := lookup(x, attribute)
		if err != nil {
			if dflt == nil {
				return err
			}
			v = dflt
		}
		out = append(out, v)
		return nil
	})
	return starlark.NewList(out), err
}

func pyMap(th *starlark.Thread, fn starlark.Value, iterables starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(iterables) == 0 || len(kwargs) > 0 {
		return nil, fmt.Errorf("map: want map(function, iterable, ...)")
	}
	iters := make([]starlark.Iterator, len(iterables))
	for i, it := range iterables {
		iters[i] = starlark.Iterate(it)
		if iters[i] == nil {
			return nil, fmt.Errorf("map: %s is not iterable", it.Type())
		}
		defer iters[i].Done()
	}
	var out []starlark.Value
	for {
		args := make(starlark.Tuple, len(iters))
		for i, it := range iters {
			if !it.Next(&args[i]) {
				return starlark.NewList(out), nil
			}
		}
		if err := work(th, elemSteps); err != nil {
			return nil, err
		}
		v, err := starlark.Call(th, fn, args, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// each calls fn for each element of iterable, counting the work.
func each(th *starlark.Thread, name string, iterable starlark.Value, fn func(starlark.Value) error) error {
	iter := starlark.Iterate(iterable)
	if iter == nil {
		return fmt.Errorf("%s: %s is not iterable", name, iterable.Type())
	}
	defer iter.Done()
	st := stateOf(th)
	var x starlark.Value
	for iter.Next(&x) {
		if err := st.work(th, elemSteps); err != nil {
			return err
		}
		if err := st.charge(elemBytes); err != nil {
			return err
		}
		if err := fn(x); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns x's key or attribute name, as Jinja's attribute= arguments do.
func lookup(x starlark.Value, name string) (starlark.Value, error) {
	if m, ok := x.(starlark.Mapping); ok {
		v, found, err := m.Get(starlark.String(name))
		if found {
			return v, nil
		}
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s has no key %q", x.Type(), name)
	}
	if h, ok := x.(starlark.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil || v != nil {
			return v, err
		}
	}
	return nil, fmt.Errorf("%s has no attribute %q", x.Type(), name)
}

// maxJSONDepth bounds the nesting of decoded JSON; go.starlark.net's decoder
// recurses without limit.
const maxJSONDepth = 1000

func jsonDecode(name string) *starlark.Builtin {
	decode := json.Module.Members["decode"].(*starlark.Builtin)
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok {
				if err := work(th, len(s)/bytesPerStep); err != nil {
					return nil, err
				}
				if err := charge(th, int64(len(s))*4); err != nil {
					return nil, err
				}
				if jsonDepth(string(s)) > maxJSONDepth {
					return nil, fmt.Errorf("%s: JSON nested more than %d deep", name, maxJSONDepth)
				}
			}
		}
		v, err := decode.CallInternal(th, args, kwargs)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "json.decode: "))
		}
		return v, nil
	})
}

// jsonDepth returns the deepest nesting of arrays and objects in JSON text s.
func jsonDepth(s string) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// encodeJSON returns the JSON text of v, within the allocation limit.
func encodeJSON(th *starlark.Thread, name string, v starlark.Value, o *jsonOpts) (starlark.Value, error) {
	w := &writer{limit: allocLeft(th), th: th}
	w.json(v, o, 0)
	if w.err != nil {
		if _, ok := w.err.(*limitError); ok {
			return nil, w.err
		}
		return nil, fmt.Errorf("%s: %v", name, w.err)
	}
	if err := charge(th, w.n); err != nil {
		return nil, err
	}
	return starlark.String(w.b.String()), nil
}

func jsonEncode(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	o := jsonCompact
	o.sortKeys = true
	return encodeJSON(th, b.Name(), x, &o)
}

func jsonEncodeIndent(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	prefix, indent := "", "\t"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &x, "prefix?", &prefix, "indent?", &indent); err != nil {
		return nil, err
	}
	o := jsonOpts{indent: indent, itemSep: ",", keySep: ": ", sortKeys: true}
	v, err := encodeJSON(th, b.Name(), x, &o)
	if err != nil || prefix == "" {
		return v, err
	}
	return starlark.String(strings.ReplaceAll(string(v.(starlark.String)), "\n", "\n"+prefix)), nil
}

// jsonDumps is Python's json.dumps(obj, indent=None, sort_keys=False,
// separators=None). Unlike Python's default, non-ASCII text is not escaped.
func jsonDumps(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, indent, separators starlark.Value
	var sortKeys, ensureASCII bool
	var dflt starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "obj", &x, "indent?", &indent, "sort_keys?", &sortKeys,
		"separators?", &separators, "ensure_ascii?", &ensureASCII, "default?", &dflt); err != nil {
		return nil, err
	}
	o, err := dumpsOpts(b.Name(), indent, separators, sortKeys)
	if err != nil {
		return nil, err
	}
	return encodeJSON(th, b.Name(), x, o)
}

func dumpsOpts(name string, indent, separators starlark.Value, sortKeys bool) (*jsonOpts, error) {
	o := jsonPython
	o.sortKeys = sortKeys
	switch ind := indent.(type) {
	case nil, starlark.NoneType:
	case starlark.Int:
		n, ok := ind.Int64()
		if !ok || n < 0 || n > 64 {
			return nil, fmt.Errorf("%s: indent out of range", name)
		}
		o.indent = strings.Repeat(" ", int(n))
		if n == 0 {
			o.indent = ""
		}
		o.itemSep = ","
	case starlark.String:
		o.indent = string(ind)
		o.itemSep = ","
	default:
		return nil, fmt.Errorf("%s: indent must be an int or a string, not %s", name, indent.Type())
	}
	if separators != nil && separators != starlark.None {
		t, ok := separators.(starlark.Tuple)
		if !ok || len(t) != 2 {
			return nil, fmt.Errorf("%s: separators must be a (item_separator, key_separator) tuple", name)
		}
		item, ok1 := t[0].(starlark.String)
		key, ok2 := t[1].(starlark.String)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: separators must be strings", name)
		}
		o.itemSep, o.keySep = string(item), string(key)
	}
	return &o, nil
}
