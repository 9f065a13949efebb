package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"sort"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
)

// Header names.
const (
	HeaderMsgID       = events.HeaderMsgID
	HeaderContentType = "Content-Type"
	ceHeaderPrefix    = events.HeaderCE
	structuredJSON    = "application/cloudevents+json"
)

// ErrNotCloudEvent is returned by Decode for a message that is neither a binary-mode
// nor a structured-mode CloudEvent.
var ErrNotCloudEvent = errors.New("not a CloudEvent")

// InvalidEventError lists what makes an event invalid, attribute by attribute, in a
// stable order.
type InvalidEventError struct {
	Fields map[string]string
}

func (e *InvalidEventError) Error() string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("invalid CloudEvent: ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(e.Fields[k])
	}
	return b.String()
}

// Encode writes e to a NATS message in binary content mode: attributes as ce- headers,
// datacontenttype as Content-Type, data as the payload. msgID becomes Nats-Msg-Id.
func Encode(subject, msgID string, e *event.Event) *nats.Msg {
	m := nats.NewMsg(subject)
	h := m.Header
	h[HeaderMsgID] = []string{msgID}
	h[events.HeaderCESpecVersion] = []string{e.SpecVersion()}
	h[events.HeaderCEID] = []string{escapeHeader(e.ID())}
	h[events.HeaderCESource] = []string{escapeHeader(e.Source())}
	h[events.HeaderCEType] = []string{e.Type()}
	if s := e.Subject(); s != "" {
		h[events.HeaderCESubject] = []string{escapeHeader(s)}
	}
	if t := e.Time(); !t.IsZero() {
		h[events.HeaderCETime] = []string{types.FormatTime(t)}
	}
	if s := e.DataSchema(); s != "" {
		h[events.HeaderCEDataSchema] = []string{s}
	}
	if ct := e.DataContentType(); ct != "" {
		h[HeaderContentType] = []string{ct}
	}
	for k, v := range e.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			s = fmt.Sprint(v)
		}
		h[ceHeaderPrefix+k] = []string{escapeHeader(s)}
	}
	m.Data = e.Data()
	return m
}

// escapeHeader percent-encodes a CloudEvents attribute for a ce- header as the
// protocol bindings ask: space, '"', '%' and every byte outside printable ASCII.
// Decode undoes it, so an attribute reads back the same whichever binding or SDK
// wrote it, and ids derived from it (the activation id) agree.
func escapeHeader(v string) string {
	n := 0
	for i := 0; i < len(v); i++ {
		if needsEscape(v[i]) {
			n++
		}
	}
	if n == 0 {
		return v
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(v)+2*n)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }

// unescapeHeader decodes %XX sequences in a ce- header value (see
// events.CanonicalSource).
func unescapeHeader(v string) string { return events.CanonicalSource(v) }

// Decode reads a CloudEvent from a NATS message in binary content mode (a
// ce-specversion header) or structured mode (Content-Type application/cloudevents+json,
// or a JSON payload with a specversion attribute and no ce- headers, as publishers
// without header support write it). The event is validated: a missing id, source,
// type or specversion is an *InvalidEventError naming each.
func Decode(m Msg) (*event.Event, error) {
	var specversion, contentType string
	ce := map[string]string{}
	for k, v := range m.Headers() {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		switch {
		case lk == "content-type":
			contentType = v[0]
		case strings.HasPrefix(lk, ceHeaderPrefix):
			name := lk[len(ceHeaderPrefix):]
			if name == "specversion" {
				specversion = v[0]
			} else {
				ce[name] = v[0]
			}
		}
	}
	if specversion == "" {
		if len(ce) > 0 && !isStructured(contentType) {
			return nil, &InvalidEventError{Fields: map[string]string{
				"specversion": "missing: a binary-mode event needs a ce-specversion header (\"1.0\")",
			}}
		}
		return decodeStructured(m.Data(), contentType)
	}
	return decodeBinary(specversion, contentType, ce, m.Data())
}

func isStructured(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == structuredJSON
}

func decodeStructured(data []byte, contentType string) (*event.Event, error) {
	if contentType != "" && !isStructured(contentType) {
		return nil, fmt.Errorf("%w: no ce-specversion header, and Content-Type is %q, not %s", ErrNotCloudEvent, contentType, structuredJSON)
	}
	var probe struct {
		SpecVersion *string `json:"specversion"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: no ce-specversion header, and the payload is not a structured-mode JSON event: %v", ErrNotCloudEvent, err)
	}
	if probe.SpecVersion == nil {
		return nil, &InvalidEventError{Fields: map[string]string{
			"specversion": "missing: send a ce-specversion header (binary mode) or a JSON event with a specversion attribute (structured mode)",
		}}
	}
	var e event.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, &InvalidEventError{Fields: map[string]string{"event": err.Error()}}
	}
	if err := validate(&e); err != nil {
		return nil, err
	}
	return &e, nil
}

func decodeBinary(specversion, contentType string, ce map[string]string, data []byte) (*event.Event, error) {
	if specversion != "1.0" && specversion != "0.3" {
		return nil, &InvalidEventError{Fields: map[string]string{"specversion": fmt.Sprintf("%q is not supported (want 1.0)", specversion)}}
	}
	e := event.New(specversion)
	bad := map[string]string{}
	for name, v := range ce {
		v = unescapeHeader(v)
		switch name {
		case "id":
			e.SetID(v)
		case "source":
			e.SetSource(v)
		case "type":
			e.SetType(v)
		case "subject":
			e.SetSubject(v)
		case "dataschema":
			e.SetDataSchema(v)
		case "datacontenttype":
			if contentType == "" {
				contentType = v
			}
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad["time"] = fmt.Sprintf("%q is not an RFC 3339 timestamp", v)
				continue
			}
			e.SetTime(t)
		default:
			e.SetExtension(name, v)
		}
	}
	if contentType != "" {
		e.SetDataContentType(contentType)
	}
	e.DataEncoded = data
	if len(data) == 0 {
		e.DataEncoded = nil
	}
	if err := validate(&e); err != nil {
		var ie *InvalidEventError
		if errors.As(err, &ie) {
			for k, v := range bad {
				ie.Fields[k] = v
			}
		}
		return nil, err
	}
	if len(bad) > 0 {
		return nil, &InvalidEventError{Fields: bad}
	}
	return &e, nil
}

func validate(e *event.Event) error {
	err := e.Validate()
	if err == nil {
		return nil
	}
	var ve event.ValidationError
	if errors.As(err, &ve) {
		f := map[string]string{}
		for k, v := range ve {
			f[k] = v.Error()
		}
		return &InvalidEventError{Fields: f}
	}
	return &InvalidEventError{Fields: map[string]string{"event": err.Error()}}
}
