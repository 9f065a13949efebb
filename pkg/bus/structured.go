package bus

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// Jobs travel as structured-mode CloudEvents: the whole event, attributes and data,
// is one JSON document, and the message has a single header (Content-Type
// application/cloudevents+json) besides the create-only check. A job is a command
// to one worker, which reads its data anyway; as binary-mode headers, its five or
// six attributes and the routing decision were each encoded by the publisher's
// client, scanned by the server and parsed into a map by the worker. Events keep
// binary mode, where subscribers filter and read their attributes from headers.

// appendStructured appends e with data (a JSON value) as a structured-mode JSON
// CloudEvent. Empty extensions are left out; data goes last.
func appendStructured(b []byte, e Event, data []byte, exts ...[2]string) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, e.Source)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	for _, kv := range exts {
		if kv[1] == "" {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, kv[0]...)
		b = append(b, '"', ':')
		b = appendJSONString(b, kv[1])
	}
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control characters and <, >, & (HTML-safe, as encoding/json)
				b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigit[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

// decodeStructuredFast reads a structured-mode event without the SDK when Decode
// would accept it and give the same attributes and data: Content-Type exactly
// application/cloudevents+json and no ce- headers; a compact JSON object (no
// whitespace between tokens) whose attributes are strings of printable ASCII with
// no escapes; specversion 1.0; non-blank id, source and type; a source that reads
// back unchanged; a valid time if any; no data content type other than
// application/json; no dataschema or data_base64; each key once; data a JSON
// object or array, taken as its exact bytes. ok is false otherwise, and Decode
// decides.
func decodeStructuredFast(m *nats.Msg) (_ *Binary, ok bool) {
	ct := false
	for k, v := range m.Header {
		if len(v) == 0 {
			continue
		}
		switch {
		case k == HeaderContentType:
			if v[0] != structuredJSON {
				return nil, false
			}
			ct = true
		case strings.EqualFold(k, HeaderContentType), len(k) >= 3 && strings.EqualFold(k[:3], ceHeaderPrefix):
			return nil, false
		}
	}
	d := m.Data
	if !ct || len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' {
		return nil, false
	}
	b := &Binary{}
	spec, data := false, false
	var seen [16]string // keys read so far, to refuse a repeated one
	nseen := 0
	i := 1
	for {
		// "key":
		if i >= len(d) || d[i] != '"' {
			return nil, false
		}
		key, next, ok := plainString(d, i)
		if !ok || next >= len(d) || d[next] != ':' {
			return nil, false
		}
		for _, s := range seen[:nseen] {
			if s == key {
				return nil, false
			}
		}
		if nseen == len(seen) {
			return nil, false
		}
		seen[nseen] = key
		nseen++
		i = next + 1
		if key == "data" {
			if i >= len(d) || d[i] != '{' && d[i] != '[' {
				return nil, false
			}
			end, ok := skipValue(d, i, 0)
			if !ok {
				return nil, false
			}
			b.Data = d[i:end:end]
			data = true
			i = end
		} else {
			v, next, ok := plainString(d, i)
			if !ok {
				return nil, false
			}
			i = next
			switch key {
			case "specversion":
				if v != "1.0" {
					return nil, false
				}
				spec = true
			case "id":
				b.ID = v
			case "source":
				b.Source = v
			case "type":
				b.Type = v
			case "subject":
				if strings.TrimSpace(v) == "" {
					return nil, false
				}
				b.Subject = v
			case "time":
				if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
					return nil, false
				}
			case "datacontenttype":
				if v != "application/json" {
					return nil, false
				}
				b.ContentType = v
			default:
				if !validExtName(key) || b.next == len(b.kv) {
					return nil, false // dataschema, data_base64, a name the SDK refuses, ...
				}
				b.kv[b.next] = [2]string{key, v}
				b.next++
			}
		}
		if i >= len(d) {
			return nil, false
		}
		if d[i] == '}' {
			if i != len(d)-1 {
				return nil, false
			}
			break
		}
		if d[i] != ',' {
			return nil, false
		}
		i++
	}
	if !spec || !data || strings.TrimSpace(b.ID) == "" || strings.TrimSpace(b.Type) == "" || !plainSource(b.Source) {
		return nil, false
	}
	b.structured = true
	return b, true
}

// plainString reads the JSON string at d[i] (a quote) when it holds only printable
// ASCII and no escapes; next is the index after its closing quote.
func plainString(d []byte, i int) (s string, next int, ok bool) {
	if i >= len(d) || d[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return string(d[i+1 : j]), j + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipValue returns the index after the JSON value at d[i], checking its grammar
// strictly (RFC 8259: strings with valid escapes and no control characters, numbers
// as the grammar spells them, no whitespace outside strings is needed but allowed).
func skipValue(d []byte, i, depth int) (int, bool) {
	if depth > 1000 {
		return 0, false
	}
	i = skipSpace(d, i)
	if i >= len(d) {
		return 0, false
	}
	switch c := d[i]; {
	case c == '{':
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1, true
		}
		for {
			i = skipSpace(d, i)
			if i >= len(d) || d[i] != '"' {
				return 0, false
			}
			var ok bool
			if i, ok = skipString(d, i); !ok {
				return 0, false
			}
			i = skipSpace(d, i)
			if i >= len(d) || d[i] != ':' {
				return 0, false
			}
			if i, ok = skipValue(d, i+1, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(d, i)
			if i >= len(d) {
				return 0, false
			}
			if d[i] == '}' {
				return i + 1, true
			}
			if d[i] != ',' {
				return 0, false
			}
			i++
		}
	case c == '[':
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(d, i, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(d, i)
			if i >= len(d) {
				return 0, false
			}
			if d[i] == ']' {
				return i + 1, true
			}
			if d[i] != ',' {
				return 0, false
			}
			i++
		}
	case c == '"':
		return skipString(d, i)
	case c == 't':
		return skipLiteral(d, i, "true")
	case c == 'f':
		return skipLiteral(d, i, "false")
	case c == 'n':
		return skipLiteral(d, i, "null")
	default:
		return skipNumber(d, i)
	}
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

func skipLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipString skips the string at d[i] (a quote); invalid UTF-8 is refused, as
// readers may differ on what they make of it.
func skipString(d []byte, i int) (int, bool) {
	for j := i + 1; j < len(d); {
		c := d[j]
		switch {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(d) {
				return 0, false
			}
			switch d[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(d) {
					return 0, false
				}
				for _, h := range d[j+2 : j+6] {
					if !isHexDigit(h) {
						return 0, false
					}
				}
				j += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(d[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber skips a number as the JSON grammar spells it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(d []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// structuredID returns the id of the structured-mode event in m, "" if m is not one.
func structuredID(m *nats.Msg) string {
	if b, ok := decodeStructuredFast(m); ok {
		return b.ID
	}
	if !isStructured(m.Header.Get(HeaderContentType)) {
		return ""
	}
	if e, err := Decode(m); err == nil {
		return e.ID()
	}
	return ""
}
