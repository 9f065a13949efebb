package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"

	"go.starlark.net/starlark"
)

// toStarlark converts a Go value to Starlark. Maps and slices are wrapped, not
// copied: their elements are converted when they are used. Values that are not
// JSON-like are converted through their JSON encoding, or their fmt form if they
// have none.
func toStarlark(v any, from origin) starlark.Value {
	switch v := v.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(v)
	case string:
		return starlark.String(v)
	case int:
		return starlark.MakeInt(v)
	case int64:
		return starlark.MakeInt64(v)
	case float64:
		return floatValue(v)
	case map[string]any:
		return &attrdict{m: v, origin: from}
	case []any:
		return &attrlist{s: v, origin: from}
	case json.Number:
		return numberValue(v)
	case int8:
		return starlark.MakeInt64(int64(v))
	case int16:
		return starlark.MakeInt64(int64(v))
	case int32:
		return starlark.MakeInt64(int64(v))
	case uint:
		return starlark.MakeUint64(uint64(v))
	case uint8:
		return starlark.MakeUint64(uint64(v))
	case uint16:
		return starlark.MakeUint64(uint64(v))
	case uint32:
		return starlark.MakeUint64(uint64(v))
	case uint64:
		return starlark.MakeUint64(v)
	case float32:
		return floatValue(float64(v))
	case []byte:
		return starlark.String(v)
	case []string:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = x
		}
		return &attrlist{s: s, origin: from}
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = x
		}
		return &attrdict{m: m, origin: from}
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return &attrdict{m: m, origin: from}
		}
	case reflect.Slice, reflect.Array:
		s := make([]any, rv.Len())
		for i := range s {
			s[i] = rv.Index(i).Interface()
		}
		return &attrlist{s: s, origin: from}
	case reflect.Pointer:
		if rv.IsNil() {
			return starlark.None
		}
	}
	// Structs, pointers and the rest: as JSON would see them.
	if data, err := json.Marshal(v); err == nil {
		var x any
		if err := json.Unmarshal(data, &x); err == nil {
			return toStarlark(x, from)
		}
	}
	return starlark.String(fmt.Sprint(v))
}

// floatValue converts a float, making integral values Starlark ints so that they
// work as indexes and slice bounds: JSON decoding makes every number a float64.
func floatValue(f float64) starlark.Value {
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return starlark.MakeInt64(int64(f))
	}
	return starlark.Float(f)
}

func numberValue(n json.Number) starlark.Value {
	if i, err := n.Int64(); err == nil {
		return starlark.MakeInt64(i)
	}
	if b, ok := new(big.Int).SetString(string(n), 10); ok {
		return starlark.MakeBigInt(b)
	}
	if f, err := n.Float64(); err == nil {
		return floatValue(f)
	}
	return starlark.String(n)
}

// normalizeGo returns the Go value that a round trip of v through Starlark would
// give, if that is cheap to know.
func normalizeGo(v any) (any, bool) {
	switch v := v.(type) {
	case nil, bool, string, int64, map[string]any, []any:
		return v, true
	case int:
		return int64(v), true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return int64(v), true
		}
		return v, true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, true
		}
	}
	return nil, false
}

// toGo converts a Starlark value to Go: None→nil, bool, string, int→int64 (float64
// if too big), float64, list/tuple/set→[]any, dict→map[string]any (keys that are not
// strings become their str()). Wrapped Go values are returned as they were.
// budget bounds the bytes of the result, so that a list holding itself many
// times over cannot explode.
// Each value converted costs a step of work on th.
func toGo(th *starlark.Thread, v starlark.Value, budget int64) (any, error) {
	c := &goConv{left: budget, th: th, st: stateOf(th)}
	return c.conv(v, 0)
}

type goConv struct {
	left int64
	th   *starlark.Thread
	st   *state
}

// maxDepth bounds the nesting of converted and printed values; deeper values are
// almost surely cyclic.
const maxDepth = 100

func (c *goConv) take(n int64) error {
	c.left -= n
	if c.left < 0 {
		return &limitError{"the result is too large (does it contain itself?)"}
	}
	return nil
}

func (c *goConv) conv(v starlark.Value, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the result is nested more than %d deep (does it contain itself?)", maxDepth)
	}
	if err := c.take(16); err != nil {
		return nil, err
	}
	if err := c.st.work(c.th, 2); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.String:
		return string(v), nil
	case starlark.Int:
		if i, ok := v.Int64(); ok {
			return i, nil
		}
		f, _ := starlark.AsFloat(v)
		return f, nil
	case starlark.Float:
		return float64(v), nil
	case *attrdict:
		return v.m, nil
	case *attrlist:
		return v.s, nil
	case starlark.Bytes:
		return string(v), nil
	case *starlark.List:
		s := make([]any, v.Len())
		for i := range s {
			x, err := c.conv(v.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	case starlark.Tuple:
		s := make([]any, len(v))
		for i, e := range v {
			x, err := c.conv(e, depth+1)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	case *starlark.Dict:
		m := make(map[string]any, v.Len())
		for _, kv := range v.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				k = starlark.String(kv[0].String())
			}
			x, err := c.conv(kv[1], depth+1)
			if err != nil {
				return nil, err
			}
			m[string(k)] = x
		}
		return m, nil
	case starlark.Iterable:
		if _, ok := v.(starlark.Callable); ok {
			break
		}
		s := []any{}
		iter := v.Iterate()
		defer iter.Done()
		var x starlark.Value
		for iter.Next(&x) {
			y, err := c.conv(x, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, y)
		}
		return s, nil
	}
	return nil, fmt.Errorf("cannot use a %s as a value: values are None, bools, numbers, strings, lists and dicts", v.Type())
}
