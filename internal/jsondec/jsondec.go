// Package jsondec is the runtime of the JSON decoders that internal/cmd/jsongen
// generates for the hot path's wire types (events.Job and the types in it): a
// tokenizer over one copy of the document, whose strings are slices of that
// copy, so that a job decodes with one allocation for its text rather than one
// per string.
//
// It decodes exactly as encoding/json would, or not at all: every method reports
// false for anything it does not read exactly as encoding/json reads it — a key
// in another case, a repeated key, a number not of its field's type, invalid
// UTF-8 or an escaped lone surrogate (which encoding/json replaces), nesting
// deeper than MaxDepth, malformed JSON — and the caller then hands the whole
// document to internal/jsonx, whose result (its error included) stands.
//
// SkipValue is the same tokenizer checking a value in place: pkg/bus takes a
// structured-mode event's data as its bytes once it is well-formed.
package jsondec

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/skillbus/skillbus/internal/jsonx"
)

// MaxDepth bounds how deeply objects and arrays nest; deeper documents are left
// to jsonx.
const MaxDepth = 64

// Decoder reads JSON from s at i.
type Decoder struct {
	s     string
	i     int
	depth int // objects and arrays open
	max   int // how many may be
	// anySurrogate: an escaped lone surrogate is read as well-formed JSON,
	// which it is; only a decoder of strings must refuse it (encoding/json
	// replaces it).
	anySurrogate bool
}

// New returns a decoder of data. It copies data once; the strings it decodes are
// slices of that copy, and so keep it alive.
func New(data []byte) Decoder { return Decoder{s: string(data), max: MaxDepth} }

// Over returns a decoder that reads data in place, without New's copy. The keys
// and strings it decodes are slices of data: they are good only while data is
// unchanged, so the caller must keep none of them (copy what it keeps) and not
// change data while it decodes. pkg/bus reads each publish's acknowledgement so,
// keeping only a bool.
func Over(data []byte) Decoder {
	return Decoder{s: unsafe.String(unsafe.SliceData(data), len(data)), max: MaxDepth}
}

// SkipValue returns the index after the JSON value that starts at data[i]
// (after any white space), checking that it is well-formed (RFC 8259, in valid
// UTF-8) and nests at most maxDepth deep. It reads data in place, without a
// copy.
func SkipValue(data []byte, i, maxDepth int) (int, bool) {
	d := Decoder{s: unsafe.String(unsafe.SliceData(data), len(data)), i: i, max: maxDepth, anySurrogate: true}
	ok := d.Skip()
	return d.i, ok
}

func (d *Decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek is the next byte after white space, 0 at the end.
func (d *Decoder) Peek() byte {
	if d.i < len(d.s) && d.s[d.i] > ' ' {
		return d.s[d.i]
	}
	d.ws()
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

// End reports that nothing but white space is left.
func (d *Decoder) End() bool {
	d.ws()
	return d.i == len(d.s)
}

func (d *Decoder) literal(lit string) bool {
	if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// Null consumes a null; false (and nothing consumed) for anything else.
func (d *Decoder) Null() bool {
	return d.Peek() == 'n' && d.literal("null")
}

// open enters an object or array that starts with c.
func (d *Decoder) open(c byte) bool {
	if d.Peek() != c || d.depth >= d.max {
		return false
	}
	d.i++
	d.depth++
	return true
}

// Object reads an object, calling field with each key's text as it is written
// (any escape left in) after its colon; field reads the value. Struct decoders
// take only their fields' exact names: encoding/json matches others
// case-insensitively, with Unicode folding, which is left to jsonx.
func (d *Decoder) Object(field func(key string) bool) bool {
	if !d.open('{') {
		return false
	}
	if d.Peek() == '}' {
		d.i++
		d.depth--
		return true
	}
	for {
		if d.Peek() != '"' {
			return false
		}
		start, end, _, ok := d.scanString()
		if !ok || d.Peek() != ':' {
			return false
		}
		d.i++
		if !field(d.s[start:end]) {
			return false
		}
		switch d.Peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling elem for each element (elem reads it).
func (d *Decoder) Array(elem func() bool) bool {
	if !d.open('[') {
		return false
	}
	if d.Peek() == ']' {
		d.i++
		d.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.Peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// Str reads a string; null leaves *p as it is, as encoding/json does.
func (d *Decoder) Str(p *string) bool {
	if d.Null() {
		return true
	}
	s, ok := d.String()
	*p = s
	return ok
}

// String reads a string value.
func (d *Decoder) String() (string, bool) {
	start, end, esc, ok := d.scanString()
	if !ok {
		return "", false
	}
	if !esc {
		return d.s[start:end], true
	}
	return unescape(d.s[start:end]), true
}

// scanString reads a string and returns where its text is; esc says it has
// escapes. Invalid UTF-8 and escaped lone surrogates are refused.
func (d *Decoder) scanString() (start, end int, esc, ok bool) {
	if d.Peek() != '"' {
		return 0, 0, false, false
	}
	start = d.i + 1
	for k := start; k < len(d.s); {
		c := d.s[k]
		if plain[c] {
			k++
			continue
		}
		switch {
		case c == '"':
			d.i = k + 1
			return start, k, esc, true
		case c == '\\':
			esc = true
			if k+1 == len(d.s) {
				return 0, 0, false, false
			}
			switch d.s[k+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				k += 2
			case 'u':
				r, ok := hex4(d.s, k+2)
				if !ok {
					return 0, 0, false, false
				}
				k += 6
				if utf16.IsSurrogate(r) && !d.anySurrogate {
					r2, ok := rune(0), k+1 < len(d.s) && d.s[k] == '\\' && d.s[k+1] == 'u'
					if ok {
						r2, ok = hex4(d.s, k+2)
					}
					if !ok || utf16.DecodeRune(r, r2) == utf8.RuneError {
						return 0, 0, false, false
					}
					k += 6
				}
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		case c < utf8.RuneSelf:
			k++
		default:
			r, n := utf8.DecodeRuneInString(d.s[k:])
			if r == utf8.RuneError && n == 1 {
				return 0, 0, false, false
			}
			k += n
		}
	}
	return 0, 0, false, false
}

// plain is the bytes a string holds as they are: not a quote, a backslash, a
// control character or part of a multi-byte character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescape is the text of a string scanString checked.
func unescape(s string) string {
	var tmp [128]byte
	b := tmp[:0]
	for k := 0; k < len(s); {
		if s[k] != '\\' {
			b = append(b, s[k])
			k++
			continue
		}
		switch e := s[k+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, _ := hex4(s, k+2)
			k += 6
			if utf16.IsSurrogate(r) {
				r2, _ := hex4(s, k+2)
				r = utf16.DecodeRune(r, r2)
				k += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // " \ /
			b = append(b, e)
		}
		k += 2
	}
	return string(b)
}

func hex4(s string, k int) (rune, bool) {
	if k+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[k : k+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a JSON number and returns its text; integer refuses one with a
// fraction or an exponent.
func (d *Decoder) number(integer bool) (string, bool) {
	d.ws()
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return "", false
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if integer || d.digits() == 0 {
			return "", false
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if integer || d.digits() == 0 {
			return "", false
		}
	}
	return d.s[start:d.i], true
}

func (d *Decoder) digits() int {
	n := 0
	for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// Int reads an integer into *p; null leaves it as it is.
func Int[T ~int | ~int8 | ~int16 | ~int32 | ~int64](d *Decoder, p *T) bool {
	if d.Null() {
		return true
	}
	s, ok := d.number(true)
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(s, 10, int(unsafe.Sizeof(*p))*8)
	*p = T(n)
	return err == nil
}

// Uint reads an unsigned integer into *p; null leaves it as it is.
func Uint[T ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64](d *Decoder, p *T) bool {
	if d.Null() {
		return true
	}
	s, ok := d.number(true)
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(s, 10, int(unsafe.Sizeof(*p))*8)
	*p = T(n)
	return err == nil
}

// Float reads a number into *p; null leaves it as it is.
func Float[T ~float32 | ~float64](d *Decoder, p *T) bool {
	if d.Null() {
		return true
	}
	s, ok := d.number(false)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(s, int(unsafe.Sizeof(*p))*8)
	*p = T(f)
	return err == nil
}

// Bool reads a boolean into *p; null leaves it as it is.
func (d *Decoder) Bool(p *bool) bool {
	switch d.Peek() {
	case 't':
		*p = true
		return d.literal("true")
	case 'f':
		*p = false
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	return false
}

// Raw reads any JSON value and keeps a copy of its text, as a json.RawMessage
// field does (null included).
func (d *Decoder) Raw(p *[]byte) bool {
	d.ws()
	start := d.i
	if !d.Skip() {
		return false
	}
	*p = []byte(d.s[start:d.i])
	return true
}

// Skip reads any JSON value, checking that it is well-formed.
func (d *Decoder) Skip() bool {
	switch c := d.Peek(); c {
	case '{':
		return d.Object(func(string) bool { return d.Skip() })
	case '[':
		return d.Array(d.Skip)
	case '"':
		_, _, _, ok := d.scanString()
		return ok
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		_, ok := d.number(false)
		return ok
	}
}

// Once marks bit of seen, false if it was already: a repeated key is left to
// jsonx.
func Once(seen *uint64, bit uint64) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// Ptr reads a value into a new *p, elem reading it; null leaves *p alone.
func Ptr[T any](d *Decoder, p **T, elem func(*T) bool) bool {
	if d.Null() {
		return true
	}
	*p = new(T)
	return elem(*p)
}

// Slice reads an array into *p, elem reading each element; null leaves *p
// alone. The slice is allocated once, of the array's length (an empty array
// makes an empty slice, not nil, as with encoding/json).
func Slice[T any](d *Decoder, p *[]T, elem func() (T, bool)) bool {
	if d.Null() {
		return true
	}
	var first [4]T // the first elements; more holds the rest
	var more []T
	n := 0
	ok := d.Array(func() bool {
		v, ok := elem()
		if n < len(first) {
			first[n] = v
		} else {
			more = append(more, v)
		}
		n++
		return ok
	})
	s := make([]T, n)
	copy(s[copy(s, first[:min(n, len(first))]):], more)
	*p = s
	return ok
}

// Map reads an object into a new map *p, elem reading each value; null leaves
// *p alone. A repeated key is left to jsonx.
func Map[V any](d *Decoder, p *map[string]V, elem func() (V, bool)) bool {
	if d.Null() {
		return true
	}
	if d.Peek() != '{' {
		return false
	}
	m := map[string]V{}
	if !d.members(func(k string) bool {
		if _, dup := m[k]; dup {
			return false
		}
		v, ok := elem()
		m[k] = v
		return ok
	}) {
		return false
	}
	*p = m
	return true
}

// members reads an object whose keys are map keys: unescaped.
func (d *Decoder) members(member func(key string) bool) bool {
	if !d.open('{') {
		return false
	}
	if d.Peek() == '}' {
		d.i++
		d.depth--
		return true
	}
	for {
		k, ok := d.String()
		if !ok || d.Peek() != ':' {
			return false
		}
		d.i++
		if !member(k) {
			return false
		}
		switch d.Peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// Any reads any JSON value into *p as encoding/json decodes it into an
// interface: objects become map[string]any, arrays []any, numbers float64.
func (d *Decoder) Any(p *any) bool {
	v, ok := d.Value()
	*p = v
	return ok
}

// AnyMap reads an object into *p as encoding/json decodes it into a
// map[string]any; null leaves *p alone.
func (d *Decoder) AnyMap(p *map[string]any) bool {
	if d.Null() {
		return true
	}
	if d.Peek() != '{' {
		return false
	}
	v, ok := d.Value()
	if ok {
		*p = v.(map[string]any)
	}
	return ok
}

// Value reads any JSON value as encoding/json decodes it into an interface.
func (d *Decoder) Value() (any, bool) {
	switch d.Peek() {
	case '{':
		m := map[string]any{}
		ok := d.members(func(k string) bool {
			if _, dup := m[k]; dup {
				return false
			}
			v, ok := d.Value()
			m[k] = v
			return ok
		})
		return m, ok
	case '[':
		a := []any{}
		ok := d.Array(func() bool {
			v, ok := d.Value()
			a = append(a, v)
			return ok
		})
		return a, ok
	case '"':
		return d.String()
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

// Other reads a value of a type the generator does not read itself with jsonx.
// Decoded on its own into a zero value, a member's value comes out as it does
// inside the whole document; if it fails, the caller hands the document to
// jsonx, whose error then stands.
func Other[T any](d *Decoder, p *T) bool {
	d.ws()
	start := d.i
	return d.Skip() && jsonx.Unmarshal([]byte(d.s[start:d.i]), p) == nil
}
