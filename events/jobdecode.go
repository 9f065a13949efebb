package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/skillbus/skillbus/internal/jsonx"
)

// DecodeJob decodes a job's data into j, as jsonx.Unmarshal (encoding/json's
// semantics) would: the same value, and an error exactly when it errs (its error).
//
// A worker decodes every job it runs, and the general decoder's reflection is a
// good part of that cost. So the shape skillbus writes — the lower-case keys of Job
// and its nested types, each once, in well-formed UTF-8 — is read by hand (but for
// the fields only retries, confirmations and repairs carry, which jsonx reads), and
// anything else (a key in another case or unknown, a repeated key, a number that is
// not of its field's type, trailing data, a j not zero...) goes to jsonx.Unmarshal,
// whose result it then is.
//
// A job with a route (Job.Route, on the jobs of a plan) is left to jsonx: its
// readers are people's tools, not the hot path. See DecodeJobWithoutRoute.
func DecodeJob(data []byte, j *Job) error {
	if decodeJobFast(data, j, false) {
		return nil
	}
	return jsonx.Unmarshal(data, j)
}

// DecodeJobWithoutRoute is DecodeJob for a worker: it does not read the job's
// route, which a worker has no use for and which costs more to decode than the
// rest of the job, and leaves j.Route as it was. The route must be well-formed
// JSON, of any shape.
func DecodeJobWithoutRoute(data []byte, j *Job) error {
	if decodeJobFast(data, j, true) {
		return nil
	}
	err := jsonx.Unmarshal(data, &jobWithoutRoute{Job: j})
	// The error names the job's type as DecodeJob's does, not the wrapper's.
	var te *jsonv1.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Struct == "jobWithoutRoute" {
			te.Struct = "Job"
		}
		if te.Type == reflect.TypeFor[jobWithoutRoute]() {
			te.Type = reflect.TypeFor[Job]()
		}
	}
	return err
}

// jobWithoutRoute decodes into Job all but its route, which its own Route field,
// less deep than Job's, takes instead.
type jobWithoutRoute struct {
	*Job
	Route json.RawMessage `json:"route"`
}

// decodeJobFast decodes data into j if it has the shape DecodeJob reads by hand and
// j is zero; it reports whether it did. When it did not, j is left as it was. With
// skipRoute, a route member is skipped; without, it is left to jsonx.
func decodeJobFast(data []byte, j *Job, skipRoute bool) bool {
	if !jobIsZero(j) {
		return false
	}
	// One copy of the document, and the strings decoded are slices of it: one
	// allocation rather than one per string, for a document no larger than the job
	// that keeps it.
	d := jsonDecoder{s: string(data)}
	if d.job(j, skipRoute) && d.end() {
		return true
	}
	*j = Job{}
	return false
}

// jobIsZero: decoding into a zero Job is decoding into a new one; into anything
// else encoding/json merges, which only jsonx does.
func jobIsZero(j *Job) bool {
	return j.ExecutionID == "" && j.ActivationID == "" && j.Skill == SkillRef{} && j.Inputs == nil &&
		j.Trigger == TriggerRef{} && j.Fallback == nil && j.History == nil && j.Answers == nil &&
		j.Depth == 0 && j.Repair == nil && j.Together == nil && !j.Live && j.Route == nil
}

// jsonDecoder reads JSON from s at i. Its methods report false for anything they do
// not read exactly as encoding/json would (the caller then leaves it to jsonx),
// which includes malformed JSON.
type jsonDecoder struct {
	s string
	i int
}

// maxDepth bounds the nesting of the raw values the decoder skips over; deeper
// ones are left to jsonx.
const maxDepth = 64

func (d *jsonDecoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (d *jsonDecoder) peek() byte {
	if d.i < len(d.s) && d.s[d.i] > ' ' {
		return d.s[d.i]
	}
	d.ws()
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

// end: nothing but white space is left.
func (d *jsonDecoder) end() bool {
	d.ws()
	return d.i == len(d.s)
}

func (d *jsonDecoder) literal(lit string) bool {
	if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// null consumes a null; false (and nothing consumed) for anything else.
func (d *jsonDecoder) null() bool {
	return d.peek() == 'n' && d.literal("null")
}

// object reads an object, calling field with each key's text as it is written (any
// escape left in) after its colon; field reads the value. The struct decoders
// take only their fields' exact names: encoding/json matches the others
// case-insensitively, with Unicode folding, which is left to jsonx.
func (d *jsonDecoder) object(field func(key string) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		start, end, _, ok := d.scanString()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !field(d.s[start:end]) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem for each element (elem reads it); empty
// reports an empty one, for which encoding/json makes an empty, non-nil slice.
func (d *jsonDecoder) array(elem func() bool) (empty, ok bool) {
	if d.peek() != '[' {
		return false, false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return true, true
	}
	for {
		if !elem() {
			return false, false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return false, true
		default:
			return false, false
		}
	}
}

// str reads a string; null leaves *p as it is, as encoding/json does.
func (d *jsonDecoder) str(p *string) bool {
	if d.null() {
		return true
	}
	s, ok := d.string()
	*p = s
	return ok
}

// string reads a string value. Invalid UTF-8 and escaped lone surrogates, which
// encoding/json replaces with U+FFFD, are refused.
func (d *jsonDecoder) string() (string, bool) {
	start, end, esc, ok := d.scanString()
	if !ok {
		return "", false
	}
	if !esc {
		return d.s[start:end], true
	}
	return unescape(d.s[start:end]), true
}

// scanString reads a string and returns where its text is; esc says it has escapes.
func (d *jsonDecoder) scanString() (start, end int, esc, ok bool) {
	if d.peek() != '"' {
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
				if utf16.IsSurrogate(r) {
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
func (d *jsonDecoder) number(integer bool) (string, bool) {
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

func (d *jsonDecoder) digits() int {
	n := 0
	for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

func (d *jsonDecoder) uint(p *uint64) bool {
	if d.null() {
		return true
	}
	s, ok := d.number(true)
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	*p = n
	return err == nil
}

func (d *jsonDecoder) int(p *int) bool {
	if d.null() {
		return true
	}
	s, ok := d.number(true)
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	*p = int(n)
	return err == nil
}

func (d *jsonDecoder) float(p *float64) bool {
	if d.null() {
		return true
	}
	s, ok := d.number(false)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	*p = f
	return err == nil
}

func (d *jsonDecoder) bool(p *bool) bool {
	switch d.peek() {
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

// raw reads any JSON value and returns a copy of its text, as a json.RawMessage
// field keeps it.
func (d *jsonDecoder) raw(p *[]byte) bool {
	d.ws()
	start := d.i
	if !d.skip(0) {
		return false
	}
	*p = []byte(d.s[start:d.i])
	return true
}

// skip reads any JSON value, checking it is well-formed.
func (d *jsonDecoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := d.peek(); c {
	case '{':
		return d.object(func(string) bool { return d.skip(depth + 1) })
	case '[':
		_, ok := d.array(func() bool { return d.skip(depth + 1) })
		return ok
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

// once marks field bit of seen, false if it was already: a repeated key is left to
// jsonx.
func once(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func (d *jsonDecoder) job(j *Job, skipRoute bool) bool {
	var seen uint32
	return d.object(func(k string) bool {
		switch k {
		case "execution_id":
			return once(&seen, 1<<0) && d.str(&j.ExecutionID)
		case "activation_id":
			return once(&seen, 1<<1) && d.str(&j.ActivationID)
		case "skill":
			return once(&seen, 1<<2) && d.skillRef(&j.Skill)
		case "inputs":
			return once(&seen, 1<<3) && d.raw((*[]byte)(&j.Inputs))
		case "trigger":
			return once(&seen, 1<<4) && d.triggerRef(&j.Trigger)
		case "fallback":
			return once(&seen, 1<<5) && d.skillRefs(&j.Fallback)
		case "history":
			return once(&seen, 1<<6) && general(d, &j.History)
		case "answers":
			return once(&seen, 1<<7) && general(d, &j.Answers)
		case "depth":
			return once(&seen, 1<<8) && d.int(&j.Depth)
		case "repair":
			return once(&seen, 1<<9) && general(d, &j.Repair)
		case "together":
			return once(&seen, 1<<10) && d.together(&j.Together)
		case "live":
			return once(&seen, 1<<11) && d.bool(&j.Live)
		case "route":
			return skipRoute && once(&seen, 1<<12) && d.skip(0)
		}
		return false
	})
}

func (d *jsonDecoder) skillRef(r *SkillRef) bool {
	if d.null() {
		return true
	}
	var seen uint32
	return d.object(func(k string) bool {
		switch k {
		case "name":
			return once(&seen, 1<<0) && d.str(&r.Name)
		case "version":
			return once(&seen, 1<<1) && d.str(&r.Version)
		case "digest":
			return once(&seen, 1<<2) && d.str(&r.Digest)
		case "pool":
			return once(&seen, 1<<3) && d.str(&r.Pool)
		case "execution_id":
			return once(&seen, 1<<4) && d.str(&r.ExecutionID)
		case "source":
			return once(&seen, 1<<5) && d.str(&r.Source)
		case "score":
			return once(&seen, 1<<6) && d.float(&r.Score)
		}
		return false
	})
}

func (d *jsonDecoder) triggerRef(r *TriggerRef) bool {
	if d.null() {
		return true
	}
	var seen uint32
	return d.object(func(k string) bool {
		switch k {
		case "id":
			return once(&seen, 1<<0) && d.str(&r.ID)
		case "source":
			return once(&seen, 1<<1) && d.str(&r.Source)
		case "type":
			return once(&seen, 1<<2) && d.str(&r.Type)
		case "subject":
			return once(&seen, 1<<3) && d.str(&r.Subject)
		case "seq":
			return once(&seen, 1<<4) && d.uint(&r.Seq)
		}
		return false
	})
}

// slice reads an array into *p, elem reading each element; null leaves *p alone.
// The slice is allocated once, of the array's length (an empty array makes an
// empty slice, not nil, as with encoding/json).
func slice[T any](d *jsonDecoder, p *[]T, elem func() (T, bool)) bool {
	if d.null() {
		return true
	}
	var first [4]T // the first elements; more holds the rest
	var more []T
	n := 0
	_, ok := d.array(func() bool {
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

func (d *jsonDecoder) skillRefs(p *[]SkillRef) bool {
	return slice(d, p, func() (r SkillRef, ok bool) { return r, d.skillRef(&r) })
}

func (d *jsonDecoder) strings(p *[]string) bool {
	return slice(d, p, func() (s string, ok bool) { return s, d.str(&s) })
}

func (d *jsonDecoder) together(p *[][]string) bool {
	return slice(d, p, func() (g []string, ok bool) { return g, d.strings(&g) })
}

// general reads a value into *p with jsonx: the fields only some jobs carry
// (a retry's history, a confirmation's answers, a repair), whose shapes are not
// worth reading by hand. Decoded on its own into a zero value, a member's value
// comes out as it does inside the whole document; if it fails, the document goes
// to jsonx, whose error then stands.
func general[T any](d *jsonDecoder, p *T) bool {
	d.ws()
	start := d.i
	return d.skip(0) && jsonx.Unmarshal([]byte(d.s[start:d.i]), p) == nil
}
