package bus_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// view is what the hot path reads of an event.
type view struct {
	ID, Source, Type, Subject, ContentType, MediaType, Data string
	Meta                                                    bus.Meta
	Skill, Progress                                         string
}

func viewOf(b *bus.Binary) view {
	return view{ID: b.ID, Source: b.Source, Type: b.Type, Subject: b.Subject, ContentType: b.ContentType, MediaType: b.DataMediaType(),
		Data: string(b.Data), Meta: b.Meta(), Skill: b.Ext(events.ExtSkill), Progress: b.Ext(events.ExtProgress)}
}

// decodeFastAgrees checks that DecodeFast accepts what Decode accepts, rejects what
// it rejects, and reads the same attributes from it.
func decodeFastAgrees(t *testing.T, m *nats.Msg) {
	t.Helper()
	fast, ferr := bus.DecodeFast(bus.FromNATS(m))
	e, err := bus.Decode(bus.FromNATS(m))
	if (err == nil) != (ferr == nil) {
		t.Fatalf("Decode error %v, DecodeFast error %v", err, ferr)
	}
	if err != nil {
		return
	}
	if d := cmp.Diff(viewOf(bus.BinaryOf(e)), viewOf(fast)); d != "" {
		t.Fatalf("DecodeFast reads another event than Decode (-Decode +DecodeFast)\n%s", d)
	}
}

func TestDecodeFastReadsWhatItWrote(t *testing.T) {
	t.Parallel()
	m, err := bus.Event{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob,
		Meta: bus.Meta{CorrelationID: "a1", CausationID: "c1", ExecutionID: "e1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		Data: map[string]any{"execution_id": "e1"}}.Msg("skillbus.exec.default.x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.DecodeFast(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	want := view{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob,
		Data: `{"execution_id":"e1"}`, Meta: bus.Meta{CorrelationID: "a1", CausationID: "c1", ExecutionID: "e1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	if d := cmp.Diff(want, viewOf(b)); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	decodeFastAgrees(t, m)
}

func TestDecodeFastAgreesWithDecode(t *testing.T) {
	t.Parallel()
	base := map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/test", "ce-type": "com.example.x"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for k, v := range base {
			h[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "-" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	for name, h := range map[string]map[string]string{
		"plain":                 base,
		"json":                  with("Content-Type", "application/json", "ce-time", "2026-01-02T03:04:05.123Z"),
		"other content type":    with("Content-Type", "text/plain; charset=utf-8"),
		"uppercase content":     with("content-type", "application/JSON"),
		"structured, no spec":   with("ce-specversion", "-"),
		"spec 0.3":              with("ce-specversion", "0.3"),
		"blank id":              with("ce-id", " "),
		"no type":               with("ce-type", "-"),
		"escaped source":        with("ce-source", "/orders%20eu/caf%C3%A9"),
		"absolute source":       with("ce-source", "https://example.com/a?b=c"),
		"uppercase scheme":      with("ce-source", "HTTPS://example.com/a"),
		"bad source":            with("ce-source", "http://x:port"),
		"bad time":              with("ce-time", "yesterday"),
		"subject":               with("ce-subject", "s/1"),
		"blank subject":         with("ce-subject", " "),
		"extensions":            with("ce-skill", "noop", "ce-progress", "live", "ce-correlationid", "a%201"),
		"bad extension name":    with("ce-skill_name", "x"),
		"mixed case header":     with("Ce-Skill", "noop"),
		"datacontenttype":       with("ce-datacontenttype", "application/json"),
		"dataschema":            with("ce-dataschema", "https://example.com/s"),
		"escaped id and type":   with("ce-id", "a%20b", "ce-type", "com.example.%41"),
		"percent without digit": with("ce-source", "/a%zz"),
	} {
		t.Run(name, func(t *testing.T) {
			decodeFastAgrees(t, binaryMsg(h, `{"a":1}`))
			decodeFastAgrees(t, binaryMsg(h, ""))
		})
	}
}

func FuzzDecodeFast(f *testing.F) {
	f.Add("1.0", "1", "/test", "com.example.x", "application/json", "2026-01-02T03:04:05Z", "ce-skill", "noop", `{"a":1}`)
	f.Add("1.0", "a%20b", "HTTPS://x/y", "t", "", "", "Ce-X", "y", "")
	f.Add("0.3", " ", "//x", "t", "text/plain", "now", "ce-bad_name", "", "x")
	f.Fuzz(func(t *testing.T, spec, id, source, typ, ct, tm, ek, ev, data string) {
		m := nats.NewMsg("skillbus.trigger.x")
		set := func(k, v string) {
			if v != "" {
				m.Header[k] = []string{v}
			}
		}
		set("ce-specversion", spec)
		set("ce-id", id)
		set("ce-source", source)
		set("ce-type", typ)
		set("Content-Type", ct)
		set("ce-time", tm)
		if ek != "" {
			set(ek, ev)
		}
		m.Data = []byte(data)
		decodeFastAgrees(t, m)
	})
}

func BenchmarkDecode(b *testing.B) {
	m, err := bus.Event{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob,
		Meta: bus.Meta{CorrelationID: "a1", CausationID: "c1", ExecutionID: "e1"},
		Data: map[string]any{"execution_id": "e1"}}.Msg("skillbus.exec.default.x")
	if err != nil {
		b.Fatal(err)
	}
	m.Header["ce-time"] = []string{time.Now().UTC().Format(time.RFC3339Nano)}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := bus.Decode(bus.FromNATS(m))
			if err != nil {
				b.Fatal(err)
			}
			_ = bus.MetaOf(e)
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := bus.DecodeFast(bus.FromNATS(m))
			if err != nil {
				b.Fatal(err)
			}
			_ = e.Meta()
		}
	})
}

// A job is a structured-mode event: its attributes and data in one JSON document,
// Content-Type and Nats-Msg-Id its only headers. Its activation and execution are in
// its data, and it has no time or data content type (JSON is the default).
func TestJobMsgCarriesOnlyWhatItsReaderNeeds(t *testing.T) {
	t.Parallel()
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	m, err := bus.Event{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob,
		Meta: bus.Meta{CorrelationID: "a1", CausationID: "a1.route.decided", ExecutionID: "e1", TraceParent: tp},
		Data: map[string]any{"execution_id": "e1", "activation_id": "a1"}}.JobMsg("skillbus.exec.default.x.a1.job")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if d := cmp.Diff([]string{"Content-Type", "Nats-Msg-Id"}, keys); d != "" {
		t.Fatalf("job headers (-want +got)\n%s", d)
	}
	want := `{"specversion":"1.0","id":"e1.job","source":"/skillbus/router","type":"io.skillbus.job","causationid":"a1.route.decided","traceparent":"` + tp + `","data":{"activation_id":"a1","execution_id":"e1"}}`
	if string(m.Data) != want {
		t.Fatalf("job\n%s\nwant\n%s", m.Data, want)
	}
	if !bus.ReadsStructuredItself(m) {
		t.Fatal("DecodeFast reads a job through the SDK")
	}
	b, err := bus.DecodeFast(bus.FromNATS(m))
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != "e1.job" || b.Type != events.TypeJob || b.ContentType != "" || string(b.Data) != `{"activation_id":"a1","execution_id":"e1"}` ||
		b.Meta() != (bus.Meta{CausationID: "a1.route.decided", TraceParent: tp}) || bus.MsgID(m) != "e1.job" {
		t.Fatalf("job read back as %+v", viewOf(b))
	}
	decodeFastAgrees(t, m)
	delete(m.Header, "Nats-Msg-Id") // as a create-only publish sends it
	if bus.MsgID(m) != "e1.job" {
		t.Fatalf("MsgID = %q without Nats-Msg-Id", bus.MsgID(m))
	}
}

func structuredMsg(body string) *nats.Msg {
	m := nats.NewMsg("skillbus.exec.default.x.a1.job")
	m.Header["Content-Type"] = []string{"application/cloudevents+json"}
	m.Data = []byte(body)
	return m
}

// DecodeFast reads a compact structured-mode event, as jobs are written, itself,
// and anything it is not sure of through Decode: either way the same event.
func TestDecodeFastAgreesOnStructured(t *testing.T) {
	t.Parallel()
	const head = `{"specversion":"1.0","id":"e1.job","source":"/skillbus/router","type":"io.skillbus.job"`
	for name, body := range map[string]string{
		"plain":              head + `,"data":{"execution_id":"e1"}}`,
		"extensions":         head + `,"causationid":"a1.route.decided","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","data":{"a":[1,2.5e3,-0,"x\"y\u00e9",true,false,null,{}]}}`,
		"data first":         `{"data":[1],"specversion":"1.0","id":"1","source":"/s","type":"t"}`,
		"json content type":  head + `,"datacontenttype":"application/json","data":{}}`,
		"text content type":  head + `,"datacontenttype":"text/plain","data":"x"}`,
		"time":               head + `,"time":"2026-01-02T03:04:05Z","data":{}}`,
		"bad time":           head + `,"time":"now","data":{}}`,
		"subject":            head + `,"subject":"s","data":{}}`,
		"no data":            head + `}`,
		"null data":          head + `,"data":null}`,
		"string data":        head + `,"data":"x"}`,
		"data_base64":        head + `,"data_base64":"eyJhIjoxfQ=="}`,
		"repeated key":       head + `,"id":"2","data":{}}`,
		"spaces":             `{ "specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": {} }`,
		"escaped attribute":  `{"specversion":"1.0","id":"a\u0041","source":"/s","type":"t","data":{}}`,
		"number extension":   head + `,"n":1,"data":{}}`,
		"bad extension":      head + `,"skill_name":"x","data":{}}`,
		"spec 0.3":           `{"specversion":"0.3","id":"1","source":"/s","type":"t","data":{}}`,
		"blank id":           `{"specversion":"1.0","id":" ","source":"/s","type":"t","data":{}}`,
		"no source":          `{"specversion":"1.0","id":"1","type":"t","data":{}}`,
		"bad data":           head + `,"data":{"a":}}`,
		"unterminated":       head + `,"data":{"a":1}`,
		"trailing":           head + `,"data":{}}x`,
		"bad number":         head + `,"data":[01]}`,
		"invalid utf-8":      head + ",\"data\":[\"\xff\"]}",
		"deep":               head + `,"data":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`,
		"deepest":            head + `,"data":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
		"too deep":           head + `,"data":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
		"lone surrogate":     head + `,"data":["\ud800"]}`,
		"duplicate in data":  head + `,"data":{"a":1,"a":2}}`,
		"escapes in data":    head + `,"data":{"\u0000":"\/\b\f\n\r\t"}}`,
		"bad escape in data": head + `,"data":{"a":"\x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			decodeFastAgrees(t, structuredMsg(body))
			fast := map[string]bool{"plain": true, "extensions": true, "data first": true, "json content type": true, "time": true, "subject": true, "escapes in data": true,
				"lone surrogate": true, "duplicate in data": true}[name]
			if got := bus.ReadsStructuredItself(structuredMsg(body)); got != fast {
				t.Errorf("read without Decode: %v, want %v", got, fast)
			}
		})
	}
	// With a ce- header too, or another spelling of Content-Type, Decode decides.
	m := structuredMsg(head + `,"data":{}}`)
	m.Header["ce-id"] = []string{"other"}
	decodeFastAgrees(t, m)
	m = structuredMsg(head + `,"data":{}}`)
	m.Header["content-type"] = m.Header["Content-Type"]
	delete(m.Header, "Content-Type")
	decodeFastAgrees(t, m)
}

func FuzzDecodeFastStructured(f *testing.F) {
	f.Add(`{"specversion":"1.0","id":"e1.job","source":"/skillbus/router","type":"io.skillbus.job","causationid":"c","data":{"a":[1,"b",{"c":null}]}}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"HTTPS://x/y","type":"t","time":"2026-01-02T03:04:05Z","data":[1e5,-0.5,"\u00e9"]}`)
	f.Add(`{"data":{},"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/json"}`)
	f.Fuzz(func(t *testing.T, body string) {
		decodeFastAgrees(t, structuredMsg(body))
	})
}

// DecodeUnchecked takes a structured event's last data member without checking its
// grammar; whenever what it took is JSON — or a job the worker's decoder reads, which
// is the condition the worker goes by — it is the event DecodeFast reads.
func FuzzDecodeUnchecked(f *testing.F) {
	f.Add(`{"specversion":"1.0","id":"e1.job","source":"/skillbus/router","type":"io.skillbus.job","causationid":"c","data":{"execution_id":"e1","skill":{"name":"s"}}}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1},"x":"y"}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1} }`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1},"data":{"b":2}}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":[1,2}`)
	f.Add(`{"data":{},"specversion":"1.0","id":"1","source":"/s","type":"t"}`)
	f.Fuzz(func(t *testing.T, body string) {
		m := structuredMsg(body)
		lazy, ok := bus.DecodeUnchecked(bus.FromNATS(m))
		if !ok {
			return
		}
		var j events.Job
		if !json.Valid(lazy.Data) && events.DecodeJobWithoutRoute(lazy.Data, &j) != nil {
			return // the reader falls back to DecodeFast
		}
		fast, err := bus.DecodeFast(bus.FromNATS(m))
		if err != nil {
			t.Fatalf("%s: DecodeUnchecked read data %s; DecodeFast: %v", body, lazy.Data, err)
		}
		if d := cmp.Diff(viewOf(fast), viewOf(lazy)); d != "" {
			t.Fatalf("%s: (-DecodeFast +DecodeUnchecked)\n%s", body, d)
		}
	})
}

// Every job and event skillbus writes is read by DecodeUnchecked itself.
func TestDecodeUncheckedReadsWhatItWrote(t *testing.T) {
	t.Parallel()
	job, err := bus.Event{ID: "e1.job", Source: "/skillbus/router", Type: events.TypeJob, Meta: bus.Meta{CausationID: "c"}}.
		JobMsgOf("skillbus.exec.default.x.a1.plan", &events.Job{ExecutionID: "e1", Skill: events.SkillRef{Name: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := bus.Event{ID: "e1.outcome", Source: "/w", Type: events.TypeExecutionCompleted, Data: events.ExecutionCompleted{ExecutionID: "e1"}}.Msg("s")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*nats.Msg{job, ev} {
		lazy, ok := bus.DecodeUnchecked(bus.FromNATS(m))
		fast, err := bus.DecodeFast(bus.FromNATS(m))
		if !ok || err != nil || cmp.Diff(viewOf(fast), viewOf(lazy)) != "" {
			t.Fatalf("%s: %v %v %+v %+v", m.Data, ok, err, lazy, fast)
		}
	}
}

// BenchmarkDecodeStructured reads a job as the router writes it: checked (as
// DecodeFast does) and unchecked (as a worker does).
func BenchmarkDecodeStructured(b *testing.B) {
	m, err := bus.Event{ID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.summarize.job", Source: "/skillbus/router", Type: events.TypeJob,
		Meta: bus.Meta{CausationID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.route.decided", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}.
		JobMsgOf("skillbus.exec.default.summarize.a1.plan", &events.Job{ExecutionID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.summarize",
			ActivationID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V", Skill: events.SkillRef{Name: "summarize", Version: "1.2.0", Pool: "default"},
			Inputs:  json.RawMessage(`{"text":"The quick brown fox jumps over the lazy dog.","max_words":20,"tags":["a","b"],"nested":{"x":[1.5,true,null]}}`),
			Trigger: events.TriggerRef{ID: "b7c1e2f0-3a4d-4e5f-8a9b-0c1d2e3f4a5b", Source: "/bench", Type: "com.example.doc.created", Subject: "skillbus.trigger.com.example.doc.created", Seq: 123456}})
	if err != nil {
		b.Fatal(err)
	}
	if !bus.ReadsStructuredItself(m) {
		b.Fatal("the job is not read without Decode")
	}
	b.Run("checked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bus.DecodeFast(bus.FromNATS(m)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchecked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := bus.DecodeUnchecked(bus.FromNATS(m)); !ok {
				b.Fatal("not read")
			}
		}
	})
}

// The time attribute is kept as the event spells it, whichever path reads it:
// flow-control filters read it.
func TestDecodeKeepsTime(t *testing.T) {
	t.Parallel()
	const at = "2026-11-27T04:30:00.5Z"
	structured := &nats.Msg{Subject: "skillbus.trigger.x", Header: nats.Header{"Content-Type": []string{"application/cloudevents+json"}},
		Data: []byte(`{"specversion":"1.0","id":"1","source":"/t","type":"x","time":"` + at + `","data":{"a":1}}`)}
	sdk := &nats.Msg{Subject: "skillbus.trigger.x", Header: nats.Header{"Content-Type": []string{"application/cloudevents+json"}},
		Data: []byte(`{"specversion":"1.0","id":"1","source":"/t","type":"x","time":"` + at + `","datacontenttype":"text/plain","data":"hi"}`)}
	binary := &nats.Msg{Subject: "skillbus.trigger.x", Header: nats.Header{events.HeaderCESpecVersion: []string{"1.0"}, events.HeaderCEID: []string{"1"},
		events.HeaderCESource: []string{"/t"}, events.HeaderCEType: []string{"x"}, events.HeaderCETime: []string{at}}, Data: []byte(`{}`)}
	for name, m := range map[string]*nats.Msg{"structured": structured, "sdk": sdk, "binary": binary} {
		b, err := bus.DecodeFast(bus.FromNATS(m))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.Time != at {
			t.Errorf("%s: Time = %q, want %q", name, b.Time, at)
		}
	}
	if b, ok := bus.DecodeUnchecked(bus.FromNATS(structured)); !ok || b.Time != at {
		t.Errorf("DecodeUnchecked: ok %v, Time %+v", ok, b)
	}
}
