package expr

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// writer writes the text of values (str, repr, JSON) up to a limit, so that a value
// that contains the same list many times over cannot make text without bound.
// In counting mode it only measures.
type writer struct {
	b     strings.Builder
	n     int64
	limit int64
	count bool
	err   error
	th    *starlark.Thread // if set, each value written costs elemSteps of work
}

// visit charges the work of writing one value.
func (w *writer) visit() bool {
	if w.err != nil {
		return false
	}
	if w.th != nil {
		if err := work(w.th, elemSteps); err != nil {
			w.err = err
			return false
		}
	}
	return true
}

var errTooLarge = &limitError{"the text of the value would exceed the allocation limit (does a value contain itself?)"}

func (w *writer) write(s string) {
	if w.err != nil {
		return
	}
	w.n += int64(len(s))
	if w.n > w.limit {
		w.err = errTooLarge
		return
	}
	if !w.count {
		w.b.WriteString(s)
	}
}

// skip counts n bytes without writing them (counting mode only).
func (w *writer) skip(n int) {
	w.n += int64(n)
	if w.n > w.limit && w.err == nil {
		w.err = errTooLarge
	}
}

// str writes v as Python's str() would: strings as they are, others as repr.
func (w *writer) str(v starlark.Value) {
	switch v := v.(type) {
	case starlark.String:
		if w.count {
			w.skip(len(v))
		} else {
			w.write(string(v))
		}
	case starlark.Float:
		w.write(pyFloat(float64(v)))
	default:
		w.repr(v, 0)
	}
}

// repr writes v as Starlark's repr does, with attrdicts and attrlists as dicts and
// lists.
func (w *writer) repr(v starlark.Value, depth int) {
	if !w.visit() {
		return
	}
	if depth > maxDepth {
		w.write("...")
		return
	}
	switch v := v.(type) {
	case starlark.String:
		if w.count {
			w.skip(len(v) + 2)
		} else {
			w.write(syntax.Quote(string(v), false))
		}
	case starlark.Float:
		w.write(pyFloat(float64(v)))
	case *starlark.List:
		w.write("[")
		for i := 0; i < v.Len() && w.err == nil; i++ {
			if i > 0 {
				w.write(", ")
			}
			w.repr(v.Index(i), depth+1)
		}
		w.write("]")
	case *attrlist:
		w.write("[")
		for i := 0; i < v.Len() && w.err == nil; i++ {
			if i > 0 {
				w.write(", ")
			}
			w.repr(v.Index(i), depth+1)
		}
		w.write("]")
	case starlark.Tuple:
		w.write("(")
		for i, x := range v {
			if i > 0 {
				w.write(", ")
			}
			w.repr(x, depth+1)
			if w.err != nil {
				return
			}
		}
		if len(v) == 1 {
			w.write(",")
		}
		w.write(")")
	case *starlark.Dict:
		w.write("{")
		for i, kv := range v.Items() {
			if i > 0 {
				w.write(", ")
			}
			w.repr(kv[0], depth+1)
			w.write(": ")
			w.repr(kv[1], depth+1)
			if w.err != nil {
				return
			}
		}
		w.write("}")
	case *attrdict:
		w.write("{")
		for i, k := range v.keys() {
			if i > 0 {
				w.write(", ")
			}
			w.repr(starlark.String(k), depth+1)
			w.write(": ")
			w.repr(toStarlark(v.m[k], origin{parent: v, name: k}), depth+1)
			if w.err != nil {
				return
			}
		}
		w.write("}")
	case *starlark.Set:
		w.write("set([")
		i := 0
		for x := range starlark.Elements(v) {
			if i > 0 {
				w.write(", ")
			}
			w.repr(x, depth+1)
			i++
			if w.err != nil {
				break
			}
		}
		w.write("])")
	default:
		w.write(v.String())
	}
}

// reprString is the String method of attrdict and attrlist.
func reprString(v starlark.Value) string {
	w := &writer{limit: 1 << 24}
	w.repr(v, 0)
	if w.err != nil {
		return w.b.String() + "..."
	}
	return w.b.String()
}

// pyFloat formats f as Python's repr does: 1000000.0, 0.1, 1e+16, 1.5e-05.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// jsonOpts choose the JSON dialect: Python's json.dumps by default.
type jsonOpts struct {
	indent   string // with an indent, one item a line
	itemSep  string
	keySep   string
	sortKeys bool
}

var (
	jsonPython  = jsonOpts{itemSep: ", ", keySep: ": "}
	jsonCompact = jsonOpts{itemSep: ",", keySep: ":"}
)

func (w *writer) json(v starlark.Value, o *jsonOpts, depth int) {
	if !w.visit() {
		return
	}
	if depth > maxDepth {
		w.err = fmt.Errorf("value nested more than %d deep cannot be encoded as JSON (does it contain itself?)", maxDepth)
		return
	}
	switch v := v.(type) {
	case starlark.NoneType:
		w.write("null")
	case starlark.Bool:
		if v {
			w.write("true")
		} else {
			w.write("false")
		}
	case starlark.Int:
		w.write(v.String())
	case starlark.Float:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			w.err = fmt.Errorf("cannot encode non-finite float %v as JSON", f)
			return
		}
		w.write(pyFloat(f))
	case starlark.String:
		w.jsonString(string(v))
	case *attrdict:
		keys := v.keys()
		w.object(len(keys), o, depth, func(i int) (string, starlark.Value, error) {
			return keys[i], toStarlark(v.m[keys[i]], origin{parent: v, name: keys[i]}), nil
		})
	case starlark.IterableMapping:
		items := v.Items()
		keys := make([]string, len(items))
		for i, kv := range items {
			k, err := jsonKey(kv[0])
			if err != nil {
				w.err = err
				return
			}
			keys[i] = k
		}
		order := make([]int, len(items))
		for i := range order {
			order[i] = i
		}
		if o.sortKeys {
			slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
		}
		w.object(len(items), o, depth, func(i int) (string, starlark.Value, error) {
			return keys[order[i]], items[order[i]][1], nil
		})
	case starlark.Iterable:
		if _, ok := v.(starlark.Callable); ok {
			w.err = fmt.Errorf("cannot encode a %s as JSON", v.Type())
			return
		}
		w.write("[")
		i := 0
		for x := range starlark.Elements(v) {
			if i > 0 {
				w.write(o.separator())
			}
			w.newline(o, depth+1)
			w.json(x, o, depth+1)
			i++
			if w.err != nil {
				return
			}
		}
		if i > 0 {
			w.newline(o, depth)
		}
		w.write("]")
	default:
		w.err = fmt.Errorf("cannot encode a %s as JSON", v.Type())
	}
}

func (w *writer) object(n int, o *jsonOpts, depth int, entry func(i int) (string, starlark.Value, error)) {
	w.write("{")
	for i := 0; i < n && w.err == nil; i++ {
		if i > 0 {
			w.write(o.separator())
		}
		w.newline(o, depth+1)
		k, v, err := entry(i)
		if err != nil {
			w.err = err
			return
		}
		w.jsonString(k)
		w.write(o.keySep)
		w.json(v, o, depth+1)
	}
	if n > 0 {
		w.newline(o, depth)
	}
	w.write("}")
}

// separator returns the item separator; with an indent, lines end without spaces.
func (o *jsonOpts) separator() string {
	if o.indent != "" {
		return strings.TrimRight(o.itemSep, " ")
	}
	return o.itemSep
}

func (w *writer) newline(o *jsonOpts, depth int) {
	if o.indent == "" {
		return
	}
	w.write("\n")
	for range depth {
		w.write(o.indent)
	}
}

// jsonKey converts a dict key as Python's json does.
func jsonKey(k starlark.Value) (string, error) {
	switch k := k.(type) {
	case starlark.String:
		return string(k), nil
	case starlark.Int:
		return k.String(), nil
	case starlark.Float:
		return pyFloat(float64(k)), nil
	case starlark.Bool:
		if k {
			return "true", nil
		}
		return "false", nil
	case starlark.NoneType:
		return "null", nil
	}
	return "", fmt.Errorf("JSON object keys must be strings, not %s", k.Type())
}

func (w *writer) jsonString(s string) {
	if w.count {
		w.skip(len(s) + 2)
		return
	}
	w.write(`"`)
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		w.write(s[start:i])
		switch c {
		case '"':
			w.write(`\"`)
		case '\\':
			w.write(`\\`)
		case '\n':
			w.write(`\n`)
		case '\r':
			w.write(`\r`)
		case '\t':
			w.write(`\t`)
		case '\b':
			w.write(`\b`)
		case '\f':
			w.write(`\f`)
		default:
			if c >= utf8.RuneSelf {
				w.write(`\ufffd`)
			} else {
				w.write(fmt.Sprintf(`\u%04x`, c))
			}
		}
		i++
		start = i
	}
	w.write(s[start:])
	w.write(`"`)
}
