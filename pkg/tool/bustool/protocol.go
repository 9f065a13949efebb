package bustool

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skillbus/skillbus/pkg/tool"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
)

// The wire protocol. A call is a NATS request to <prefix>.tool.<name> whose payload
// is the arguments as a JSON object; these headers carry the rest of the tool.Call.
// They are defined, with the other wire names, in package events.
const (
	// HeaderTimeout is how many milliseconds the caller will wait for the reply;
	// the server gives the tool a context with that deadline.
	HeaderTimeout = events.HeaderToolTimeout
	// HeaderExecutionID and HeaderStep name the execution and step making the call.
	HeaderExecutionID = events.HeaderToolExecutionID
	HeaderStep        = events.HeaderToolStep
	// HeaderIdempotencyKey is Call.IdempotencyKey: "<executionid>/<step>".
	HeaderIdempotencyKey = events.HeaderIdempotencyKey
)

// Metadata keys in a tool service's $SRV.INFO: the service's metadata marks it as
// a skillbus tool service; each endpoint's metadata describes one tool.
const (
	MetaProtocol    = "skillbus.protocol" // service metadata; ProtocolVersion
	MetaTool        = "skillbus.tool"     // endpoint metadata: the tool's name
	MetaDescription = "skillbus.description"
	MetaSchema      = "skillbus.schema" // JSON Schema of the arguments, as JSON text
)

// ProtocolVersion is the value of MetaProtocol this package speaks.
const ProtocolVersion = "tool/1"

// DefaultPrefix is the subject prefix unless configured otherwise.
const DefaultPrefix = "skillbus"

// ErrInvalidName is returned for a tool name that cannot be a subject token.
var ErrInvalidName = errors.New("invalid tool name")

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckName reports whether name can name a tool on the bus: 1 to 64 letters,
// digits, '_' and '-'. That makes it one subject token, a micro endpoint name and
// an OpenAI function name at once.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("bustool: %w %q: want 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, name)
	}
	return nil
}

// Subject is the subject a tool is served on.
func Subject(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return events.Subjects{Prefix: prefix}.Tool(name)
}

func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !nameRe.MatchString(prefix) {
		return fmt.Errorf("bustool: subject prefix %q: want letters, digits, '_' or '-'", prefix)
	}
	return nil
}

// errorBody is the payload of an error reply. The micro error headers carry the
// class (as the code) and a one-line message; the body keeps the whole message.
type errorBody struct {
	Class   failure.Class `json:"class"`
	Message string        `json:"message"`
}

// errorReply encodes err as an error reply: the Nats-Service-Error-Code header is
// the failure class, Nats-Service-Error the message on one line, and the body
// errorBody as JSON.
func errorReply(err error) (code, description string, body []byte) {
	class := failure.ClassOf(err)
	msg := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if msg == "" {
		msg = "error"
	}
	body, _ = tool.MarshalJSON(errorBody{Class: class, Message: msg})
	return string(class), oneLine(msg, 1024), body
}

// oneLine makes s fit a header value: no line breaks or control characters, at
// most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r < ' ' || r == 0x7f
	}), " ")
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// parseReply reads a tool service's reply: the result, or the error it reports
// with its failure class. tool names the tool in error messages. Replies come
// from other processes, possibly not written with this package:
//
//   - an error reply has the Nats-Service-Error-Code header. The class is the code
//     when it is a class name ("retryable", "fatal", "repairable"), else the class
//     in an errorBody payload, else an HTTP-like status code (400 and 422
//     repairable; 408, 429 and 5xx but 501 retryable; other 4xx and 501 fatal),
//     else what failure.ClassOf makes of the message.
//   - anything else is a result: one JSON value (an empty payload is null).
func parseReply(name string, msg *nats.Msg) (any, error) {
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" || msg.Header.Get(micro.ErrorHeader) != "" {
		return nil, replyError(name, code, msg.Header.Get(micro.ErrorHeader), msg.Data)
	}
	if len(strings.TrimSpace(string(msg.Data))) == 0 {
		return nil, nil
	}
	v, err := tool.DecodeJSON(msg.Data)
	if err != nil {
		return nil, failure.Fatalf("bustool: tool %s replied with a result that is not JSON: %v", name, err)
	}
	return v, nil
}

func replyError(tool, code, description string, data []byte) error {
	var body errorBody
	hasBody := len(data) > 0 && json.Unmarshal(data, &body) == nil
	msg := description
	if hasBody && body.Message != "" {
		msg = body.Message
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if msg == "" {
		msg = "failed without a message"
		if code != "" {
			msg = "failed with code " + oneLine(code, 64)
		}
	}
	var err error
	if strings.HasPrefix(msg, tool+": ") {
		err = fmt.Errorf("bustool: %s", msg) // the tool named itself already
	} else {
		err = fmt.Errorf("bustool: tool %s: %s", tool, msg)
	}

	switch c := failure.Class(code); c {
	case failure.Retryable, failure.Fatal, failure.Repairable:
		return failure.Wrap(c, err)
	}
	if hasBody {
		switch body.Class {
		case failure.Retryable, failure.Fatal, failure.Repairable:
			return failure.Wrap(body.Class, err)
		}
	}
	if status, convErr := strconv.Atoi(code); convErr == nil {
		if c, ok := statusClass(status); ok {
			return failure.Wrap(c, err)
		}
	}
	return failure.Wrap(failure.ClassOf(errors.New(msg)), err)
}

// statusClass classifies HTTP-like status codes the way the http tool does.
func statusClass(status int) (failure.Class, bool) {
	switch {
	case status == 400 || status == 422:
		return failure.Repairable, true
	case status == 408 || status == 429 || (status >= 500 && status <= 599 && status != 501):
		return failure.Retryable, true
	case status >= 400 && status <= 599:
		return failure.Fatal, true
	}
	return "", false
}
