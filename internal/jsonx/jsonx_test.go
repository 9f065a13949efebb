package jsonx

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzSameAsEncodingJSON: whatever encoding/json accepts, Unmarshal accepts, with the
// same value; whatever it refuses, Unmarshal refuses.
func FuzzSameAsEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"A":"x","a":"y"}`, `[1,"2",{"3":null}]`, `"\xff"`, `{nope`, ``, `1e400`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got any
		werr := json.Unmarshal(data, &want)
		gerr := Unmarshal(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json %v, jsonx %v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: encoding/json %#v, jsonx %#v", data, want, got)
		}
	})
}

func TestStructFieldsMatchAsEncodingJSON(t *testing.T) {
	type job struct {
		ID     string          `json:"execution_id"`
		Inputs json.RawMessage `json:"inputs,omitempty"`
		Depth  int             `json:"depth,omitempty"`
	}
	in := []byte(`{"EXECUTION_ID":"x","inputs":{"n": 1},"depth":2,"unknown":[1]}`)
	var want, got job
	if err := json.Unmarshal(in, &want); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(in, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("encoding/json %+v, jsonx %+v", want, got)
	}
}
