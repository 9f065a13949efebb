package tool_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

func TestArgs(t *testing.T) {
	t.Parallel()
	args := tool.NewArgs("t", map[string]any{
		"s":      "str",
		"i":      int64(7),
		"if":     7.0,
		"frac":   7.5,
		"num":    json.Number("9"),
		"d":      "1m30s",
		"dsec":   "2.5",
		"dnum":   int64(3),
		"dneg":   "-1s",
		"dzero":  0.0,
		"dbad":   "soon",
		"m":      map[string]any{"a": "b"},
		"sm":     map[string]any{"a": "b", "c": int64(1)},
		"l":      []any{"a", int64(1)},
		"null":   nil,
		"strs":   []any{"a", "b"},
		"native": []string{"x"},
	})
	for _, tc := range []struct {
		name    string
		get     func() (any, error)
		want    any
		wantErr string
	}{
		{"string", func() (any, error) { return args.String("s") }, "str", ""},
		{"string missing", func() (any, error) { return args.String("nope") }, "", `t: argument "nope" is required`},
		{"string null is missing", func() (any, error) { return args.String("null") }, "", `t: argument "null" is required`},
		{"string wrong type", func() (any, error) { return args.String("i") }, "", `t: argument "i" must be a string, got number`},
		{"opt string default", func() (any, error) { return args.OptString("nope", "def") }, "def", ""},
		{"int", func() (any, error) { return args.Int("i") }, int64(7), ""},
		{"int from integral float", func() (any, error) { return args.Int("if") }, int64(7), ""},
		{"int from json.Number", func() (any, error) { return args.Int("num") }, int64(9), ""},
		{"int fraction", func() (any, error) { return args.Int("frac") }, int64(0), `t: argument "frac" must be an integer, got 7.5`},
		{"int from string", func() (any, error) { return args.Int("s") }, int64(0), `t: argument "s" must be an integer, got string`},
		{"opt int default", func() (any, error) { return args.OptInt("nope", 4) }, int64(4), ""},
		{"duration string", func() (any, error) { return args.Duration("d") }, 90 * time.Second, ""},
		{"duration seconds string", func() (any, error) { return args.Duration("dsec") }, 2500 * time.Millisecond, ""},
		{"duration seconds", func() (any, error) { return args.Duration("dnum") }, 3 * time.Second, ""},
		{"duration float seconds", func() (any, error) { return args.Duration("frac") }, 7500 * time.Millisecond, ""},
		{"duration negative", func() (any, error) { return args.Duration("dneg") }, time.Duration(0), `t: argument "dneg" must be positive, got -1s`},
		{"duration zero", func() (any, error) { return args.Duration("dzero") }, time.Duration(0), `t: argument "dzero" must be positive, got 0s`},
		{"duration bad", func() (any, error) { return args.Duration("dbad") }, time.Duration(0), `t: argument "dbad" must be a positive number of seconds or a duration string such as "1m30s", got "soon"`},
		{"duration wrong type", func() (any, error) { return args.Duration("l") }, time.Duration(0), `t: argument "l" must be a positive number of seconds or a duration string such as "1m30s", got list`},
		{"opt duration default", func() (any, error) { return args.OptDuration("nope", time.Second) }, time.Second, ""},
		{"map", func() (any, error) { return args.Map("m") }, map[string]any{"a": "b"}, ""},
		{"map wrong type", func() (any, error) { return args.Map("l") }, map[string]any(nil), `t: argument "l" must be a map, got list`},
		{"opt map missing", func() (any, error) { return args.OptMap("nope") }, map[string]any(nil), ""},
		{"string map", func() (any, error) { return args.StringMap("m") }, map[string]string{"a": "b"}, ""},
		{"string map bad value", func() (any, error) { return args.StringMap("sm") }, map[string]string(nil), `t: argument "sm" must be a map of strings, got number at "c"`},
		{"string map missing", func() (any, error) { return args.StringMap("nope") }, map[string]string(nil), `t: argument "nope" is required`},
		{"list", func() (any, error) { return args.List("l") }, []any{"a", int64(1)}, ""},
		{"list wrong type", func() (any, error) { return args.List("s") }, []any(nil), `t: argument "s" must be a list, got string`},
		{"string list", func() (any, error) { return args.StringList("strs") }, []string{"a", "b"}, ""},
		{"string list native", func() (any, error) { return args.StringList("native") }, []string{"x"}, ""},
		{"string list bad element", func() (any, error) { return args.StringList("l") }, []string(nil), `t: argument "l" must be a list of strings, got number at index 1`},
		{"string list from string", func() (any, error) { return args.StringList("s") }, []string(nil), `t: argument "s" must be a list of strings, got string`},
		{"opt string list missing", func() (any, error) { return args.OptStringList("nope") }, []string(nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.get()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				if c := failure.ClassOf(err); c != failure.Repairable {
					t.Errorf("class = %q, want repairable", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsOnly(t *testing.T) {
	t.Parallel()
	a := tool.NewArgs("http", map[string]any{"url": "x", "header": "y", "bdy": "z"})
	err := a.Only("url", "headers", "body")
	want := `http: unknown arguments "bdy", "header" (known: body, headers, url)`
	if err == nil || err.Error() != want {
		t.Fatalf("Only = %v, want %q", err, want)
	}
	if failure.ClassOf(err) != failure.Repairable {
		t.Errorf("class = %q, want repairable", failure.ClassOf(err))
	}
	if err := a.Only("url", "header", "bdy"); err != nil {
		t.Errorf("Only with every name = %v", err)
	}
	// The misspelling is a parameter fault a repairer can rename: the first
	// unknown argument near a known one ("bdy" for "body").
	f := failure.FaultOf(err)
	if f == nil || f.Kind != failure.FaultParameter || f.Name != "body" || !slices.Equal(f.Have, []string{"bdy", "header", "url"}) || f.Field != "args.bdy" {
		t.Errorf("fault %+v, want parameter body, have bdy header url", f)
	}
	// An unknown argument near nothing the tool takes names no fault.
	if f := failure.FaultOf(tool.NewArgs("http", map[string]any{"url": "x", "zzzzzz": 1}).Only("url", "body")); f != nil {
		t.Errorf("fault %+v for an argument near no known one", f)
	}
}

func FuzzDuration(f *testing.F) {
	for _, s := range []string{"1s", "1.5", "-3", "1e300", "NaN", "1h2m", "", " 5 ", "9223372036.9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := tool.NewArgs("t", map[string]any{"d": s}).Duration("d")
		if err != nil {
			if failure.ClassOf(err) != failure.Repairable {
				t.Fatalf("class of %v = %q", err, failure.ClassOf(err))
			}
			return
		}
		if d <= 0 {
			t.Fatalf("Duration(%q) = %v, want positive or an error", s, d)
		}
	})
}
