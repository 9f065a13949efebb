package workflow

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/tool"
)

// marshalExcerpt is how excerpt used to work: marshal everything, keep the start.
func marshalExcerpt(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return truncate(string(b), ExcerptBytes)
}

func TestExcerptMatchesMarshal(t *testing.T) {
	t.Parallel()
	// A string whose JSON, with the quote before it, is exactly ExcerptBytes long.
	atLimit := strings.Repeat("x", ExcerptBytes-2)
	deep := any("bottom")
	for range 2 * maxExcerptDepth {
		deep = []any{deep}
	}
	for _, tt := range []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"typed nil map", map[string]any(nil)},
		{"typed nil list", []any(nil)},
		{"small", map[string]any{"status": int64(200), "ok": true, "n": 1.5}},
		{"empty", map[string]any{"a": map[string]any{}, "b": []any{}, "c": ""}},
		{"at the limit", atLimit},
		{"one over the limit", atLimit + "y"},
		{"one under the limit", atLimit[1:]},
		{"map at the limit", map[string]any{"k": strings.Repeat("v", ExcerptBytes-8)}},
		{"large", map[string]any{"status": int64(200), "body": strings.Repeat("lorem ipsum ", 1000)}},
		{"large list", func() []any {
			l := make([]any, 500)
			for i := range l {
				l[i] = map[string]any{"id": int64(i), "name": fmt.Sprintf("item %d", i), "score": float64(i) / 7}
			}
			return l
		}()},
		{"nested", map[string]any{"a": []any{map[string]any{"b": []any{nil, false, int64(-3)}}, "c"}, "z": map[string]any{"y": 1e21, "x": 1e-7, "w": -0.0}}},
		{"escapes", map[string]any{"<script>": "a\"b\\c\n\t\r\b\f\x00\x1f <&> \u2028\u2029 é ✓ 😀", "bad utf-8": "\xff\xfe ok \xc3"}},
		{"escapes at the cut", strings.Repeat("é", ExcerptBytes) + strings.Repeat("<", ExcerptBytes)},
		{"invalid UTF-8 at the cut", strings.Repeat("a", ExcerptBytes-1) + "\xe2\x82" + strings.Repeat("b", 10)},
		{"emoji at the cut", strings.Repeat("a", ExcerptBytes-2) + "😀😀"},
		{"floats", []any{0.0, 1.0, -1.5, 123456789.0, 1e20, 1e21, 1e-6, 1e-7, 5e-324, math.MaxFloat64, 0.1 + 0.2}},
		{"ints", []any{int64(math.MinInt64), int64(math.MaxInt64), 0, -1, 42}},
		{"NaN early", map[string]any{"a": math.NaN()}},
		{"NaN late", map[string]any{"a": strings.Repeat("x", 1000), "b": []any{math.Inf(1)}}},
		{"NaN in a list after the cut", []any{strings.Repeat("x", 1000), map[string]any{"z": math.NaN()}}},
		{"other types", map[string]any{"t": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "n": json.Number("12.50"), "s": []string{"<a>"}, "m": map[string]int{"b": 2, "a": 1}, "f": float32(0.1), "u": uint8(7)}},
		{"unsupported type after the cut", []any{strings.Repeat("x", 1000), make(chan int)}},
		{"unsupported type before the cut", []any{func() {}, strings.Repeat("x", 1000)}},
		{"raw message", json.RawMessage(`{"b": 1, "a": "<"}`)},
		{"deep", deep},
		{"scalar string", "hello"},
		{"scalar number", 3.25},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, got := marshalExcerpt(tt.v), excerpt(tt.v)
			if got != want {
				t.Errorf("excerpt:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// FuzzExcerpt compares excerpt with marshalling the whole value, on values built
// from the fuzzer's bytes: JSON-like ones, NaNs, bad UTF-8 and types of other kinds.
func FuzzExcerpt(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x07\x05abc\x08\x03\x05\x10<a href=\"x\">&amp;</a>\x03\x00\x00\x00\x00\x00\x00\xf8\x7f"))
	f.Add([]byte("\x06\x05\xff\xc3\x28\xe2\x80\xa8\x07\x02\x0b\x00\x05\x01z"))
	f.Add([]byte("\x08\x06\x06\xc8\x04é\x07\x03\x02\x01\x02\x03\x04\x05\x06\x07\x08\x09\x01\x04\x09\x07\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &valueGen{b: data}
		v := g.value(0)
		if want, got := marshalExcerpt(v), excerpt(v); got != want {
			t.Errorf("excerpt of %#v:\n got %q\nwant %q", v, got, want)
		}
	})
}

// FuzzExcerptJSON compares them on JSON documents decoded as tools decode them.
func FuzzExcerptJSON(f *testing.F) {
	for _, s := range []string{
		`{"status":200,"headers":{"Content-Type":"application/json"},"body":{"n":1,"items":[1,2.5,"<x>"]}}`,
		`"` + strings.Repeat(`\u00e9`, 150) + `"`,
		`[1e300,-0,0.000001,1e-7,123456789012345678901234567890]`,
		`{"a":"\u2028\ud800","b":null,"c":[true,false,{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := tool.DecodeJSON(data)
		if err != nil {
			return
		}
		if want, got := marshalExcerpt(v), excerpt(v); got != want {
			t.Errorf("excerpt of %s:\n got %q\nwant %q", data, got, want)
		}
	})
}

type valueGen struct{ b []byte }

func (g *valueGen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *valueGen) bytes(n int) []byte {
	n = min(n, len(g.b))
	b := g.b[:n]
	g.b = g.b[n:]
	return b
}

func (g *valueGen) u64() uint64 {
	var b [8]byte
	copy(b[:], g.bytes(8))
	return binary.LittleEndian.Uint64(b[:])
}

func (g *valueGen) value(depth int) any {
	kind := g.byte() % 13
	if depth > 6 && kind >= 7 && kind <= 8 {
		kind = 5
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return g.byte()%2 == 0
	case 2:
		return int64(g.u64())
	case 3:
		return math.Float64frombits(g.u64()) // NaN and infinities too
	case 4:
		return float64(int8(g.byte())) / float64(g.byte()+1) * math.Pow10(int(g.byte()%60)-30)
	case 5:
		return string(g.bytes(int(g.byte())))
	case 6:
		return strings.Repeat(string(g.bytes(int(g.byte()%8))), int(g.byte())) // long strings
	case 7:
		m := map[string]any{}
		for range g.byte() % 8 {
			m[string(g.bytes(int(g.byte()%6)))] = g.value(depth + 1)
		}
		return m
	case 8:
		l := make([]any, g.byte()%8)
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	case 9:
		return json.Number(g.bytes(int(g.byte() % 6)))
	case 10:
		return int(int16(g.u64()))
	case 11:
		return []string{string(g.bytes(int(g.byte())))}
	default:
		return struct {
			A string  `json:"a"`
			F float64 `json:"f"`
		}{string(g.bytes(int(g.byte() % 16))), math.Float64frombits(g.u64())}
	}
}

func BenchmarkExcerpt(b *testing.B) {
	// The three-step benchmark's HTTP response, roughly, and a large one.
	small := map[string]any{"status": int64(200), "headers": map[string]any{
		"Content-Type": "application/json", "Date": "Mon, 23 Nov 2026 20:00:00 GMT", "Content-Length": "64"},
		"body": map[string]any{"n": int64(7), "items": []any{"a", "b", "c"}, "ok": true}}
	large := map[string]any{"status": int64(200), "body": strings.Repeat("lorem ipsum ", 2000)}
	for _, bc := range []struct {
		name string
		v    any
	}{{"http-response", small}, {"large", large}} {
		b.Run(bc.name+"/marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				marshalExcerpt(bc.v)
			}
		})
		b.Run(bc.name+"/excerpt", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				excerpt(bc.v)
			}
		})
	}
}
