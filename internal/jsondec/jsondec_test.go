package jsondec_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonx"
)

// FuzzDecoder: what Skip accepts is JSON, and what Value decodes, jsonx decodes
// to the same value. (The generated decoders' own fuzz tests are in events.)
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[1,-2.5e-3,"x\n\u00e9\ud83d\ude00",true,false,null,{},[]]}`, `"\ud800"`, `{"a":1,"a":2}`,
		"\"\xff\"", `01`, `1e400`, ` { "a" : 1 } `, strings.Repeat("[", jsondec.MaxDepth) + strings.Repeat("]", jsondec.MaxDepth),
		strings.Repeat("[", jsondec.MaxDepth+1) + strings.Repeat("]", jsondec.MaxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := jsondec.New(data)
		if d.Skip() && d.End() && !json.Valid(data) {
			t.Fatalf("%q: Skip accepts what is not JSON", data)
		}
		if end, ok := jsondec.SkipValue(data, 0, jsondec.MaxDepth); ok && !json.Valid(data[:end]) {
			t.Fatalf("%q: SkipValue accepts %q, which is not JSON", data, data[:end])
		}
		d = jsondec.New(data)
		got, ok := d.Value()
		if !ok || !d.End() {
			return
		}
		var want any
		if err := jsonx.Unmarshal(data, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: Value %#v, jsonx %#v (%v)", data, got, want, err)
		}
	})
}

// Nesting is counted from the document's root, whichever reader goes down.
func TestMaxDepth(t *testing.T) {
	for n, want := range map[int]bool{jsondec.MaxDepth: true, jsondec.MaxDepth + 1: false} {
		doc := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		d := jsondec.New(doc)
		if got := d.Skip() && d.End(); got != want {
			t.Errorf("Skip of %d arrays: %v, want %v", n, got, want)
		}
		d = jsondec.New(doc)
		if _, got := d.Value(); got != want {
			t.Errorf("Value of %d arrays: %v, want %v", n, got, want)
		}
	}
}
