package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/skillbus/skillbus/internal/jsonenc"
)

// excerpt is the start of v's JSON: the first ExcerptBytes bytes of what
// json.Marshal gives, cut at a character boundary and marked with "…", or v
// printed with %v when it does not marshal.
//
// A step's result can be a large response, and the log keeps 200 bytes of it: the
// JSON-like values tools return (maps, lists, strings, numbers) are encoded here,
// byte for byte as encoding/json would, only until the excerpt is full; the rest is
// walked to learn whether json.Marshal would have failed, without being encoded.
func excerpt(v any) string {
	if v == nil {
		return ""
	}
	e := excerptPool.Get().(*excerptEncoder)
	defer e.release()
	e.limit = ExcerptBytes + 1 // one more byte tells that there is more
	ok := e.encode(v, 0)
	if e.deep {
		// Too deep to walk here (perhaps a cycle): encoding/json decides.
		return excerptMarshal(v)
	}
	if !ok || !e.rest.check() {
		return fmt.Sprintf("%v", v)
	}
	b := e.buf
	if len(b) > ExcerptBytes {
		// truncate's cut, made before the one copy into a string
		n := ExcerptBytes
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = append(b[:n], "…"...)
	}
	return string(b)
}

// excerptMarshal is excerpt the plain way, for values nested too deeply to walk.
func excerptMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return truncate(string(b), ExcerptBytes)
}

// maxExcerptDepth bounds the nesting excerpt walks itself; encoding/json starts
// looking for cycles at 1000.
const maxExcerptDepth = 500

var excerptPool = sync.Pool{New: func() any { return &excerptEncoder{buf: make([]byte, 0, 2*ExcerptBytes)} }}

// excerptEncoder appends the JSON of a value to buf until buf holds limit bytes,
// and remembers in rest what it did not encode.
type excerptEncoder struct {
	buf   []byte
	limit int
	keys  [][]string // sorted map keys, one slice per nesting level, reused
	rest  restWalk
	deep  bool
}

func (e *excerptEncoder) release() {
	if cap(e.buf) > 64<<10 {
		return
	}
	e.buf = e.buf[:0]
	for i := range e.keys {
		clear(e.keys[i])
		e.keys[i] = e.keys[i][:0]
	}
	e.rest.reset()
	e.deep = false
	excerptPool.Put(e)
}

func (e *excerptEncoder) full() bool { return len(e.buf) >= e.limit }

// encode appends v's JSON to buf, stopping once buf is full; whatever of v it did
// not reach goes to rest. It reports false when v does not marshal.
func (e *excerptEncoder) encode(v any, depth int) bool {
	if e.full() {
		e.rest.add(v)
		return true
	}
	if depth > maxExcerptDepth {
		e.deep = true
		return true
	}
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case string:
		e.appendString(v)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case float64:
		b, err := jsonenc.AppendFloat(e.buf, v, 64)
		if err != nil { // NaN or an infinity
			return false
		}
		e.buf = b
	case map[string]any:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return true
		}
		for len(e.keys) <= depth {
			e.keys = append(e.keys, nil)
		}
		keys := e.keys[depth][:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.keys[depth] = keys
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if e.full() {
				for _, k := range keys[i:] {
					e.rest.add(v[k])
				}
				return true
			}
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.appendString(k)
			e.buf = append(e.buf, ':')
			if !e.encode(v[k], depth+1) {
				return false
			}
		}
		e.buf = append(e.buf, '}')
	case []any:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return true
		}
		e.buf = append(e.buf, '[')
		for i, x := range v {
			if e.full() {
				e.rest.add(v[i:])
				return true
			}
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if !e.encode(x, depth+1) {
				return false
			}
		}
		e.buf = append(e.buf, ']')
	default:
		// Anything else (structs, typed maps and slices, json.Number, Marshalers)
		// encodes the same on its own as inside a larger value.
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		e.buf = append(e.buf, b...)
	}
	return true
}

// appendString appends s as encoding/json quotes it (escaping <, > and &, invalid
// UTF-8 as U+FFFD), but only as much of s as can still reach the limit: every byte
// of s gives at least one byte of JSON.
func (e *excerptEncoder) appendString(s string) {
	if need := e.limit - len(e.buf); len(s) > need {
		// Cut where a character starts, so that what is encoded decodes as in s.
		n := need
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		s = s[:n]
	}
	e.buf = jsonenc.AppendString(e.buf, s)
}

// restWalk holds the values excerpt did not encode, to learn whether json.Marshal
// would have failed on one of them.
type restWalk struct {
	vals []any
}

func (r *restWalk) add(v any) { r.vals = append(r.vals, v) }

func (r *restWalk) reset() {
	clear(r.vals)
	r.vals = r.vals[:0]
}

// check reports whether every value in r marshals: finite numbers, and for values
// of other types than JSON-like ones, json.Marshal's own answer.
func (r *restWalk) check() bool {
	for _, v := range r.vals {
		if !r.marshals(v, 0) {
			return false
		}
	}
	return true
}

func (r *restWalk) marshals(v any, depth int) bool {
	if depth > maxExcerptDepth {
		_, err := json.Marshal(v)
		return err == nil
	}
	switch v := v.(type) {
	case nil, string, bool, int64, int:
		return true
	case float64:
		return !math.IsInf(v, 0) && !math.IsNaN(v)
	case map[string]any:
		for _, x := range v {
			if !r.marshals(x, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range v {
			if !r.marshals(x, depth+1) {
				return false
			}
		}
		return true
	}
	_, err := json.Marshal(v)
	return err == nil
}
