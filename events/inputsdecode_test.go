package events

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonx"
)

// checkDecodeInputs asserts DecodeInputs and DecodeValue decode data as
// jsonx.Unmarshal does.
func checkDecodeInputs(t *testing.T, data []byte) {
	t.Helper()
	var want, got map[string]any
	werr := jsonx.Unmarshal(data, &want)
	gerr := DecodeInputs(data, &got)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("%q: jsonx %v, DecodeInputs %v", data, werr, gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\njsonx        %#v\nDecodeInputs %#v", data, want, got)
	}
	var wantv, gotv any
	werr = jsonx.Unmarshal(data, &wantv)
	gerr = DecodeValue(data, &gotv)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("%q: jsonx %v, DecodeValue %v", data, werr, gerr)
	}
	if !reflect.DeepEqual(wantv, gotv) {
		t.Fatalf("%q:\njsonx       %#v\nDecodeValue %#v", data, wantv, gotv)
	}
}

var inputsCases = []string{
	`{}`, `{"n":1}`, ` { "a" : [ 1 , -2.5e-3 , "x\n\u00e9\ud83d\ude00" , true , false , null , { } , [ ] ] } `,
	`{"a":{"b":{"c":[{"d":0}]}}}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, "{\"a\":\"\xff\"}", `{"\u0061":1,"a":2}`,
	`{"a":1e400}`, `{"a":1e-400}`, `{"a":-0}`, `{"a":01}`, `{"a":1,}`, `{"a":1} x`, `null`, `[1]`, `"s"`, `1`, ``, `{`,
	`{"a":"\ud800"}`, `{"a":"` + "\x7f" + `"}`,
}

func TestDecodeInputsCases(t *testing.T) {
	for _, c := range inputsCases {
		checkDecodeInputs(t, []byte(c))
	}
	deep := []byte(`{"a":`)
	for range jsondec.MaxDepth + 2 {
		deep = append(deep, '[')
	}
	for range jsondec.MaxDepth + 2 {
		deep = append(deep, ']')
	}
	checkDecodeInputs(t, append(deep, '}'))
}

// TestDecodeInputsMerges: into a map already made, encoding/json adds to it, and so
// does DecodeInputs.
func TestDecodeInputsMerges(t *testing.T) {
	got := map[string]any{"old": true}
	if err := DecodeInputs([]byte(`{"new":1}`), &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"old": true, "new": 1.0}; !reflect.DeepEqual(want, got) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// FuzzDecodeInputs: DecodeInputs and DecodeValue decode whatever they are given
// exactly as jsonx.Unmarshal does.
func FuzzDecodeInputs(f *testing.F) {
	for _, c := range inputsCases {
		f.Add([]byte(c))
	}
	j := jobToDecode()
	f.Add([]byte(j.Inputs))
	f.Add(mustMarshal(f, j))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeInputs(t, data) })
}

func BenchmarkDecodeInputs(b *testing.B) {
	for _, in := range []string{`{"n":1234}`, string(jobToDecode().Inputs)} {
		data := []byte(in)
		b.Run(fmt.Sprintf("jsonx/%d", len(data)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := jsonx.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("DecodeInputs/%d", len(data)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := DecodeInputs(data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
