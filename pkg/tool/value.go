package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// CheckValue reports whether v is a JSON-like value: nil, bool, string (valid UTF-8),
// int64, finite float64, []any or map[string]any of JSON-like values. Tool results
// must be JSON-like, so they marshal with encoding/json and decode back unchanged.
func CheckValue(v any) error {
	return checkValue(v, "")
}

func checkValue(v any, path string) error {
	switch v := v.(type) {
	case nil, bool, int64:
		return nil
	case string:
		if !utf8.ValidString(v) {
			return fmt.Errorf("%sstring is not valid UTF-8", at(path))
		}
		return nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%snumber %v has no JSON form", at(path), v)
		}
		return nil
	case []any:
		for i, e := range v {
			if err := checkValue(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for k, e := range v {
			if !utf8.ValidString(k) {
				return fmt.Errorf("%skey %q is not valid UTF-8", at(path), k)
			}
			if err := checkValue(e, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%s%T is not a JSON-like value", at(path), v)
	}
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return strings.TrimPrefix(path, ".") + ": "
}

// DecodeJSON decodes exactly one JSON value from data into JSON-like values:
// integers that fit become int64, other numbers float64. Tool providers use it
// for whatever JSON they receive.
func DecodeJSON(data []byte) (any, error) {
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
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return normalizeNumbers(v)
}

func normalizeNumbers(v any) (any, error) {
	var err error
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
			if v[i], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k, e := range v {
			if v[k], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// MarshalJSON encodes v as JSON without escaping <, > and & (tool arguments and
// results are data, not HTML) and without a trailing newline.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// text makes output bytes a JSON-safe string: invalid UTF-8 becomes U+FFFD.
func text(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// excerpt returns a short, single-line piece of b for error messages: its first
// (or, fromEnd, last) n bytes, marked with "…" where more was cut off or, with
// elided, was already missing from b.
func excerpt(b []byte, n int, fromEnd, elided bool) string {
	cut := len(b) > n || elided
	if len(b) > n {
		if fromEnd {
			b = b[len(b)-n:]
		} else {
			b = b[:n]
		}
	}
	s := strings.Join(strings.Fields(text(b)), " ")
	if cut {
		// The cut may have split a rune, which text turned into U+FFFD; drop it.
		if fromEnd {
			s = "…" + strings.TrimPrefix(s, "\uFFFD")
		} else {
			s = strings.TrimSuffix(s, "\uFFFD") + "…"
		}
	}
	return s
}

// typeName names the JSON type of an argument value for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		return "number"
	case []any, []string:
		return "list"
	case map[string]any, map[string]string:
		return "map"
	default:
		return fmt.Sprintf("%T", v)
	}
}
