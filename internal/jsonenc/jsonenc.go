// Package jsonenc writes JSON without encoding/json's reflection, byte for byte as
// json.Marshal writes it: strings escaped as it escapes them (HTML-safe, U+2028 and
// U+2029 escaped, each byte of invalid UTF-8 as U+FFFD), numbers in its format,
// map keys sorted, raw messages validated and compacted, and the same errors where
// it fails. It is the runtime of the encoders internal/cmd/jsongen generates for
// the hot path's types (events.Job, the execution outcomes, workflow.Log); a
// value of a type this package does not know goes through json.Marshal.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

func AppendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// SortedKeys appends m's keys to keys in the order json.Marshal writes them
// (byte-wise). Given a slice of a local array, a small map's keys stay off the heap.
func SortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// maxDepth is how deep appendValue nests before it hands a value to json.Marshal,
// which tells a cycle (an error) from a deep value.
const maxDepth = 1000

// AppendValue appends v, a value of any type, as json.Marshal writes it. The
// values tools and expressions make (map[string]any, []any, string, float64,
// int64, int, bool, nil) and json.RawMessage, []string and time.Time are written
// directly; any other type goes through json.Marshal.
func AppendValue(b []byte, v any) ([]byte, error) {
	return appendValue(b, v, 0)
}

// appendValue appends v at nesting depth. Maps and slices recurse here rather
// than in functions of their own: the compiler then sees that b only flows to the
// result, and a caller's buffer may stay on its stack.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, v), nil
	case float64:
		return AppendFloat(b, v, 64)
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= maxDepth {
			return appendMarshal(b, v)
		}
		var err error
		b = append(b, '{')
		var arr [8]string
		for i, k := range SortedKeys(arr[:0], v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			if b, err = appendValue(b, v[k], depth+1); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= maxDepth {
			return appendMarshal(b, v)
		}
		var err error
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case json.RawMessage:
		if v == nil {
			return append(b, "null"...), nil
		}
		return AppendRaw(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case []string:
		return AppendStrings(b, v), nil
	case time.Time:
		return AppendTime(b, v)
	}
	return appendMarshal(b, v)
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// AppendFloat writes f as encoding/json does: like ES6's number to string, with
// exponents from 1e21 and below 1e-6, and no NaN or infinity.
func AppendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		var v reflect.Value
		if bits == 32 {
			v = reflect.ValueOf(float32(f))
		} else {
			v = reflect.ValueOf(f)
		}
		return b, &json.UnsupportedValueError{Value: v, Str: strconv.FormatFloat(f, 'g', -1, bits)}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 becomes e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func AppendTime(b []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		// MarshalJSON gives the error json.Marshal reports.
		_, err = t.MarshalJSON()
		return b, &json.MarshalerError{Type: reflect.TypeFor[time.Time](), Err: err}
	}
	return append(out, '"'), nil
}

const lowerHex = "0123456789abcdef"

// htmlSafe marks the ASCII bytes a JSON string holds as they are when escaping HTML.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s quoted as encoding/json quotes strings: HTML-safe, with
// U+2028 and U+2029 escaped and each byte of invalid UTF-8 as U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// AppendRaw appends raw JSON as encoding/json writes a json.RawMessage: validated,
// compacted, and with <, >, &, U+2028 and U+2029 escaped. It checks and copies in
// one pass; only invalid input goes through encoding/json, for its error.
//
// The JSON v2 engine's formatter does the same (jsontext.AppendFormat with
// PreserveRawStrings, EscapeForHTML and EscapeForJS), but took 1.3 times as long
// on a job's inputs and an outcome's log (thread CPU time, alternated in one
// process), and a typical job's encoding is a quarter raw message.
func AppendRaw(b, raw []byte) ([]byte, error) {
	out, ok := appendCompact(b, raw)
	if ok {
		return out, nil
	}
	var buf bytes.Buffer
	err := json.Compact(&buf, raw) // the scanner's error, as json.Marshal reports it
	if err == nil {
		err = fmt.Errorf("invalid JSON") // not reached: both accept the same JSON
	}
	return b, &json.MarshalerError{Type: rawMessageType, Err: err}
}

// maxNesting is how deeply encoding/json lets arrays and objects nest.
const maxNesting = 10000

// appendCompact appends src without the whitespace between tokens, escaping as
// encoding/json's compaction does when it escapes HTML, and reports whether src is
// one JSON value, as encoding/json's scanner decides: RFC 8259 grammar, strings
// without control characters (their UTF-8 is not checked), nesting up to
// maxNesting.
func appendCompact(b, src []byte) ([]byte, bool) {
	var open [64]byte // the containers the value is in, '{' or '['; deeper ones grow
	stack := open[:0]
	i, n := 0, len(src)
	value := true // a value comes next (else a comma, a closing bracket or the end)
	for {
		for i < n && jsonSpace(src[i]) {
			i++
		}
		if !value {
			if len(stack) == 0 {
				return b, i == n
			}
			if i == n {
				return b, false
			}
			c, top := src[i], stack[len(stack)-1]
			switch {
			case c == ',':
				b = append(b, ',')
				i++
				if top == '{' {
					var ok bool
					if b, i, ok = appendKey(b, src, i); !ok {
						return b, false
					}
				}
				value = true
			case c == '}' && top == '{' || c == ']' && top == '[':
				b = append(b, c)
				i++
				stack = stack[:len(stack)-1]
			default:
				return b, false
			}
			continue
		}
		if i == n {
			return b, false
		}
		switch c := src[i]; c {
		case '{', '[':
			if len(stack) >= maxNesting {
				return b, false
			}
			stack = append(stack, c)
			b = append(b, c)
			i++
			for i < n && jsonSpace(src[i]) {
				i++
			}
			if i < n && src[i] == c+2 { // '}' or ']': empty
				b = append(b, c+2)
				i++
				stack = stack[:len(stack)-1]
				value = false
				continue
			}
			if c == '{' {
				var ok bool
				if b, i, ok = appendKey(b, src, i); !ok {
					return b, false
				}
			}
			continue // value stays true
		case '"':
			var ok bool
			if b, i, ok = appendQuoted(b, src, i); !ok {
				return b, false
			}
		case 't':
			if !bytes.HasPrefix(src[i:], []byte("true")) {
				return b, false
			}
			b = append(b, "true"...)
			i += 4
		case 'f':
			if !bytes.HasPrefix(src[i:], []byte("false")) {
				return b, false
			}
			b = append(b, "false"...)
			i += 5
		case 'n':
			if !bytes.HasPrefix(src[i:], []byte("null")) {
				return b, false
			}
			b = append(b, "null"...)
			i += 4
		default:
			end := numberEnd(src, i)
			if end < 0 {
				return b, false
			}
			b = append(b, src[i:end]...)
			i = end
		}
		value = false
	}
}

// appendKey appends an object's key, from src[i] on after any whitespace, and
// its colon; i is then where the member's value starts (or whitespace before it).
func appendKey(b, src []byte, i int) ([]byte, int, bool) {
	for i < len(src) && jsonSpace(src[i]) {
		i++
	}
	if i == len(src) || src[i] != '"' {
		return b, i, false
	}
	b, i, ok := appendQuoted(b, src, i)
	if !ok {
		return b, i, false
	}
	for i < len(src) && jsonSpace(src[i]) {
		i++
	}
	if i == len(src) || src[i] != ':' {
		return b, i, false
	}
	return append(b, ':'), i + 1, true
}

// appendQuoted appends the string that starts at src[i] (a quote) and returns
// the index after it.
func appendQuoted(b, src []byte, i int) ([]byte, int, bool) {
	start := i
	i++
	for i < len(src) {
		c := src[i]
		switch {
		case c == '"':
			i++
			return append(b, src[start:i]...), i, true
		case c == '\\':
			if i+1 == len(src) {
				return b, i, false
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) || !isHex(src[i+5]) {
					return b, i, false
				}
				i += 6
			default:
				return b, i, false
			}
		case c < ' ':
			return b, i, false
		case c == '<' || c == '>' || c == '&':
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			i++
			start = i
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[src[i+2]&0xF])
			i += 3
			start = i
		default:
			i++
		}
	}
	return b, i, false
}

// numberEnd returns the index after the number that starts at src[i], or -1 if
// none does.
func numberEnd(src []byte, i int) int {
	n := len(src)
	if i < n && src[i] == '-' {
		i++
	}
	switch {
	case i == n:
		return -1
	case src[i] == '0':
		i++
	case '1' <= src[i] && src[i] <= '9':
		i++
		for i < n && jsonDigit(src[i]) {
			i++
		}
	default:
		return -1
	}
	if i < n && src[i] == '.' {
		i++
		if i == n || !jsonDigit(src[i]) {
			return -1
		}
		for i < n && jsonDigit(src[i]) {
			i++
		}
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i == n || !jsonDigit(src[i]) {
			return -1
		}
		for i < n && jsonDigit(src[i]) {
			i++
		}
	}
	return i
}

func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func jsonDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// ValueSize guesses the length of v's encoding without walking into it, for a
// buffer's size.
func ValueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 2 + len(v) + len(v)/4
	case json.RawMessage:
		return len(v)
	case bool, nil:
		return 5
	}
	return 24
}

// MapSize guesses the length of m's encoding from its members, for a buffer's
// size.
func MapSize(m map[string]any) int {
	n := 2
	for k, v := range m {
		n += 4 + len(k) + ValueSize(v)
	}
	return n
}
