package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonx"
)

// jobToDecode is a job as the router publishes it for a plan's primary skill.
func jobToDecode() Job {
	return Job{
		ExecutionID:  "exec_6f1c2a9be0d94c1a8d3f7e52",
		ActivationID: "act_0b5e8f7d2c1a4e6f9b3d",
		Skill: SkillRef{Name: "summarize-ticket", Version: "1.4.0", Digest: "sha256:9f2c4e1b7a3d5f60",
			Pool: "default", ExecutionID: "exec_6f1c2a9be0d94c1a8d3f7e52", Source: "rule", Score: 0.87},
		Inputs:   json.RawMessage(`{"ticket":"T-1234","text":"Printer on floor 3 is jammed\nagain <urgent>","priority":2,"tags":["hw","office"]}`),
		Trigger:  TriggerRef{ID: "evt-42", Source: "helpdesk", Type: "com.example.ticket.created", Subject: "skillbus.triggers.com.example.ticket.created", Seq: 1234567},
		Fallback: []SkillRef{{Name: "triage", Pool: "default", ExecutionID: "exec_a1", Source: "rule"}},
		Together: [][]string{{"exec_6f1c2a9be0d94c1a8d3f7e52", "exec_a1"}},
		Live:     true,
	}
}

// fullJobToDecode has every field of a job set, as a fallback job resumed after a repair
// and a confirmation carries them.
func fullJobToDecode() Job {
	j := jobToDecode()
	j.History = []Attempt{{Skill: "first", ExecutionID: "exec_0", Class: "retryable", Error: "timeout: \"upstream\" \u00e9\u4e16\U0001F600", Deliveries: 3}}
	j.Answers = map[string]Answer{"confirm": {Approved: true, By: "alice"}, "deny\tstep": {Reason: "no"}}
	j.Depth = 2
	j.Repair = &JobRepair{ID: "rep_1", BudgetKey: "k", Attempts: 1, Declined: "expired", Step: "s", Error: "e", Class: "repairable", From: "sha256:00"}
	j.Fallback = append(j.Fallback, SkillRef{Name: "last", Score: -1.5e-7})
	j.Together = append(j.Together, []string{}, nil)
	return j
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkDecodeJob asserts DecodeJob decodes data as jsonx.Unmarshal does, and
// reports whether it took the fast path.
func checkDecodeJob(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	var want, got, quick Job
	werr := jsonx.Unmarshal(data, &want)
	gerr := DecodeJob(data, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: jsonx %v, DecodeJob %v", data, werr, gerr)
	}
	if werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("%q: jsonx %v, DecodeJob %v", data, werr, gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\njsonx     %#v\nDecodeJob %#v", data, want, got)
	}
	fast = decodeJobFast(data, &quick, false)
	switch {
	case !fast && !reflect.DeepEqual(quick, Job{}):
		t.Fatalf("%q: the fast path gave up but left %#v", data, quick)
	case fast && werr != nil:
		t.Fatalf("%q: the fast path decoded what jsonx refuses (%v): %#v", data, werr, quick)
	case fast && !reflect.DeepEqual(want, quick):
		t.Fatalf("%q:\njsonx     %#v\nfast path %#v", data, want, quick)
	}
	checkDecodeJobWithoutRoute(t, data)
	return fast
}

// checkDecodeJobWithoutRoute asserts DecodeJobWithoutRoute decodes data as jsonx
// decodes all of it but the route, never sets the route, and takes the fast path
// wherever DecodeJob does; it reports whether it took the fast path.
func checkDecodeJobWithoutRoute(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	var want, got, quick Job
	werr := jsonx.Unmarshal(data, &jobWithoutRoute{Job: &want})
	gerr := DecodeJobWithoutRoute(data, &got)
	// Its errors name the job's type, as DecodeJob's do, not the wrapper's.
	if (werr == nil) != (gerr == nil) || werr != nil && (strings.NewReplacer("jobWithoutRoute.", "Job.", "events.jobWithoutRoute", "events.Job").Replace(werr.Error()) != gerr.Error() || strings.Contains(gerr.Error(), "jobWithoutRoute")) {
		t.Fatalf("%q: jsonx %v, DecodeJobWithoutRoute %v", data, werr, gerr)
	}
	if !reflect.DeepEqual(want, got) || got.Route != nil {
		t.Fatalf("%q:\njsonx                 %#v\nDecodeJobWithoutRoute %#v", data, want, got)
	}
	var full Job
	if werr == nil && jsonx.Unmarshal(data, &full) == nil {
		full.Route = nil
		if !reflect.DeepEqual(full, got) {
			t.Fatalf("%q:\nDecodeJob without its route %#v\nDecodeJobWithoutRoute       %#v", data, full, got)
		}
	}
	// In place, it decodes the same.
	own := bytes.Clone(data)
	var inPlace Job
	if ierr := DecodeJobInPlace(own, &inPlace); (ierr == nil) != (gerr == nil) || ierr != nil && ierr.Error() != gerr.Error() || !reflect.DeepEqual(got, inPlace) {
		t.Fatalf("%q:\nDecodeJobWithoutRoute %#v (%v)\nDecodeJobInPlace      %#v (%v)", data, got, gerr, inPlace, ierr)
	}
	fast = decodeJobFast(data, &quick, true)
	switch {
	case !fast && !reflect.DeepEqual(quick, Job{}):
		t.Fatalf("%q: the fast path gave up but left %#v", data, quick)
	case fast && werr != nil:
		t.Fatalf("%q: the fast path decoded what jsonx refuses (%v): %#v", data, werr, quick)
	case fast && !reflect.DeepEqual(want, quick):
		t.Fatalf("%q:\njsonx     %#v\nfast path %#v", data, want, quick)
	case !fast && decodeJobFast(data, &Job{}, false):
		t.Fatalf("%q: DecodeJob takes the fast path, DecodeJobWithoutRoute does not", data)
	}
	return fast
}

// TestDecodeJobInPlaceCopiesNothing: the strings DecodeJobInPlace decodes are
// the data's own bytes, and its inputs a copy of theirs.
func TestDecodeJobInPlaceCopiesNothing(t *testing.T) {
	data := mustMarshal(t, jobToDecode())
	var j Job
	if err := DecodeJobInPlace(data, &j); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{j.ExecutionID, j.ActivationID, j.Skill.Name, j.Trigger.Source} {
		if s == "" || !sliceOf(s, data) {
			t.Fatalf("%q is not a slice of the job's data", s)
		}
	}
	if len(j.Inputs) == 0 || sliceOf(string(j.Inputs), data) {
		t.Fatalf("inputs %s are not a copy", j.Inputs)
	}
	inPlace := testing.AllocsPerRun(100, func() { j = Job{}; _ = DecodeJobInPlace(data, &j) })
	copied := testing.AllocsPerRun(100, func() { j = Job{}; _ = DecodeJobWithoutRoute(data, &j) })
	if inPlace != copied-1 {
		t.Fatalf("DecodeJobInPlace allocates %v times, DecodeJobWithoutRoute %v", inPlace, copied)
	}
}

// sliceOf reports whether s lies in b's bytes.
func sliceOf(s string, b []byte) bool {
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(s)) <= start+uintptr(len(b))
}

// FuzzDecodeJob: DecodeJob, and its fast path whenever it takes it, decodes
// whatever it is given exactly as jsonx.Unmarshal does; DecodeJobWithoutRoute
// decodes it as jsonx does all but the route.
func FuzzDecodeJob(f *testing.F) {
	routed := jobToDecode()
	routed.Route = &JobRoute{Threshold: 0.5, Candidates: []Candidate{{Name: "a", Score: 0.9, Reason: "primary"}}}
	for _, j := range []Job{jobToDecode(), fullJobToDecode(), routed, {}} {
		f.Add(mustMarshal(f, j))
		b, _ := json.MarshalIndent(j, "", "\t")
		f.Add(b)
	}
	for _, c := range decodeJobCases {
		f.Add([]byte(c.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeJob(t, data) })
}

// FuzzDecodeJobValues: a job with any values in its fields, as json.Marshal writes
// it, takes the fast path and decodes to itself.
func FuzzDecodeJobValues(f *testing.F) {
	f.Add("exec_1", "a<b>&c\u2028\"\\\n\x01é世😀", int64(-3), uint64(1<<63), 0.87, true, `{"a":[1,"b"]}`)
	f.Add("", "\xff\xfe", int64(0), uint64(0), -1e-300, false, `null`)
	f.Fuzz(func(t *testing.T, s1, s2 string, n int64, u uint64, fl float64, b bool, raw string) {
		j := fullJobToDecode()
		j.ExecutionID, j.Skill.Name, j.Trigger.Subject, j.History[0].Error = s1, s2, s2, s1
		j.Answers = map[string]Answer{s1: {By: s2, Approved: b}}
		j.Depth, j.Repair.Attempts, j.Trigger.Seq, j.History[0].Deliveries = int(n), -int(n), u, u
		j.Skill.Score, j.Fallback[0].Score, j.Live = fl, -fl, b
		j.Together = [][]string{{s1, s2}, {s2}}
		if json.Valid([]byte(raw)) {
			j.Inputs = json.RawMessage(raw)
		}
		data, err := json.Marshal(j)
		if err != nil {
			return // NaN or an infinity
		}
		if !checkDecodeJob(t, data) {
			t.Fatalf("the fast path does not decode %s", data)
		}
	})
}

var decodeJobCases = []struct {
	name, data string
	fast       bool // the fast path decodes it
}{
	{"empty object", `{}`, true},
	{"white space", " \t\r\n{ \"depth\" : 1 , \"live\" : true } \n", true},
	{"escapes", `{"execution_id":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e16\ud83d\ude00\u0000"}`, true},
	{"utf-8", `{"execution_id":"é世😀"}`, true},
	{"inputs kept as written", `{"inputs": { "a" : [1, 2.5e3, -0, "x\n", true, false, null, {}] } }`, true},
	{"inputs not an object", `{"inputs":"text"}`, true},
	{"inputs null", `{"inputs":null}`, true},
	{"null leaves fields alone", `{"execution_id":null,"skill":null,"trigger":{"seq":null},"fallback":null,"history":[null],"answers":{"a":null},"depth":null,"repair":null,"together":[null,[null]],"live":null}`, true},
	{"empty slices and maps", `{"fallback":[],"history":[],"answers":{},"together":[[]]}`, true},
	{"empty repair", `{"repair":{}}`, true},
	{"float forms", `{"skill":{"score":-0.0e+0}}`, true},
	{"float underflow", `{"skill":{"score":1e-400}}`, true},
	{"int extremes", `{"depth":-9223372036854775808,"trigger":{"seq":18446744073709551615}}`, true},

	{"upper-case key", `{"Execution_ID":"x"}`, false},
	{"folded key", `{"ſkill":{"name":"x"}}`, false},
	{"escaped key", `{"execution\u005fid":"x"}`, false},
	{"unknown key", `{"routes":{}}`, false},
	{"route", `{"execution_id":"x","route":{"threshold":0.5,"candidates":[{"name":"a"}]}}`, true},
	{"route of another shape", `{"route":[1]}`, false},
	{"ignored key", `{"-":1}`, false},
	{"repeated key", `{"depth":1,"depth":2}`, false},
	{"repeated nested key", `{"skill":{"name":"a","name":"b"}}`, false},
	{"repeated answer", `{"answers":{"a":{"approved":true},"a":{"by":"x"}}}`, false},
	{"upper-case key in history", `{"history":[{"Skill":"a","DELIVERIES":2}]}`, false},
	{"repeated key in repair", `{"repair":{"id":"a","id":"b"}}`, false},
	{"bad history", `{"history":[{"deliveries":-1}]}`, false},
	{"bad answers", `{"answers":[]}`, false},
	{"invalid utf-8", "{\"execution_id\":\"\xff\"}", false},
	{"invalid utf-8 in inputs", "{\"inputs\":{\"a\":\"\xff\"}}", false},
	{"lone surrogate", `{"execution_id":"\ud800"}`, false},
	{"reversed surrogates", `{"execution_id":"\ude00\ud83d"}`, false},
	{"fraction into int", `{"depth":1.0}`, false},
	{"exponent into int", `{"depth":1e2}`, false},
	{"negative into uint", `{"trigger":{"seq":-1}}`, false},
	{"int overflow", `{"depth":9223372036854775808}`, false},
	{"float overflow", `{"skill":{"score":1e400}}`, false},
	{"string into int", `{"depth":"1"}`, false},
	{"number into string", `{"execution_id":1}`, false},
	{"leading zero", `{"depth":01}`, false},
	{"trailing data", `{"depth":1} {}`, false},
	{"trailing comma", `{"depth":1,}`, false},
	{"control character", "{\"execution_id\":\"a\tb\"}", false},
	{"bad escape", `{"execution_id":"\x"}`, false},
	{"truncated", `{"inputs":{"a":[1,2`, false},
	{"not an object", `[]`, false},
	{"null", `null`, false},
	{"nothing", ``, false},
	{"too deep", `{"inputs":` + strings.Repeat("[", jsondec.MaxDepth+2) + strings.Repeat("]", jsondec.MaxDepth+2) + `}`, false},
}

// TestDecodeJobCases: the quirks of encoding/json, each decoded as jsonx does, and
// the fast path taken where it should be.
func TestDecodeJobCases(t *testing.T) {
	for _, c := range decodeJobCases {
		t.Run(c.name, func(t *testing.T) {
			if fast := checkDecodeJob(t, []byte(c.data)); fast != c.fast {
				t.Errorf("fast path taken: %v, want %v", fast, c.fast)
			}
		})
	}
}

// TestDecodeJobMerges: into a job that is not zero, encoding/json merges, and so
// does DecodeJob.
func TestDecodeJobMerges(t *testing.T) {
	data := []byte(`{"execution_id":"new","answers":{"b":{"by":"y"}}}`)
	var want, got Job
	for _, j := range []*Job{&want, &got} {
		*j = Job{ActivationID: "old", Answers: map[string]Answer{"a": {By: "x"}}, Route: &JobRoute{EstimatedCost: 1}}
	}
	if err := jsonx.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := DecodeJob(data, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) || got.ActivationID != "old" || len(got.Answers) != 2 {
		t.Fatalf("jsonx %#v, DecodeJob %#v", want, got)
	}
}

// TestDecodeJobKnowsEveryField: a job with every field set (by reflection, so a
// field added to Job or to a type in it is set too) takes the fast path. If this
// fails after adding a field, run make generate.
func TestDecodeJobKnowsEveryField(t *testing.T) {
	var j Job
	populate(reflect.ValueOf(&j).Elem())
	data := mustMarshal(t, j)
	var got Job
	if !decodeJobFast(data, &got, true) {
		t.Fatalf("the fast path does not decode %s", data)
	}
	route := j.Route
	j.Route = nil // skipped
	if !reflect.DeepEqual(j, got) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", got, j)
	}
	j.Route = route
	if err := DecodeJob(data, &got); err != nil || !reflect.DeepEqual(j, got) {
		t.Fatalf("DecodeJob: %v\n%#v\nwant\n%#v", err, got, j)
	}
	checkDecodeJob(t, data)
}

// TestJobIsZeroSeesEveryField: a job with any one field set is not zero, so the
// fast path leaves it to jsonx's merge.
func TestJobIsZeroSeesEveryField(t *testing.T) {
	typ := reflect.TypeFor[Job]()
	for i := range typ.NumField() {
		var j Job
		populate(reflect.ValueOf(&j).Elem().Field(i))
		if j.jsonIsZero() {
			t.Errorf("jsonIsZero is true for a job with %s set", typ.Field(i).Name)
		}
	}
}

// populate sets every field in v, recursively, to something that is not zero.
func populate(v reflect.Value) {
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes([]byte(`{"k":[1,"v"]}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-\"é\"\n" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Struct:
		for i := range v.NumField() {
			populate(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		populate(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		populate(v.Index(0))
		populate(v.Index(1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		populate(k)
		populate(e)
		v.SetMapIndex(k, e)
	case reflect.Interface:
		v.Set(reflect.ValueOf("any"))
	default:
		panic("populate: no value for " + v.Type().String())
	}
}

// BenchmarkDecodeJob decodes typical jobs, each with ids of its own as real ones
// have (the JSON v2 engine interns short strings it saw before, so a benchmark of
// one job over and over flatters it).
func BenchmarkDecodeJob(b *testing.B) {
	jobs := make([][]byte, 1024)
	for i := range jobs {
		j := jobToDecode()
		id := fmt.Sprintf("exec_%024x", i*7919)
		j.ExecutionID, j.Skill.ExecutionID, j.ActivationID, j.Trigger.ID = id, id, fmt.Sprintf("act_%020x", i), fmt.Sprintf("evt-%d", i)
		j.Together = [][]string{{id, j.Fallback[0].ExecutionID}}
		jobs[i] = mustMarshal(b, j)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte, *Job) error
	}{{"jsonx", func(data []byte, j *Job) error { return jsonx.Unmarshal(data, j) }}, {"DecodeJob", DecodeJob}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var j Job
				if err := c.decode(jobs[i%len(jobs)], &j); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// A job that does not decode is reported under the job's type, whichever decoder
// read it.
func TestDecodeJobErrorsNameTheJob(t *testing.T) {
	t.Parallel()
	data := []byte(`{"execution_id":5}`)
	var a, b Job
	ea, eb := DecodeJob(data, &a), DecodeJobWithoutRoute(data, &b)
	if ea == nil || eb == nil || ea.Error() != eb.Error() || !strings.Contains(ea.Error(), "Job.execution_id") {
		t.Fatalf("DecodeJob: %v\nDecodeJobWithoutRoute: %v", ea, eb)
	}
}
