package bustool

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// FuzzParseReply feeds replies of any shape, as a foreign tool service might
// send them: the result is JSON-like or the error is classified, never a panic.
func FuzzParseReply(f *testing.F) {
	f.Add("", "", []byte(`{"a":[1,2.5,"x",null,true]}`))
	f.Add("", "", []byte(``))
	f.Add("", "", []byte(`12345678901234567890123`))
	f.Add("fatal", "nope", []byte(`{"class":"fatal","message":"nope\nmore"}`))
	f.Add("X", "short", []byte(`{"class":"repairable","message":""}`))
	f.Add("503", "busy", []byte(nil))
	f.Add("", "only a description", []byte(`{"class":1}`))
	f.Add("404", "", []byte(`not json`))
	f.Add("\n", "\x00", []byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, code, desc string, data []byte) {
		msg := &nats.Msg{Header: nats.Header{}, Data: data}
		if code != "" {
			msg.Header.Set(micro.ErrorCodeHeader, code)
		}
		if desc != "" {
			msg.Header.Set(micro.ErrorHeader, desc)
		}
		v, err := parseReply("t", msg)
		if err != nil {
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %q carries no class", err)
			}
			switch fe.Class {
			case failure.Retryable, failure.Fatal, failure.Repairable:
			default:
				t.Fatalf("error %q has class %q", err, fe.Class)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := tool.CheckValue(v); err != nil {
			t.Fatalf("result %#v is not JSON-like: %v", v, err)
		}
	})
}

// FuzzParseInfo feeds $SRV.INFO replies of any shape to discovery's parser and
// to the tool description it builds from each endpoint.
func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(`{"name":"s","id":"1","version":"1.0.0","metadata":{"skillbus.protocol":"tool/1"},` +
		`"endpoints":[{"name":"a","subject":"skillbus.tool.a","metadata":{"skillbus.tool":"a","skillbus.schema":"{\"type\":\"object\"}"}}]}`))
	f.Add([]byte(`{"metadata":{"skillbus.protocol":"tool/1"},"endpoints":[{"metadata":{"skillbus.tool":"a.b","skillbus.schema":"[1]"}}]}`))
	f.Add([]byte(`{"metadata":{"skillbus.protocol":"tool/1"},"endpoints":null}`))
	f.Add([]byte(`{"metadata":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, ok := parseInfo(data)
		if !ok {
			return
		}
		for _, ep := range info.Endpoints {
			tl, err := toolFromInfo(nil, Config{Prefix: DefaultPrefix, CallTimeout: 1}, ep.Subject, ep.Metadata)
			if err != nil {
				continue
			}
			if CheckName(tl.Name()) != nil || tl.Subject() != Subject(DefaultPrefix, tl.Name()) {
				t.Fatalf("accepted tool %q on %q", tl.Name(), tl.Subject())
			}
			if err := tool.CheckValue(tl.InputSchema()); err != nil {
				t.Fatalf("schema is not JSON-like: %v", err)
			}
		}
	})
}
