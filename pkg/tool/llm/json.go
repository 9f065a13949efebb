package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeValue decodes exactly one JSON value into JSON-like values (see
// tool.CheckValue): integers that fit become int64, other numbers float64.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty JSON document")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return normalize(v)
}

func normalize(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", v)
		}
		return f, nil
	case []any:
		for i, e := range v {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
	case map[string]any:
		for k, e := range v {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			v[k] = n
		}
	}
	return v, nil
}

// marshal encodes v as JSON without escaping <, > and & (tool arguments and
// results are data, not HTML) and without a trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
