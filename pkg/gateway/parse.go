// Package gateway is skillbus's HTTP ingress: it takes CloudEvents over HTTP (binary,
// structured and batch modes of the CloudEvents HTTP binding, read with sdk-go) and
// plain JSON webhooks (GitHub's and the like, mapped to CloudEvents by
// configuration), authenticates the sender (bearer tokens, HMAC-signed bodies),
// publishes each event as a trigger with its id as the dedupe id, and answers 202
// with the activation id — or, with ?wait=30s, the activation's result.
//
// The parsing and checking of requests (this file and webhook.go) is plain Go with
// no NATS in it; server.go wires it to the bus through package client, whose
// publish path (Prepare, Send) every trigger publisher shares.
package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/client"
)

// Errors of a request, each answered with its HTTP status.
var (
	// ErrNotCloudEvent: the request is neither binary nor structured nor batch mode.
	ErrNotCloudEvent = errors.New("not a CloudEvent")
	// ErrInvalidEvent: a CloudEvent that fails validation (client.ErrInvalidEvent,
	// the same error every trigger publisher returns).
	ErrInvalidEvent = client.ErrInvalidEvent
	// ErrBadSignature: a signature header that is missing, malformed or wrong.
	ErrBadSignature = errors.New("bad signature")
)

// Encoding is the content mode ParseEvents reads a request with these headers in:
// structured, batch, binary, or unknown (not a CloudEvent).
func Encoding(header http.Header) binding.Encoding {
	return cehttp.NewMessage(header, nil).ReadEncoding()
}

// ParseEvents reads the CloudEvents of an HTTP request with sdk-go's HTTP binding:
// binary mode (ce-* headers, Content-Type as datacontenttype, the body as data),
// structured mode (Content-Type application/cloudevents+json) or batch mode
// (application/cloudevents-batch+json, at most maxBatch events). Every event is
// validated, and its type must fit in a NATS subject.
func ParseEvents(header http.Header, body []byte, maxBatch int) ([]event.Event, error) {
	msg := cehttp.NewMessage(header, io.NopCloser(bytes.NewReader(body)))
	defer msg.Finish(nil)
	var evs []event.Event
	switch msg.ReadEncoding() {
	case binding.EncodingBatch:
		var err error
		if evs, err = binding.ToEvents(context.Background(), msg, bytes.NewReader(body)); err != nil {
			return nil, fmt.Errorf("%w: batch: %s", ErrInvalidEvent, jsonProblem(body, true, err))
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("%w: the batch is empty", ErrInvalidEvent)
		}
		if maxBatch > 0 && len(evs) > maxBatch {
			return nil, fmt.Errorf("%w: the batch has %d events; at most %d are taken at once", ErrInvalidEvent, len(evs), maxBatch)
		}
	case binding.EncodingBinary:
		e, err := binding.ToEvent(context.Background(), msg)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidEvent, strings.TrimSpace(err.Error()))
		}
		evs = []event.Event{*e}
	case binding.EncodingStructured:
		e, err := binding.ToEvent(context.Background(), msg)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidEvent, jsonProblem(body, false, err))
		}
		evs = []event.Event{*e}
	default:
		// ce- headers without a usable ce-specversion: a binary-mode event with
		// that one attribute wrong, not something else.
		if v := header.Get(events.HeaderCESpecVersion); v != "" {
			return nil, fmt.Errorf("%w: ce-specversion %q: only 1.0 is supported", ErrInvalidEvent, v)
		}
		for k := range header {
			if strings.HasPrefix(strings.ToLower(k), events.HeaderCE) {
				return nil, fmt.Errorf("%w: binary mode needs the ce-specversion header, 1.0 (it has %s)", ErrInvalidEvent, k)
			}
		}
		var probe struct {
			SpecVersion *string `json:"specversion"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.SpecVersion != nil {
			return nil, fmt.Errorf("%w: the body is a structured CloudEvent (it has specversion): send it with Content-Type %s; got Content-Type %q",
				ErrNotCloudEvent, "application/cloudevents+json", header.Get("Content-Type"))
		}
		return nil, fmt.Errorf("%w: send ce-specversion, ce-id, ce-source and ce-type headers (binary mode), or Content-Type %s (structured mode) or %s (batch mode); got Content-Type %q",
			ErrNotCloudEvent, "application/cloudevents+json", "application/cloudevents-batch+json", header.Get("Content-Type"))
	}
	for i := range evs {
		if err := check(&evs[i]); err != nil {
			if len(evs) > 1 {
				return nil, fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return nil, err
		}
	}
	return evs, nil
}

// jsonProblem says what is wrong with a structured event's or a batch's body when
// the CloudEvents parser refused it, in the sender's terms: not JSON, not an
// object (an array for a batch), or a required attribute that is not a string.
// Otherwise the parser's own message, on one line.
func jsonProblem(body []byte, batch bool, err error) string {
	var v any
	if jerr := json.Unmarshal(body, &v); jerr != nil {
		return "the body is not valid JSON: " + jerr.Error()
	}
	objs := []any{v}
	if batch {
		arr, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("a batch is a JSON array of events; the body is a JSON %s", jsonKind(v))
		}
		objs = arr
	}
	for i, o := range objs {
		at := ""
		if batch {
			at = fmt.Sprintf("event %d: ", i)
		}
		m, ok := o.(map[string]any)
		if !ok {
			return fmt.Sprintf("%sa structured event is a JSON object; got a JSON %s", at, jsonKind(o))
		}
		for _, a := range []string{"specversion", "id", "source", "type"} {
			if x, ok := m[a]; ok {
				if _, str := x.(string); !str {
					return fmt.Sprintf("%s%s: want a string, got a JSON %s", at, a, jsonKind(x))
				}
			}
		}
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// check validates an event as every trigger publisher does, as one from outside
// skillbus (client.CheckOutside): no source of skillbus's own.
func check(e *event.Event) error { return client.CheckOutside(e) }

// SignaturePrefix starts a signature header's value: GitHub's X-Hub-Signature-256
// is "sha256=" and the hex HMAC-SHA256 of the body.
const SignaturePrefix = "sha256="

// Sign returns the signature header value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks a signature header value ("sha256=<hex>") against body, in
// constant time.
func VerifySignature(secret []byte, value string, body []byte) error {
	if value == "" {
		return fmt.Errorf("%w: the request is not signed", ErrBadSignature)
	}
	hexSum, ok := strings.CutPrefix(value, SignaturePrefix)
	if !ok {
		return fmt.Errorf("%w: the signature does not start with %q", ErrBadSignature, SignaturePrefix)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: the signature is not %d hex-encoded bytes", ErrBadSignature, sha256.Size)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("%w: the signature does not match the body", ErrBadSignature)
	}
	return nil
}
