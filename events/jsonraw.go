package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// appendRaw appends raw JSON as encoding/json writes a json.RawMessage: validated,
// compacted, and with <, >, &, U+2028 and U+2029 escaped. It checks and copies in
// one pass; only invalid input goes through encoding/json, for its error.
func appendRaw(b, raw []byte) ([]byte, error) {
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

// rawMaxNesting is how deeply encoding/json lets arrays and objects nest.
const rawMaxNesting = 10000

// appendCompact appends src without the whitespace between tokens, escaping as
// encoding/json's compaction does when it escapes HTML, and reports whether src is
// one JSON value, as encoding/json's scanner decides: RFC 8259 grammar, strings
// without control characters (their UTF-8 is not checked), nesting up to
// rawMaxNesting.
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
			if len(stack) >= rawMaxNesting {
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
