package tool

import (
	"testing"
)

// FuzzDecodeJSON: whatever a server or a process prints, a decoded value is
// JSON-like, so it can be a tool result.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true]}`, `1e400`, `-0`, `9223372036854775808`, `"\ud800"`, `[1] [2]`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeJSON(data)
		if err != nil {
			return
		}
		if err := CheckValue(v); err != nil {
			t.Fatalf("DecodeJSON(%q) = %#v, not JSON-like: %v", data, v, err)
		}
	})
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		fromEnd bool
		elided  bool
		want    string
	}{
		{"short", 10, false, false, "short"},
		{"a  b\n\tc", 10, false, false, "a b c"},
		{"0123456789", 4, false, false, "0123…"},
		{"0123456789", 4, true, false, "…6789"},
		{"6789", 4, true, true, "…6789"},
		{"ééé", 3, false, false, "é…"},
		{"ééé", 3, true, false, "…é"},
	} {
		if got := excerpt([]byte(tc.in), tc.n, tc.fromEnd, tc.elided); got != tc.want {
			t.Errorf("excerpt(%q, %d, %v, %v) = %q, want %q", tc.in, tc.n, tc.fromEnd, tc.elided, got, tc.want)
		}
	}
}
