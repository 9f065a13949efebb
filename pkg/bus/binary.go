package bus

import (
	"net/url"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
)

// Binary is a CloudEvent as the hot path reads it: its attributes as strings, its
// extensions as header values, its data as the message's payload. It carries exactly
// what Decode's *event.Event would for the same message, without the CloudEvents
// SDK's per-attribute parsing, boxing and validation maps, which cost more than the
// rest of a job's handling.
type Binary struct {
	ID, Source, Type, Subject string
	// ContentType is the datacontenttype ("" when the event has none).
	ContentType string
	// Time is the time attribute as the event spells it, RFC 3339 ("" when the
	// event has none).
	Time string
	Data []byte
	// ext holds the extension attributes by lowercase name.
	ext map[string]string
	// h holds them as ce- headers when the event was read by DecodeBinary.
	h nats.Header
	// kv holds them, by name, when the event was read from a structured-mode
	// message by decodeStructuredFast.
	kv         [][2]string
	structured bool
}

// Ext returns the string value of extension attribute name (lowercase), or "".
func (b *Binary) Ext(name string) string {
	if b.h != nil {
		if v := b.h[ceHeaderPrefix+name]; len(v) > 0 {
			return unescapeHeader(v[0])
		}
		return ""
	}
	if b.structured {
		for _, kv := range b.kv {
			if kv[0] == name {
				return kv[1]
			}
		}
		return ""
	}
	return b.ext[name]
}

// Meta returns the extension attributes that tie the event to its activation,
// execution, cause and trace.
func (b *Binary) Meta() Meta {
	return Meta{
		CorrelationID: b.Ext(events.ExtCorrelationID),
		CausationID:   b.Ext(events.ExtCausationID),
		ExecutionID:   b.Ext(events.ExtExecutionID),
		TraceParent:   b.Ext(events.ExtTraceParent),
		TraceState:    b.Ext(events.ExtTraceState),
	}
}

// DataMediaType is the media type of ContentType without its parameters.
func (b *Binary) DataMediaType() string {
	mt, _, _ := strings.Cut(b.ContentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// DecodeFast reads m as Decode does and returns the event as a Binary. A plain
// binary-mode 1.0 event with JSON data — what most publishers of triggers send,
// skillbus's client and gateway included — is read straight from its headers, and
// a compact structured-mode one — every event and job skillbus writes — straight
// from its JSON;
// anything else goes through Decode, whose errors say what is wrong with it.
func DecodeFast(m Msg) (*Binary, error) {
	h, data := m.Headers(), m.Data()
	if b, ok := decodeBinaryFast(h, data); ok {
		return b, nil
	}
	// On the stack: decodeStructuredFast keeps neither the message nor its headers.
	if b, ok := decodeStructuredFast(&nats.Msg{Header: h, Data: data}, false); ok {
		return b, nil
	}
	e, err := Decode(m)
	if err != nil {
		return nil, err
	}
	return BinaryOf(e), nil
}

// DecodeUnchecked reads m as DecodeFast does, for a reader that decodes the event's
// data strictly itself (a worker its job): the data of a structured-mode event whose
// data member comes last — every job skillbus writes — is taken as it stands, its
// JSON grammar unchecked, where DecodeFast would scan it once before the reader
// decodes it again. ok is false where DecodeFast must decide. When the reader's
// decoding of the data fails, it asks DecodeFast, whose verdict and error stand: the
// data taken may be more than the data member (a document whose data is not last)
// or no JSON at all. One verdict differs: a document nested as deep as
// encoding/json's limit (10,000 levels) is refused whole by Decode, but its data,
// one level less deep, is read.
//
// The attributes of a structured-mode event it reads are slices of m's data,
// not a copy of them: m's data must not change while they are in use. A
// delivered message's is its own (nats.go gives each message it receives a
// buffer of its own) and nothing writes to it.
func DecodeUnchecked(m Msg) (b *Binary, ok bool) {
	h, data := m.Headers(), m.Data()
	if b, ok := decodeBinaryFast(h, data); ok {
		return b, true
	}
	return decodeStructuredFast(&nats.Msg{Header: h, Data: data}, true)
}

// BinaryOf returns e's attributes, data and string-valued extensions as a Binary.
func BinaryOf(e *event.Event) *Binary {
	b := &Binary{ID: e.ID(), Source: e.Source(), Type: e.Type(), Subject: e.Subject(), ContentType: e.DataContentType(),
		Data: e.Data(), ext: map[string]string{}}
	if t := e.Time(); !t.IsZero() {
		b.Time = t.Format(time.RFC3339Nano)
	}
	for k, v := range e.Extensions() {
		if s, ok := v.(string); ok {
			b.ext[k] = s
		}
	}
	return b
}

// decodeBinaryFast reads the message of headers h and payload data without the SDK
// when Decode would accept it and give the same attributes: ce-specversion 1.0;
// non-blank id, source and type; a source that reads back unchanged as a URI
// reference; a valid time if any; no data content type other than
// application/json; every ce- header lowercase. ok is false otherwise.
func decodeBinaryFast(h nats.Header, data []byte) (_ *Binary, ok bool) {
	if h[events.HeaderCESpecVersion] == nil {
		return nil, false // structured mode, or binary mode spelt otherwise: no Binary to allocate
	}
	b := &Binary{h: h, Data: data}
	if len(b.Data) == 0 {
		b.Data = nil
	}
	spec := false
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		switch k {
		case events.HeaderCESpecVersion:
			if v[0] != "1.0" {
				return nil, false
			}
			spec = true
		case events.HeaderCEID: // the SDK trims id, type and subject
			b.ID = strings.TrimSpace(unescapeHeader(v[0]))
		case events.HeaderCESource:
			b.Source = unescapeHeader(v[0])
		case events.HeaderCEType:
			b.Type = strings.TrimSpace(unescapeHeader(v[0]))
		case events.HeaderCESubject:
			if b.Subject = strings.TrimSpace(unescapeHeader(v[0])); b.Subject == "" {
				return nil, false
			}
		case events.HeaderCETime:
			b.Time = unescapeHeader(v[0])
			if _, err := time.Parse(time.RFC3339Nano, b.Time); err != nil {
				return nil, false
			}
		case HeaderContentType:
			if v[0] != "application/json" {
				return nil, false
			}
			b.ContentType = v[0]
		case events.HeaderCEDataContentType, events.HeaderCEDataSchema:
			return nil, false
		default:
			if len(k) >= 3 && strings.EqualFold(k[:3], ceHeaderPrefix) && k[:3] != ceHeaderPrefix ||
				strings.EqualFold(k, HeaderContentType) && k != HeaderContentType {
				return nil, false // not the spelling this reader looks up
			}
			if strings.HasPrefix(k, ceHeaderPrefix) && !validExtName(k[len(ceHeaderPrefix):]) {
				return nil, false // the SDK drops it; let it
			}
		}
	}
	if !spec || strings.TrimSpace(b.ID) == "" || strings.TrimSpace(b.Type) == "" || !plainSource(b.Source) {
		return nil, false
	}
	return b, true
}

// validExtName is the CloudEvents attribute name rule the SDK applies to extensions:
// lowercase letters and digits.
func validExtName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// plainSource reports whether s is a non-blank URI reference that the SDK reads back
// unchanged, so Source is what Decode's e.Source() would be.
func plainSource(s string) bool {
	if strings.TrimSpace(s) == "" {
		return false
	}
	// A path of unreserved characters ("/skillbus/router", "/bench") needs no parse.
	if s[0] == '/' && (len(s) == 1 || s[1] != '/') {
		plain := true
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
				plain = false
				break
			}
		}
		if plain {
			return true
		}
	}
	u, err := url.Parse(s)
	return err == nil && u.String() == s
}
