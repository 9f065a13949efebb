package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// rawEdgeCases are raw messages at the edges of what encoding/json's scanner
// accepts.
var rawEdgeCases = []string{
	`-0`, `-01`, `1.`, `1.e5`, `.5`, `1e`, `1e+`, `1E-0`, `1e5.0`, `-`, `+1`, `0x10`, `1.5e+10`, `[-0.0e-0]`,
	`"\u12"`, `"\u12G4"`, `"\uABcd"`, `"\x"`, `"\/"`, `"\`, `"\"`, "\"a\nb\"", "\"\x7f\x80\xff\"", "\"\x1f\"",
	`tru`, `nul`, `falsey`, `true false`, `nulll`, `{"a" 1}`, `{1:2}`, `[1 2]`, `[,1]`, `{,}`, `[1,]`, `{"a":1,}`,
	`{"a":1 "b":2}`, `{"a"}`, `{"a":}`, `[[[]]]`, `[[]`, `[]]`, `{"a":[}`, `{"a":{"b":{}}}`, "\v1", "\ufeff1", "1\x00",
	"\x00", "[\"<\",\"\u2028\"] ", "\r\n\t 1 \r\n\t", `"a" "b"`, `{"a":1}}`, `{}{}`, `[]1`, `{"":""}`,
	strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting),
	strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1),
	strings.Repeat(`{"a":`, maxNesting) + "1" + strings.Repeat("}", maxNesting),
	strings.Repeat(`{"a":`, maxNesting+1) + "1" + strings.Repeat("}", maxNesting+1),
	strings.Repeat("[", 100) + "1" + strings.Repeat("]", 99),
}

// TestAppendRaw: raw messages at the edges of the grammar are written as
// json.Marshal writes them, and refused where it refuses them.
func TestAppendRaw(t *testing.T) {
	for _, raw := range rawEdgeCases {
		sameRaw(t, []byte(raw))
	}
}

// FuzzAppendRaw checks raw messages alone: written as json.Marshal writes them,
// and refused where it refuses them.
func FuzzAppendRaw(f *testing.F) {
	for _, raw := range rawEdgeCases {
		if len(raw) < 1000 {
			f.Add([]byte(raw))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) { sameRaw(t, raw) })
}

func sameRaw(t *testing.T, raw []byte) {
	t.Helper()
	want, wantErr := json.Marshal(json.RawMessage(raw))
	got, gotErr := AppendRaw([]byte("x"), raw)
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%q: json.Marshal error %v, AppendRaw error %v", raw, wantErr, gotErr)
	}
	if wantErr != nil {
		if wantErr.Error() != gotErr.Error() || string(got) != "x" {
			t.Fatalf("%q: json.Marshal error %v, AppendRaw error %v, wrote %q", raw, wantErr, gotErr, got)
		}
		return
	}
	if !bytes.Equal(got[1:], want) {
		t.Fatalf("%q:\njson.Marshal: %s\nAppendRaw:    %s", raw, want, got[1:])
	}
}

// FuzzAppendValue: values decoded from fuzzed JSON, strings and numbers are
// written as json.Marshal writes them, and refused where it refuses them.
func FuzzAppendValue(f *testing.F) {
	f.Add([]byte(`{"b":[1,"<\u2028>",null,true],"a":{"x":1e21}}`), "s\xff<&>", 1.5, float32(0.1))
	f.Add([]byte(`[]`), "", math.NaN(), float32(1e-7))
	f.Add([]byte(` "x" `), "\u2029\x00", 1e-7, float32(math.Inf(1)))
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64, y float32) {
		var v, n any
		_ = json.Unmarshal(data, &v)
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		_ = d.Decode(&n)
		for _, val := range []any{v, n, s, x, y, json.Number(s), json.RawMessage(data), []string{s}, map[string]string{s: s},
			map[string]any{s: v, "n": n, "x": x, "y": y}, []any{s, x, y, v, n, time.Unix(int64(x), 0).UTC()}} {
			want, wantErr := json.Marshal(val)
			got, gotErr := AppendValue([]byte("x"), val)
			if (wantErr != nil) != (gotErr != nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
				t.Fatalf("%#v: json.Marshal error %v, AppendValue error %v", val, wantErr, gotErr)
			}
			if wantErr == nil && !bytes.Equal(got[1:], want) {
				t.Fatalf("%#v:\njson.Marshal: %s\nAppendValue:  %s", val, want, got[1:])
			}
		}
	})
}
