package events

import (
	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonx"
)

// DecodeInputs decodes a skill's inputs, a JSON object, into *m as
// jsonx.Unmarshal(data, m) does: the same value, and an error exactly when it errs
// (its error). Like DecodeJob, it reads well-formed JSON itself (internal/jsondec)
// and leaves anything it is not certain of (a repeated key, invalid UTF-8, a
// number out of float64's range, deep nesting, a map already made) to jsonx.
func DecodeInputs(data []byte, m *map[string]any) error {
	if *m == nil {
		d := jsondec.New(data)
		if d.Peek() == '{' && d.AnyMap(m) && d.End() {
			return nil
		}
		*m = nil
	}
	return jsonx.Unmarshal(data, m)
}

// DecodeValue decodes any JSON value into *v as jsonx.Unmarshal(data, v) does, the
// same way as DecodeInputs: objects become map[string]any, arrays []any, numbers
// float64.
func DecodeValue(data []byte, v *any) error {
	if *v == nil {
		d := jsondec.New(data)
		if x, ok := d.Value(); ok && d.End() {
			*v = x
			return nil
		}
	}
	// Through a copy, so that v does not escape and the caller's variable stays
	// on its stack when the fast path decodes.
	x := *v
	err := jsonx.Unmarshal(data, &x)
	*v = x
	return err
}
