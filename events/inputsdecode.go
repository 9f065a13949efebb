package events

import (
	"strconv"

	"github.com/skillbus/skillbus/internal/jsonx"
)

// DecodeInputs decodes a skill's inputs, a JSON object, into *m as
// jsonx.Unmarshal(data, m) does: the same value, and an error exactly when it errs
// (its error). Like DecodeJob, it reads well-formed JSON by hand and leaves
// anything it is not certain of (a repeated key, invalid UTF-8, a number out of
// float64's range, deep nesting, a map already made) to jsonx.
func DecodeInputs(data []byte, m *map[string]any) error {
	if *m == nil {
		d := jsonDecoder{s: string(data)}
		if d.peek() == '{' {
			if v, ok := d.value(0); ok && d.end() {
				*m = v.(map[string]any)
				return nil
			}
		}
	}
	return jsonx.Unmarshal(data, m)
}

// DecodeValue decodes any JSON value into *v as jsonx.Unmarshal(data, v) does, the
// same way as DecodeInputs: objects become map[string]any, arrays []any, numbers
// float64.
func DecodeValue(data []byte, v *any) error {
	if *v == nil {
		d := jsonDecoder{s: string(data)}
		if x, ok := d.value(0); ok && d.end() {
			*v = x
			return nil
		}
	}
	return jsonx.Unmarshal(data, v)
}

// value reads any JSON value as encoding/json decodes it into an interface.
func (d *jsonDecoder) value(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	switch d.peek() {
	case '{':
		d.i++
		m := map[string]any{}
		if d.peek() == '}' {
			d.i++
			return m, true
		}
		for {
			k, ok := d.string()
			if !ok || d.peek() != ':' {
				return nil, false
			}
			d.i++
			if _, dup := m[k]; dup {
				return nil, false
			}
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			switch d.peek() {
			case ',':
				d.i++
			case '}':
				d.i++
				return m, true
			default:
				return nil, false
			}
		}
	case '[':
		a := []any{}
		_, ok := d.array(func() bool {
			v, ok := d.value(depth + 1)
			a = append(a, v)
			return ok
		})
		return a, ok
	case '"':
		return d.string()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	}
	s, ok := d.number(false)
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}
