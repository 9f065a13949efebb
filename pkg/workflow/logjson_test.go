package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

// sameLogJSON fails t unless l.AppendJSON writes what json.Marshal writes, and
// fails where it fails.
func sameLogJSON(t *testing.T, label string, l *Log) {
	t.Helper()
	want, wantErr := json.Marshal(l)
	got, gotErr := l.AppendJSON([]byte("x"))
	if (wantErr != nil) != (gotErr != nil) || wantErr != nil && (wantErr.Error() != gotErr.Error() || string(got) != "x") {
		t.Fatalf("%s: json.Marshal error %v, AppendJSON error %v (wrote %q)", label, wantErr, gotErr, got)
	}
	if wantErr == nil && !bytes.Equal(got[1:], want) {
		t.Fatalf("%s:\njson.Marshal: %s\nAppendJSON:   %s", label, want, got[1:])
	}
}

// setAll sets every exported field of v, recursively, to a value that is not
// empty, so that a field AppendJSON does not write shows.
func setAll(t *testing.T, v reflect.Value) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2025, 6, 1, 2, 3, 4, 5, time.FixedZone("", 3600))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s<\u2028\xff\"")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-7)
	case reflect.Uint64:
		v.SetUint(7)
	case reflect.Float64:
		v.SetFloat(1.25e-7)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		setAll(t, s.Index(0))
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setAll(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("setAll: no value for %s", v.Type())
	}
}

func TestLogAppendJSONEveryField(t *testing.T) {
	var full Log
	setAll(t, reflect.ValueOf(&full).Elem())
	sameLogJSON(t, "every field", &full)
	sameLogJSON(t, "zero", &Log{})
	sameLogJSON(t, "nil", nil)
	sameLogJSON(t, "empty steps", &Log{Steps: []StepLog{}})
	// One field at a time, of the log and of a step.
	for i := range reflect.TypeFor[Log]().NumField() {
		var l Log
		setAll(t, reflect.ValueOf(&l).Elem().Field(i))
		sameLogJSON(t, reflect.TypeFor[Log]().Field(i).Name, &l)
	}
	for i := range reflect.TypeFor[StepLog]().NumField() {
		l := Log{Steps: []StepLog{{}}}
		setAll(t, reflect.ValueOf(&l.Steps[0]).Elem().Field(i))
		sameLogJSON(t, "step "+reflect.TypeFor[StepLog]().Field(i).Name, &l)
	}
}

func TestLogAppendJSONErrors(t *testing.T) {
	for _, l := range []*Log{
		{DurationMS: math.NaN()},
		{Steps: []StepLog{{DurationMS: math.Inf(1)}}},
		{Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Steps: []StepLog{{Finished: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{Finished: time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
	} {
		sameLogJSON(t, fmt.Sprintf("%+v", *l), l)
	}
}

func FuzzLogAppendJSON(f *testing.F) {
	f.Add("exec-1", "<&>\u2028", 1.5, int64(1700000000), uint64(3), true)
	f.Add("", "\xff", 1e21, int64(-62135596800), uint64(0), false)
	f.Add("a\"b", "\x00", 1e-7, int64(253402300800), uint64(1<<63), true)
	f.Fuzz(func(t *testing.T, s1, s2 string, x float64, sec int64, u uint64, flag bool) {
		at := time.Unix(sec, int64(u%1e9)).In(time.FixedZone(s2, int(sec%(50*3600))))
		l := &Log{ExecutionID: s1, Skill: s2, Version: s1, Attempt: u, Status: s2, Started: at, Finished: at, DurationMS: x,
			FailedStep: s1, Error: s2, Class: "fatal", Waiting: s1,
			Steps: []StepLog{{ID: s1, Kind: s2, Tool: s1, Status: Status(s2), Reason: s1, Started: at, DurationMS: x,
				Result: s2, Error: s1, Attempt: u, Resumed: flag, Calls: int(sec), CacheHits: int(u), Cached: flag, HealOf: s1}, {}}}
		if flag {
			l.Steps = nil
		}
		sameLogJSON(t, "fuzzed", l)
	})
}

// BenchmarkLogAppendJSON encodes the log of a completed three-step run, as every
// outcome a worker publishes carries it.
func BenchmarkLogAppendJSON(b *testing.B) {
	at := time.Date(2026, 11, 27, 5, 30, 0, 123456789, time.UTC)
	l := &Log{ExecutionID: "01JD2X7RZQ3M4N5P6Q7R8S9T0V.summarize", Skill: "summarize", Version: "1.2.0", Attempt: 1,
		Status: RunCompleted, Started: at, Finished: at.Add(3 * time.Millisecond), DurationMS: 3.2}
	for _, id := range []string{"fetch", "summarize", "store"} {
		l.Steps = append(l.Steps, StepLog{ID: id, Kind: "tool", Tool: "http", Status: StatusCompleted, Started: at,
			Finished: at.Add(time.Millisecond), DurationMS: 1.05, Result: `{"status":200,"body":"A fox jumps over a dog."}`, Calls: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.AppendJSON(nil); err != nil {
			b.Fatal(err)
		}
	}
}
