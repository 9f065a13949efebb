package skill

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// A Skill crosses process boundaries as JSON (the catalog in KV). Free-form values
// (metadata, step args, input defaults and enums, outputs) hold YAML integers as
// int; plain encoding/json would read them back as float64, so a workflow's
// `count: 3` would reach the engine as 3.0. These UnmarshalJSON methods read such
// values with integers kept as int.

// UnmarshalJSON reads a Skill, keeping integers in Metadata as int.
func (s *Skill) UnmarshalJSON(b []byte) error {
	type plain Skill
	var p plain
	if err := decodeNumbers(b, &p); err != nil {
		return err
	}
	p.Metadata = fixNumbers(p.Metadata).(map[string]any)
	*s = Skill(p)
	return nil
}

// UnmarshalJSON reads a Subagent, keeping integers in Metadata as int.
func (a *Subagent) UnmarshalJSON(b []byte) error {
	type plain Subagent
	var p plain
	if err := decodeNumbers(b, &p); err != nil {
		return err
	}
	p.Metadata = fixNumbers(p.Metadata).(map[string]any)
	*a = Subagent(p)
	return nil
}

// UnmarshalJSON reads an Input, keeping integers in Default and Enum as int.
func (in *Input) UnmarshalJSON(b []byte) error {
	type plain Input
	var p plain
	if err := decodeNumbers(b, &p); err != nil {
		return err
	}
	p.Default = fixNumbers(p.Default)
	for i, v := range p.Enum {
		p.Enum[i] = fixNumbers(v)
	}
	*in = Input(p)
	return nil
}

// UnmarshalJSON reads a Step, keeping integers in Args as int.
func (st *Step) UnmarshalJSON(b []byte) error {
	type plain Step
	var p plain
	if err := decodeNumbers(b, &p); err != nil {
		return err
	}
	p.Args = fixNumbers(p.Args).(map[string]any)
	*st = Step(p)
	return nil
}

// UnmarshalJSON reads an Output, keeping integers in Value as int.
func (o *Output) UnmarshalJSON(b []byte) error {
	type plain Output
	var p plain
	if err := decodeNumbers(b, &p); err != nil {
		return err
	}
	p.Value = fixNumbers(p.Value)
	*o = Output(p)
	return nil
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// fixNumbers turns json.Numbers into int when they are integers that fit, else
// float64, in place where it can.
func fixNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.Atoi(x.String()); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fixNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = fixNumbers(e)
		}
		return x
	}
	return v
}
