package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
