package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

type jsonAppender interface {
	AppendJSON([]byte) ([]byte, error)
}

// sameAsMarshal fails t unless v.AppendJSON writes what json.Marshal writes for v,
// fails where it fails (with the same message), and leaves what it appends to alone.
func sameAsMarshal(t testing.TB, label string, v jsonAppender) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	prefix := []byte("prefix:")
	got, gotErr := v.AppendJSON(prefix[:len(prefix):len(prefix)])
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%s: json.Marshal error %v, AppendJSON error %v (wrote %s)", label, wantErr, gotErr, got)
	}
	if wantErr != nil {
		if wantErr.Error() != gotErr.Error() {
			t.Fatalf("%s: errors differ:\njson.Marshal: %v\nAppendJSON:   %v", label, wantErr, gotErr)
		}
		if string(got) != "prefix:" {
			t.Fatalf("%s: on error AppendJSON returned %q, want the buffer as it was", label, got)
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%s: AppendJSON lost the buffer's contents: %q", label, got)
	}
	if got = got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("%s: output differs\njson.Marshal: %s\nAppendJSON:   %s", label, want, got)
	}
}

// encoded are the types that encode themselves; each must stay byte-identical to
// json.Marshal.
var encoded = []jsonAppender{Job{}, JobRoute{}, ExecutionCompleted{}, ExecutionFailed{}, ExecutionFallback{}}

// trickyStrings exercise every escape json.Marshal makes.
var trickyStrings = []string{
	"", "plain", `quote" back\slash /slash`, "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"line\u2028para\u2029", "\xff", "a\xc3(b", "\xe2\x80", "\xe2\x80\xa8\xe2\x80\xa9", "\uFFFD real replacement char",
	"日本語 ✓ 😀", "\xf0\x9f\x98", "\xed\xa0\x80", "tab\tand\x19",
}

var trickyFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e20, 1e21, 1e-6, 1e-7, 9.999999e-7, 123456789.123456789,
	5e-324, math.MaxFloat64, -math.MaxFloat64, 1.2e-9, -3e-10, 1e100, math.SmallestNonzeroFloat64, 100, 12345678901234567890,
	-42, 1 << 24, 1<<24 + 1, 1<<24 + 2, 123456789, 1<<53 - 1, 1 << 53, 1<<53 + 2, -(1<<53 - 1), 4.5, 1e15, 1e16,
}

var badFloats = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}

// trickyValues are dynamic values an execution's outputs or a plan's parameters
// may hold.
func trickyValues() map[string]any {
	m := map[string]any{
		"nil": nil, "true": true, "false": false, "int": 42, "int8": int8(-8), "int16": int16(-16), "int32": int32(-32),
		"int64": int64(math.MinInt64), "uint": uint(7), "uint8": uint8(255), "uint16": uint16(65535), "uint32": uint32(1 << 31),
		"uint64": uint64(math.MaxUint64), "float32": float32(3.1415927), "float32small": float32(1e-7), "float32big": float32(1e21),
		"float32odd": float32(0.1), "number": json.Number("-12.5e+3"), "number0": json.Number(""),
		"raw": json.RawMessage(" { \"a\" : [ 1 , \"<b>&\u2028\" , \"\\\"\\\\ \" ] } \n"), "rawnil": json.RawMessage(nil),
		"nilmap": map[string]any(nil), "nilslice": []any(nil), "emptymap": map[string]any{}, "emptyslice": []any{},
		"strings": []string{"a", "<"}, "nilstrings": []string(nil), "smap": map[string]string{"z": "1", "a": "<"},
		"nilsmap": map[string]string(nil), "time": time.Date(2024, 2, 29, 13, 4, 5, 123456789, time.FixedZone("x", -5*3600-30*60)),
		"utc": time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "struct": struct {
			A string `json:"a"`
			B int    `json:"b,omitempty"`
		}{A: "<"}, "ptr": new(int), "named": namedString("x"), "intmap": map[string]int{"b": 1, "a": 2},
		"bytes": []byte("hello"), "nested": []any{map[string]any{"z": []any{1.5, "x", nil}, "a": map[string]any{}}},
		"rawptr": &json.RawMessage{'[', ' ', ']'}, "map of any": map[int]any{2: "b", 1: "a"},
	}
	for i, s := range trickyStrings {
		m[s] = s
		m[fmt.Sprintf("s%02d", i)] = []any{s, map[string]any{s: s}}
	}
	for i, f := range trickyFloats {
		m[fmt.Sprintf("f%02d", i)] = f
	}
	return m
}

type namedString string

func (n namedString) MarshalJSON() ([]byte, error) { return []byte(` "named" `), nil }

func TestAppendJSONStrings(t *testing.T) {
	for _, s := range trickyStrings {
		sameAsMarshal(t, fmt.Sprintf("string %q", s), Job{ExecutionID: s, Skill: SkillRef{Name: s, Version: s}, Together: [][]string{{s}}})
		sameAsMarshal(t, fmt.Sprintf("key %q", s), ExecutionCompleted{Outputs: map[string]any{s: s, "b": s}})
	}
}

func TestAppendJSONFloats(t *testing.T) {
	for _, f := range trickyFloats {
		for _, v := range []jsonAppender{
			ExecutionCompleted{DurationMS: f, Outputs: map[string]any{"f": f, "g": -f, "f32": float32(f)}},
			Job{Skill: SkillRef{Score: f}},
			JobRoute{Threshold: f, Candidates: []Candidate{{Score: f, Components: ScoreComponents{Cost: f}}}},
		} {
			sameAsMarshal(t, fmt.Sprintf("%T %v", v, f), v)
		}
	}
	for _, f := range badFloats {
		for _, v := range []jsonAppender{
			ExecutionCompleted{DurationMS: f},
			ExecutionCompleted{Outputs: map[string]any{"a": 1, "f": f}},
			ExecutionCompleted{Outputs: map[string]any{"f": float32(f)}},
			ExecutionFailed{DurationMS: f},
			ExecutionFallback{DurationMS: f},
			Job{Skill: SkillRef{Score: f}},
			Job{Fallback: []SkillRef{{Score: f}}},
			JobRoute{Threshold: f},
			JobRoute{Primary: &SkillRef{Score: f}},
			JobRoute{Parameters: map[string]any{"x": []any{f}}},
			JobRoute{Candidates: []Candidate{{Components: ScoreComponents{Intent: f}}}},
		} {
			sameAsMarshal(t, fmt.Sprintf("%T %v", v, f), v)
		}
	}
}

func TestAppendJSONDynamic(t *testing.T) {
	vals := trickyValues()
	sameAsMarshal(t, "all", ExecutionCompleted{Outputs: vals})
	sameAsMarshal(t, "parameters", JobRoute{Parameters: vals})
	for k, v := range vals {
		sameAsMarshal(t, fmt.Sprintf("%q", k), ExecutionCompleted{Outputs: map[string]any{"v": v}})
		sameAsMarshal(t, fmt.Sprintf("%q in a slice", k), ExecutionCompleted{Outputs: map[string]any{"v": []any{v, v}}})
	}
	sameAsMarshal(t, "nil outputs", ExecutionCompleted{})
	sameAsMarshal(t, "empty outputs", ExecutionCompleted{Outputs: map[string]any{}})
	sameAsMarshal(t, "many keys", ExecutionCompleted{Outputs: func() map[string]any {
		m := map[string]any{}
		for i := range 100 {
			m[fmt.Sprint(i*7919%1000)] = i
		}
		return m
	}()})
}

func TestAppendJSONErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	cyclicSlice := []any{nil}
	cyclicSlice[0] = cyclicSlice
	for name, v := range map[string]any{
		"invalid number":    json.Number("1.2.3"),
		"number with space": json.Number(" 1"),
		"empty raw":         json.RawMessage{},
		"invalid raw":       json.RawMessage(`{"a":}`),
		"truncated raw":     json.RawMessage(`[1,2`),
		"two raw values":    json.RawMessage(`1 2`),
		"year 10000":        time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		"year -1":           time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		"zone 24h":          time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
		"cycle":             cyclic,
		"slice cycle":       cyclicSlice,
		"channel":           make(chan int),
		"func":              func() {},
		"complex":           complex(1, 2),
	} {
		sameAsMarshal(t, name, ExecutionCompleted{Outputs: map[string]any{"a": 1, "v": v}})
		sameAsMarshal(t, name+" in parameters", JobRoute{Parameters: map[string]any{"v": []any{v}}})
	}
	deep := any("leaf")
	for range 1500 { // deeper than the depth at which cycles are looked for, yet no cycle
		deep = map[string]any{"d": []any{deep}}
	}
	sameAsMarshal(t, "deep", ExecutionCompleted{Outputs: map[string]any{"v": deep}})
}

func TestAppendJSONRaw(t *testing.T) {
	for _, raw := range append([]string{
		`{}`, `[]`, `null`, `1`, `"s"`, " \t\r\n{ \"a\" :\t1 ,\n\"b\" : [ true , false , null ] }\n ",
		`{"html":"<a href=\"x\">&</a>"}`, "{\"ls\":\"\u2028\u2029\"}", `"\u2028 escaped already \\"`,
		"\"\xff invalid utf8 kept\"", `{"esc":"\" \\ \/ \b \f \n \r \t \u00e9"}`, `[1e10,-0.5E-3,0]`,
		`{"a" : "  spaces inside  " }`, `{`, `}`, `"unterminated`, `tru`, `[1,]`, `{"a":1,}`, "\"\x01\"", ` `,
		`{"a":1}{"b":2}`, "\"\xe2\x80\xa8\"", "\"\xe2\x80\"", `01`, `-`, `{"\u003c":"\u003e"}`,
	}, `[[]`, `{"a":1,}`, `"\u12"`, "\"a\nb\"") {
		for _, v := range []jsonAppender{
			Job{Inputs: json.RawMessage(raw)},
			ExecutionCompleted{Log: json.RawMessage(raw)},
			ExecutionFailed{Log: json.RawMessage(raw)},
			ExecutionFallback{Log: json.RawMessage(raw)},
			ExecutionCompleted{Outputs: map[string]any{"raw": json.RawMessage(raw)}},
		} {
			sameAsMarshal(t, fmt.Sprintf("%T %q", v, raw), v)
		}
	}
}

// TestAppendJSONEveryField sets every field of every encoded type, one at a time
// and all at once, found by reflection: a field added to one of these types that
// its AppendJSON does not write fails here.
func TestAppendJSONEveryField(t *testing.T) {
	for _, proto := range encoded {
		typ := reflect.TypeOf(proto)
		t.Run(typ.Name(), func(t *testing.T) {
			full := reflect.New(typ).Elem()
			fill(t, full, true)
			sameAsMarshal(t, "every field set", full.Interface().(jsonAppender))
			sameAsMarshal(t, "zero", reflect.Zero(typ).Interface().(jsonAppender))
			n := 0
			for _, v := range variants(t, typ) {
				sameAsMarshal(t, fmt.Sprintf("variant %d", n), v.Interface().(jsonAppender))
				n++
			}
			// Every field must show up in the output with its value set, unless
			// encoding/json leaves it out too.
			out, err := full.Interface().(jsonAppender).AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(out, &members); err != nil {
				t.Fatal(err)
			}
			for f := range typ.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if _, ok := members[name]; !ok && name != "-" {
					t.Errorf("field %s (%q) not written when set", f.Name, name)
				}
			}
		})
	}
}

// fill sets every exported field of v (recursively) to a value that is not
// empty. Variety picks values that need escaping.
func fill(t testing.TB, v reflect.Value, variety bool) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(` {"in" : ["<&>", 1.5e-7]} `))
		return
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2025, 6, 1, 2, 3, 4, 5, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		if variety {
			v.SetString("s<\u2028\xff\"")
		} else {
			v.SetString("s")
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(-1.25e-7)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), variety)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(t, s.Index(0), variety)
		fill(t, s.Index(1), !variety)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range []string{"zz", "a<"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, variety)
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"x": []any{"<", 1.5, true, nil}}))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), variety)
			}
		}
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}

// variants returns values of t, a struct type, with one field set (recursively: a
// nested struct with one of its fields set) and the rest zero, plus empty but
// non-nil slices and maps.
func variants(t testing.TB, typ reflect.Type) []reflect.Value {
	var out []reflect.Value
	for i := range typ.NumField() {
		if !typ.Field(i).IsExported() {
			continue
		}
		for _, fv := range fieldVariants(t, typ.Field(i).Type) {
			v := reflect.New(typ).Elem()
			v.Field(i).Set(fv)
			out = append(out, v)
		}
	}
	return out
}

func fieldVariants(t testing.TB, ft reflect.Type) []reflect.Value {
	filled := reflect.New(ft).Elem()
	fill(t, filled, true)
	vs := []reflect.Value{filled}
	switch ft.Kind() {
	case reflect.Struct:
		if ft != reflect.TypeFor[time.Time]() {
			vs = append(vs, variants(t, ft)...)
		}
	case reflect.Pointer:
		vs = append(vs, reflect.New(ft.Elem()))
		if ft.Elem().Kind() == reflect.Struct {
			for _, ev := range variants(t, ft.Elem()) {
				p := reflect.New(ft.Elem())
				p.Elem().Set(ev)
				vs = append(vs, p)
			}
		}
	case reflect.Slice:
		vs = append(vs, reflect.MakeSlice(ft, 0, 0))
		if ft.Elem().Kind() == reflect.Struct {
			for _, ev := range variants(t, ft.Elem()) {
				s := reflect.MakeSlice(ft, 1, 1)
				s.Index(0).Set(ev)
				vs = append(vs, s)
			}
		} else {
			s := reflect.MakeSlice(ft, 1, 1) // one zero element: a nil inner slice, ...
			vs = append(vs, s)
		}
	case reflect.Map:
		vs = append(vs, reflect.MakeMap(ft))
		m := reflect.MakeMap(ft) // one zero element
		m.SetMapIndex(reflect.ValueOf("k").Convert(ft.Key()), reflect.Zero(ft.Elem()))
		vs = append(vs, m)
	case reflect.Float32, reflect.Float64:
		for _, f := range append(trickyFloats, badFloats...) {
			v := reflect.New(ft).Elem()
			v.SetFloat(f)
			vs = append(vs, v)
		}
	}
	return vs
}

// FuzzAppendJSON builds the encoded types from fuzzed strings, numbers and JSON
// and checks that AppendJSON writes what json.Marshal writes, and fails where it
// fails.
func FuzzAppendJSON(f *testing.F) {
	f.Add("exec-1", "act-1", 1.5, int64(3), uint64(9), true, []byte(`{"a":[1,"x",{"b":null}]}`))
	f.Add("", "", 0.0, int64(0), uint64(0), false, []byte(nil))
	f.Add("<&>", "\u2028\xff", 1e21, int64(-1), uint64(math.MaxUint64), true, []byte(" [ 1e-7 , \"<\" ] "))
	f.Add("a\"b\\c", "\x00\x1f\x7f", math.Inf(1), int64(1<<40), uint64(1), false, []byte(`{"a":}`))
	f.Add("k", "12.5e3", math.NaN(), int64(253402300800), uint64(86400*2), true, []byte(`"\u2028"`))
	f.Add("1.2.3", "v", -0.0, int64(-62135596801), uint64(5), true, []byte(`{"z":1,"a":{"c":[],"b":{}}}`))
	f.Add("日本", "😀", 5e-324, int64(math.MaxInt64), uint64(1<<63), false, []byte(`[]`))
	f.Fuzz(func(t *testing.T, s1, s2 string, x float64, n int64, u uint64, flag bool, raw []byte) {
		var parsed, parsedNum any
		if json.Unmarshal(raw, &parsed) != nil {
			parsed = string(raw)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if d.Decode(&parsedNum) != nil {
			parsedNum = raw
		}
		zone := time.FixedZone(s2, int(n%(50*3600)))
		dyn := map[string]any{
			s1: s2, s2: parsed, "num": parsedNum, "x": x, "x32": float32(x), "n": n, "u": u, "flag": flag,
			"number": json.Number(s1), "raw": json.RawMessage(raw), "time": time.Unix(n, int64(u%1e9)).In(zone),
			"list": []any{s1, x, []string{s2}, map[string]string{s1: s2, s2: s1}, int32(n), uint16(u)},
		}
		ref := SkillRef{Name: s1, Version: s2, Digest: s1, Pool: s2, ExecutionID: s1 + s2, Source: s2, Score: x}
		var hist []Attempt
		var rep *JobRepair
		if flag {
			hist = []Attempt{{Skill: s1, ExecutionID: s2, Class: s1, Error: s2, Deliveries: u}, {}}
			rep = &JobRepair{ID: s1, BudgetKey: s2, Attempts: int(n), Declined: s1, Step: s2, From: s1}
		}
		for _, v := range []jsonAppender{
			Job{ExecutionID: s1, ActivationID: s2, Skill: ref, Inputs: raw, Trigger: TriggerRef{ID: s1, Source: s2, Subject: s1, Seq: u},
				Fallback: []SkillRef{ref, {}}, History: hist, Answers: map[string]Answer{s1: {Approved: flag, By: s2}, s2: {Reason: s1}},
				Depth: int(n), Repair: rep, Together: [][]string{{s1, s2}, nil}, Live: flag},
			JobRoute{Primary: &ref, FallbackChain: []SkillRef{ref}, ParallelGroups: [][]string{{s1}}, EstimatedCost: int(n),
				Parameters: dyn, Threshold: x, Candidates: []Candidate{{Name: s1, Sources: []string{s2}, Score: x,
					Components: ScoreComponents{Intent: x, Available: flag}, Reason: s2}}},
			ExecutionCompleted{ExecutionID: s1, ActivationID: s2, Skill: s1, Version: s2, Outputs: dyn, DurationMS: x, Attempt: u, Log: raw},
			ExecutionCompleted{ExecutionID: s1, Outputs: map[string]any{"v": parsed, "n": parsedNum}, Log: raw},
			ExecutionFailed{ExecutionID: s1, Skill: s2, StepID: s1, Class: s2, Error: s1, Attempt: u, History: hist,
				Denied: flag, DurationMS: x, Worker: s2, Log: raw, RepairID: s1, Digest: s2},
			ExecutionFallback{ExecutionID: s1, ActivationID: s2, Next: s1, NextExecutionID: s2, Attempt: u, DurationMS: x, Log: raw},
		} {
			sameAsMarshal(t, fmt.Sprintf("%T", v), v)
		}
	})
}

func typicalJob() Job {
	ref := SkillRef{Name: "summarize", Version: "1.2.0", Digest: "sha256:9f86d081884c7d65", Pool: "default",
		ExecutionID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.summarize", Source: "rule", Score: 0.8125}
	return Job{
		ExecutionID: ref.ExecutionID, ActivationID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V", Skill: ref,
		Inputs:  json.RawMessage(`{"text":"The quick brown fox jumps over the lazy dog.","max_words":20}`),
		Trigger: TriggerRef{ID: "b7c1e2f0-3a4d-4e5f-8a9b-0c1d2e3f4a5b", Source: "/bench", Type: "com.example.doc.created", Subject: "skillbus.trigger.com.example.doc.created", Seq: 123456},
	}
}

// routedJob is the job of a plan of one skill as a router writes it: the
// decision rides in its route.
func routedJob() Job {
	j := typicalJob()
	j.Route = &JobRoute{Threshold: 0.35, Candidates: []Candidate{{Name: "summarize", Version: "1.2.0", Source: "rule", Sources: []string{"rule"}, Score: 0.8125,
		Components: ScoreComponents{Intent: 0, Trigger: 1, Success: 1, Context: 0, Cost: 0, Conflict: 0, Available: true}, Selected: true, Role: "primary"}}}
	return j
}

func typicalCompleted() ExecutionCompleted {
	return ExecutionCompleted{
		ExecutionID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.summarize", ActivationID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V", Skill: "summarize",
		Version: "1.2.0", Outputs: map[string]any{"summary": "A fox jumps over a dog.", "words": 6.0, "ok": true},
		DurationMS: 1.234567, Attempt: 1, Worker: "worker-1",
		Log: json.RawMessage(`[{"step":"summarize","status":"completed","duration_ms":1.2,"result":"A fox jumps over a dog."}]`),
	}
}

func TestAppendJSONTypical(t *testing.T) {
	sameAsMarshal(t, "job", typicalJob())
	sameAsMarshal(t, "routed job", routedJob())
	sameAsMarshal(t, "completed", typicalCompleted())
}

func BenchmarkJSON(b *testing.B) {
	for name, v := range map[string]jsonAppender{"Job": typicalJob(), "RoutedJob": routedJob(), "ExecutionCompleted": typicalCompleted()} {
		b.Run(name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.AppendJSON(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
