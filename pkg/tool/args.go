package tool

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Args reads a call's arguments. Every getter fails with a failure.Repairable error
// that names the tool and the argument, such as
//
//	http: argument "url" is required
//	exec: argument "command" must be a list of strings, got string
//
// so that a repair strategy, or a person reading the DLQ, knows what to fix. A
// missing argument and one set to null are the same. The plain getters require the
// argument; the Opt getters return a default when it is missing.
type Args struct {
	tool string
	m    map[string]any
}

// NewArgs returns an Args reading args on behalf of the named tool.
func NewArgs(tool string, args map[string]any) Args {
	return Args{tool: tool, m: args}
}

// Has reports whether the argument is present and not null.
func (a Args) Has(name string) bool {
	return a.m[name] != nil
}

// Only fails if any argument other than the named ones is present, so a misspelt
// optional argument ("header" for "headers") is reported rather than ignored.
func (a Args) Only(names ...string) error {
	var unknown []string
	for k := range a.m {
		if !slices.Contains(names, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := slices.Clone(names)
	slices.Sort(known)
	word := "argument"
	if len(unknown) > 1 {
		word = "arguments"
	}
	err := failure.Repair("%s: unknown %s %s (known: %s)", a.tool, word,
		strings.Join(unknown, ", "), strings.Join(known, ", "))
	// A misspelling of an argument the tool takes ("metod" for "method") is a
	// parameter fault a repairer renames: the name the tool wants, and the names
	// the step sent.
	sent := make([]string, 0, len(a.m))
	for k := range a.m {
		sent = append(sent, k)
	}
	slices.Sort(sent)
	for _, u := range unknown {
		u, _ = strconv.Unquote(u)
		if want := failure.Nearest(u, known); want != "" && !slices.Contains(sent, want) {
			return (&failure.Fault{Kind: failure.FaultParameter, Name: want, Have: sent, Field: "args." + u, Err: err}).Repairable()
		}
	}
	return err
}

// Errorf returns a Repairable error about the named argument.
func (a Args) Errorf(name, format string, args ...any) error {
	return failure.Repair("%s: argument %q %s", a.tool, name, fmt.Sprintf(format, args...))
}

func (a Args) missing(name string) error { return a.Errorf(name, "is required") }

func (a Args) wrongType(name, want string, v any) error {
	return a.Errorf(name, "must be %s, got %s", want, typeName(v))
}

// String returns a required string argument.
func (a Args) String(name string) (string, error) {
	if !a.Has(name) {
		return "", a.missing(name)
	}
	return a.OptString(name, "")
}

// OptString returns a string argument, or def if it is missing.
func (a Args) OptString(name, def string) (string, error) {
	v := a.m[name]
	if v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", a.wrongType(name, "a string", v)
	}
	return s, nil
}

// Int returns a required integer argument. Integral floats (as JSON decoders
// produce) are accepted; strings are not.
func (a Args) Int(name string) (int64, error) {
	if !a.Has(name) {
		return 0, a.missing(name)
	}
	return a.OptInt(name, 0)
}

// OptInt returns an integer argument, or def if it is missing.
func (a Args) OptInt(name string, def int64) (int64, error) {
	v := a.m[name]
	if v == nil {
		return def, nil
	}
	if i, ok := toInt(v); ok {
		return i, nil
	}
	if _, isNum := toFloat(v); isNum {
		return 0, a.Errorf(name, "must be an integer, got %v", v)
	}
	return 0, a.wrongType(name, "an integer", v)
}

// Duration returns a required duration argument: a number of seconds (5, 0.25), a
// string of seconds ("5") or a Go duration string ("1m30s"). It must be positive.
func (a Args) Duration(name string) (time.Duration, error) {
	if !a.Has(name) {
		return 0, a.missing(name)
	}
	return a.OptDuration(name, 0)
}

// OptDuration returns a duration argument, or def if it is missing.
func (a Args) OptDuration(name string, def time.Duration) (time.Duration, error) {
	v := a.m[name]
	if v == nil {
		return def, nil
	}
	const want = "a positive number of seconds or a duration string such as \"1m30s\""
	var d time.Duration
	switch v := v.(type) {
	case string:
		s := strings.TrimSpace(v)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			var ok bool
			if d, ok = seconds(f); !ok {
				return 0, a.Errorf(name, "must be %s, got %q", want, v)
			}
			break
		}
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, a.Errorf(name, "must be %s, got %q", want, v)
		}
	default:
		f, ok := toFloat(v)
		if !ok {
			return 0, a.wrongType(name, want, v)
		}
		if d, ok = seconds(f); !ok {
			return 0, a.Errorf(name, "must be %s, got %v", want, v)
		}
	}
	if d <= 0 {
		return 0, a.Errorf(name, "must be positive, got %s", d)
	}
	return d, nil
}

// maxSeconds keeps durations far from overflowing: no call waits 31 years.
const maxSeconds = 1e9

func seconds(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || math.Abs(f) > maxSeconds {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// Map returns a required map argument.
func (a Args) Map(name string) (map[string]any, error) {
	if !a.Has(name) {
		return nil, a.missing(name)
	}
	return a.OptMap(name)
}

// OptMap returns a map argument, or nil if it is missing.
func (a Args) OptMap(name string) (map[string]any, error) {
	v := a.m[name]
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, a.wrongType(name, "a map", v)
	}
	return m, nil
}

// StringMap returns a required map argument whose values are all strings.
func (a Args) StringMap(name string) (map[string]string, error) {
	if !a.Has(name) {
		return nil, a.missing(name)
	}
	return a.OptStringMap(name)
}

// OptStringMap returns a map-of-strings argument, or nil if it is missing.
func (a Args) OptStringMap(name string) (map[string]string, error) {
	const want = "a map of strings"
	v := a.m[name]
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]string:
		return v, nil
	case map[string]any:
		out := make(map[string]string, len(v))
		for _, k := range sortedKeys(v) {
			s, ok := v[k].(string)
			if !ok {
				return nil, a.Errorf(name, "must be %s, got %s at %q", want, typeName(v[k]), k)
			}
			out[k] = s
		}
		return out, nil
	default:
		return nil, a.wrongType(name, want, v)
	}
}

// List returns a required list argument.
func (a Args) List(name string) ([]any, error) {
	if !a.Has(name) {
		return nil, a.missing(name)
	}
	return a.OptList(name)
}

// OptList returns a list argument, or nil if it is missing.
func (a Args) OptList(name string) ([]any, error) {
	v := a.m[name]
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, a.wrongType(name, "a list", v)
	}
	return l, nil
}

// StringList returns a required list argument whose elements are all strings.
func (a Args) StringList(name string) ([]string, error) {
	if !a.Has(name) {
		return nil, a.missing(name)
	}
	return a.OptStringList(name)
}

// OptStringList returns a list-of-strings argument, or nil if it is missing.
func (a Args) OptStringList(name string) ([]string, error) {
	const want = "a list of strings"
	v := a.m[name]
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []string:
		return v, nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, a.Errorf(name, "must be %s, got %s at index %d", want, typeName(e), i)
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, a.wrongType(name, want, v)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func toInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint:
		return int64(v), v <= math.MaxInt64
	case uint64:
		return int64(v), v <= math.MaxInt64
	case json.Number:
		i, err := v.Int64()
		return i, err == nil
	case float32:
		return toInt(float64(v))
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	if i, ok := toInt(v); ok {
		return float64(i), true
	}
	return 0, false
}
