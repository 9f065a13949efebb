package bus

import (
	"strings"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonenc"
)

// Everything skillbus writes travels as a structured-mode CloudEvent: the whole
// event, attributes and data, is one JSON document, and the message's headers are
// Content-Type (application/cloudevents+json) and the duplicate or create-only
// check. Jobs leave out the attributes their data repeats (JobMsg); events keep them
// all (Event.Msg). As binary-mode headers, each attribute was encoded by the
// publisher's client, scanned by the server and parsed into a map by every reader's
// client, on every message. Binary-mode events are still read everywhere: the
// triggers publishers send, and what earlier versions wrote.

// appendStructuredHead appends e's attributes as the start of a structured-mode
// JSON CloudEvent, up to and including the "data" member's name: the caller
// appends the data (a JSON value) and the closing brace. A zero time and empty
// extensions are left out.
func appendStructuredHead(b []byte, e Event, at time.Time, exts ...[2]string) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = jsonenc.AppendString(b, e.ID)
	b = append(b, `,"source":`...)
	b = jsonenc.AppendString(b, e.Source)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, e.Type)
	if !at.IsZero() {
		b = append(b, `,"time":`...)
		b, _ = jsonenc.AppendTime(b, at) // a time of this century always encodes
	}
	return append(appendExts(b, exts...), `,"data":`...)
}

// appendExts appends each extension that is set as a member of a JSON object.
func appendExts(b []byte, exts ...[2]string) []byte {
	for _, kv := range exts {
		if kv[1] == "" {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, kv[0]...)
		b = append(b, '"', ':')
		b = jsonenc.AppendString(b, kv[1])
	}
	return b
}

// decodeStructuredFast reads a structured-mode event without the SDK when Decode
// would accept it and give the same attributes and data: Content-Type exactly
// application/cloudevents+json and no ce- headers; a JSON object with no
// whitespace between its members whose attributes are strings of printable ASCII
// with no escapes; specversion 1.0; non-blank id, source and type; a source that
// reads back unchanged; a valid time if any; no data content type other than
// application/json; no dataschema or data_base64; each key once; data a JSON
// object or array, taken as its exact bytes. ok is false otherwise, and Decode
// decides.
//
// With unchecked, a data member that comes last is taken as what lies between its
// start and the document's closing brace, its grammar unchecked, and the attributes
// are read in place, slices of m.Data (see DecodeUnchecked).
func decodeStructuredFast(m *nats.Msg, unchecked bool) (_ *Binary, ok bool) {
	d := m.Data
	if !structuredHeaders(m.Header) || len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' {
		return nil, false
	}
	var s structuredScan
	if !s.scan(d, unchecked) {
		return nil, false
	}
	return s.event(d, unchecked)
}

// structuredHeaders: Content-Type is exactly application/cloudevents+json, in
// that spelling, and no ce- header is set.
func structuredHeaders(h nats.Header) bool {
	ct := false
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		switch {
		case k == HeaderContentType:
			if v[0] != structuredJSON {
				return false
			}
			ct = true
		case strings.EqualFold(k, HeaderContentType), len(k) >= 3 && strings.EqualFold(k[:3], ceHeaderPrefix):
			return false
		}
	}
	return ct
}

// maxDataDepth is how deeply an event's data may nest for it to be read
// without the SDK.
const maxDataDepth = 1001

// structuredScan holds where the members of a structured-mode event are: first
// their places, then one string for every attribute (the part of the document
// they are in).
type structuredScan struct {
	attrs           [16]struct{ k0, k1, v0, v1 int }
	n               int
	dataAt, dataEnd int
	last            int // the end of the last attribute
}

// scan finds the members of d, a document that starts with { and ends with }.
func (s *structuredScan) scan(d []byte, unchecked bool) bool {
	s.dataAt = -1
	for i := 1; ; i++ {
		k0, k1, ok := plainString(d, i)
		if !ok || k1+1 >= len(d) || d[k1+1] != ':' {
			return false
		}
		if i, ok = s.member(d, k0, k1, k1+2, unchecked); !ok || i >= len(d) {
			return false
		}
		switch {
		case d[i] == '}':
			return i == len(d)-1 && s.dataAt >= 0
		case d[i] != ',':
			return false
		}
	}
}

// member reads the value of the member named d[k0:k1], which starts at d[i], and
// returns the index after it.
func (s *structuredScan) member(d []byte, k0, k1, i int, unchecked bool) (int, bool) {
	if string(d[k0:k1]) != "data" {
		v0, v1, ok := plainString(d, i)
		if !ok || s.n == len(s.attrs) {
			return 0, false
		}
		s.attrs[s.n] = struct{ k0, k1, v0, v1 int }{k0, k1, v0, v1}
		s.n++
		s.last = v1 + 1
		return s.last, true
	}
	if s.dataAt >= 0 || i >= len(d) || d[i] != '{' && d[i] != '[' {
		return 0, false
	}
	s.dataAt = i
	if unchecked {
		end := len(d) - 1
		for end > i && jsonSpace(d[end-1]) {
			end--
		}
		s.dataEnd = end
		return len(d) - 1, true
	}
	end, ok := jsondec.SkipValue(d, i, maxDataDepth)
	s.dataEnd = end
	return end, ok
}

// event makes the event of the members scan found, if Decode would read the same.
// Its attributes are one copy of the part of d they are in, or, inPlace, d's own
// bytes.
func (s *structuredScan) event(d []byte, inPlace bool) (*Binary, bool) {
	attrs := s.attrs[:s.n]
	for a := range attrs { // each key once
		for b := a + 1; b < len(attrs); b++ {
			if string(d[attrs[a].k0:attrs[a].k1]) == string(d[attrs[b].k0:attrs[b].k1]) {
				return nil, false
			}
		}
	}
	var text string
	if inPlace {
		text = unsafe.String(unsafe.SliceData(d), s.last)
	} else {
		text = string(d[:s.last])
	}
	sb := &structuredBinary{Binary: Binary{Data: d[s.dataAt:s.dataEnd:s.dataEnd], structured: true}}
	b := &sb.Binary
	exts := 0 // how many extensions, for the room setAttr makes for them
	for _, a := range attrs {
		switch string(d[a.k0:a.k1]) {
		case "specversion", "id", "source", "type", "subject", "time", "datacontenttype":
		default:
			exts++
		}
	}
	if exts <= len(sb.kvs) {
		b.kv = sb.kvs[:0]
	}
	spec := false
	for _, a := range attrs {
		key, v := text[a.k0:a.k1], text[a.v0:a.v1]
		if key == "specversion" {
			spec = v == "1.0"
			if !spec {
				return nil, false
			}
			continue
		}
		if !b.setAttr(key, v, exts) {
			return nil, false
		}
	}
	if !spec || strings.TrimSpace(b.ID) == "" || strings.TrimSpace(b.Type) == "" || !plainSource(b.Source) {
		return nil, false
	}
	return b, true
}

// structuredBinary is a structured-mode event's Binary and the room for its
// extensions, as many as a job has: one allocation for both.
type structuredBinary struct {
	Binary
	kvs [2][2]string
}

// setAttr sets attribute key, other than specversion, to v, unless Decode would
// read it otherwise; n is how many extension attributes the event has.
func (b *Binary) setAttr(key, v string, n int) bool {
	switch key {
	case "id":
		b.ID = v
	case "source":
		b.Source = v
	case "type":
		b.Type = v
	case "subject":
		b.Subject = v
		return strings.TrimSpace(v) != ""
	case "time":
		b.Time = v
		_, err := time.Parse(time.RFC3339Nano, v)
		return err == nil
	case "datacontenttype":
		b.ContentType = v
		return v == "application/json"
	default:
		if !validExtName(key) {
			return false // dataschema, data_base64, a name the SDK refuses, ...
		}
		if b.kv == nil {
			b.kv = make([][2]string, 0, n)
		}
		b.kv = append(b.kv, [2]string{key, v})
	}
	return true
}

// plainString finds the JSON string at d[i] (a quote) when it holds only printable
// ASCII and no escapes: its contents are d[s0:s1], and d[s1] is its closing quote.
func plainString(d []byte, i int) (s0, s1 int, ok bool) {
	if i >= len(d) || d[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return i + 1, j, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return 0, 0, false
		}
	}
	return 0, 0, false
}

func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// structuredID returns the id of the structured-mode event in m, "" if m is not one.
func structuredID(m *nats.Msg) string {
	if b, ok := decodeStructuredFast(m, false); ok {
		return b.ID
	}
	if !isStructured(m.Header.Get(HeaderContentType)) {
		return ""
	}
	if e, err := Decode(FromNATS(m)); err == nil {
		return e.ID()
	}
	return ""
}
