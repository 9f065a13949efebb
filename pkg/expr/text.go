package expr

import (
	"fmt"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

// Strings are text, as in Python and Jinja: len, indexing, slicing and iteration
// count characters (code points), not the bytes of Starlark's strings, so that
// len("é") is 1 and s[:40] never cuts a character in two. Substring operations
// (in, find, replace, split, ...) work on the bytes and give the same answers.

// iteratesText are the builtins that, given a string, take its characters.
var iteratesText = map[string]bool{
	"list": true, "tuple": true, "sorted": true, "set": true, "enumerate": true,
	"reversed": true, "zip": true, "any": true, "all": true, "min": true, "max": true,
}

// characters returns the characters of s as a list of one-character strings.
func characters(th *starlark.Thread, s starlark.String) (*starlark.List, error) {
	n := utf8.RuneCountInString(string(s))
	if err := work(th, n); err != nil {
		return nil, err
	}
	if err := charge(th, int64(n)*elemBytes); err != nil {
		return nil, err
	}
	out := make([]starlark.Value, 0, n)
	for _, r := range string(s) {
		out = append(out, starlark.String(string(r)))
	}
	return starlark.NewList(out), nil
}

// runes returns the characters of s, charging the work.
func runes(th *starlark.Thread, s starlark.String) ([]rune, error) {
	if err := work(th, len(s)/bytesPerStep); err != nil {
		return nil, err
	}
	if err := charge(th, int64(len(s))*4); err != nil {
		return nil, err
	}
	return []rune(string(s)), nil
}

// iterText is the collection of a for loop or comprehension: a string's
// characters, any other value itself.
func iterText(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("internal error: iter needs one argument")
	}
	if s, ok := args[0].(starlark.String); ok {
		return characters(th, s)
	}
	return args[0], nil
}

// bLen is len, counting the characters of a string.
func bLen(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs("len", args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	if s, ok := x.(starlark.String); ok {
		if err := work(th, len(s)/bytesPerStep); err != nil {
			return nil, err
		}
		return starlark.MakeInt(utf8.RuneCountInString(string(s))), nil
	}
	n := starlark.Len(x)
	if n < 0 {
		return nil, fmt.Errorf("len: value of type %s has no len", x.Type())
	}
	return starlark.MakeInt(n), nil
}

// index is x[i]: the i-th character of a string, else what Starlark gives.
func index(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("internal error: index needs two arguments")
	}
	x, y := args[0], args[1]
	switch x := x.(type) {
	case starlark.String:
		var i int
		if err := starlark.AsInt(y, &i); err != nil {
			return nil, fmt.Errorf("string index: got %s, want int", y.Type())
		}
		if isASCII(string(x)) {
			return indexSeq(x, i, len(x), func(i int) starlark.Value { return x[i : i+1] })
		}
		rs, err := runes(th, x)
		if err != nil {
			return nil, err
		}
		return indexSeq(x, i, len(rs), func(i int) starlark.Value { return starlark.String(string(rs[i])) })
	case starlark.Mapping:
		v, found, err := x.Get(y)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("key %v not in %s", y, x.Type())
		}
		return v, nil
	case starlark.Indexable:
		var i int
		if err := starlark.AsInt(y, &i); err != nil {
			return nil, fmt.Errorf("%s index: got %s, want int", x.Type(), y.Type())
		}
		return indexSeq(x, i, x.Len(), x.Index)
	}
	return nil, fmt.Errorf("unhandled index operation %s[%s]", x.Type(), y.Type())
}

func indexSeq(x starlark.Value, i, n int, at func(int) starlark.Value) (starlark.Value, error) {
	orig := i
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return nil, fmt.Errorf("%s index %d out of range [%d:%d]", x.Type(), orig, -n, n-1)
	}
	return at(i), nil
}

// slice is x[lo:hi:step], by characters for a string.
func slice(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 4 {
		return nil, fmt.Errorf("internal error: slice needs four arguments")
	}
	x := args[0]
	step := 1
	if args[3] != starlark.None {
		if err := starlark.AsInt(args[3], &step); err != nil {
			return nil, fmt.Errorf("invalid slice step: got %s, want int", args[3].Type())
		}
		if step == 0 {
			return nil, fmt.Errorf("zero is not a valid slice step")
		}
	}
	switch s := x.(type) {
	case starlark.String:
		if isASCII(string(s)) {
			start, end, err := sliceRange(len(s), args[1], args[2], step)
			if err != nil {
				return nil, err
			}
			return s.Slice(start, end, step), nil
		}
		rs, err := runes(th, s)
		if err != nil {
			return nil, err
		}
		start, end, err := sliceRange(len(rs), args[1], args[2], step)
		if err != nil {
			return nil, err
		}
		var out []rune
		for i := start; step > 0 && i < end || step < 0 && i > end; i += step {
			out = append(out, rs[i])
		}
		return starlark.String(string(out)), nil
	case starlark.Sliceable:
		start, end, err := sliceRange(s.Len(), args[1], args[2], step)
		if err != nil {
			return nil, err
		}
		if err := charge(th, int64(max(0, (end-start)/step))*elemBytes); err != nil {
			return nil, err
		}
		return s.Slice(start, end, step), nil
	}
	return nil, fmt.Errorf("invalid slice operand %s", x.Type())
}

// sliceRange computes the start and end of x[lo:hi:step] for a sequence of
// length n, as Python does.
func sliceRange(n int, lo, hi starlark.Value, step int) (int, int, error) {
	var start, end int
	if step > 0 {
		start, end = 0, n
	} else {
		start, end = n-1, -1
	}
	clamp := func(v starlark.Value, dflt int) (int, error) {
		if v == starlark.None {
			return dflt, nil
		}
		var i int
		if err := starlark.AsInt(v, &i); err != nil {
			return 0, fmt.Errorf("invalid start index: got %s, want int", v.Type())
		}
		if i < 0 {
			i += n
			if i < 0 {
				if step < 0 {
					return -1, nil
				}
				return 0, nil
			}
		}
		if i >= n {
			if step < 0 {
				return n - 1, nil
			}
			return n, nil
		}
		return i, nil
	}
	var err error
	if start, err = clamp(lo, start); err != nil {
		return 0, 0, err
	}
	if end, err = clamp(hi, end); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
