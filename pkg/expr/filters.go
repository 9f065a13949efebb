package expr

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// This file implements the Jinja filters and the Python builtins Starlark lacks.
// Filters take the filtered value first: x | f(a) is f(x, a).

// fDefault is default(value, default_value="", boolean=False): default_value if
// value is None (or, with boolean, false).
func fDefault(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var d starlark.Value = starlark.String("")
	var boolean bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "default_value?", &d, "boolean?", &boolean); err != nil {
		return nil, err
	}
	if v == starlark.None || boolean && !bool(v.Truth()) {
		return d, nil
	}
	return v, nil
}

// strFilter makes a filter of a string function. Like all string filters it takes
// None as "" and other values as their str().
func strFilter(name string, fn func(string) string) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var v starlark.Value
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &v); err != nil {
			return nil, err
		}
		s, err := text(th, v)
		if err != nil {
			return nil, err
		}
		if err := charge(th, int64(len(s))); err != nil {
			return nil, err
		}
		return starlark.String(fn(s)), nil
	})
}

// strMethodFilter makes a filter of a string method: x | title is x.title().
func strMethodFilter(name string) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("%s: missing argument", b.Name())
		}
		s, err := text(th, args[0])
		if err != nil {
			return nil, err
		}
		m, err := starlark.String(s).Attr(name)
		if err != nil {
			return nil, err
		}
		return starlark.Call(th, m, args[1:], kwargs)
	})
}

func fReplace(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var old, repl string
	count := -1
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 3, &v, &old, &repl, &count); err != nil {
		return nil, err
	}
	s, err := text(th, v)
	if err != nil {
		return nil, err
	}
	return replace(th, s, old, repl, count)
}

// fJoin is join(value, d="", attribute=None); elements are converted with str().
func fJoin(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	sep, attribute := "", ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "d?", &sep, "attribute?", &attribute); err != nil {
		return nil, err
	}
	if attribute != "" {
		var elems []starlark.Value
		err := each(th, b.Name(), v, func(x starlark.Value) error {
			y, err := lookup(x, attribute)
			elems = append(elems, y)
			return err
		})
		if err != nil {
			return nil, err
		}
		v = starlark.NewList(elems)
	}
	return join(th, sep, v, true)
}

// fLength is length(value): the number of characters of a string, the number of
// elements of a collection, 0 for None.
func fLength(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return starlark.MakeInt(0), nil
	case starlark.String:
		return starlark.MakeInt(utf8.RuneCountInString(string(v))), nil
	}
	if n := starlark.Len(v); n >= 0 {
		return starlark.MakeInt(n), nil
	}
	return nil, fmt.Errorf("%s: a %s has no length", b.Name(), v.Type())
}

// fToJSON is tojson(value, indent=None), with sorted keys as Jinja's.
func fToJSON(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v, indent starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "indent?", &indent); err != nil {
		return nil, err
	}
	o, err := dumpsOpts(b.Name(), indent, nil, true)
	if err != nil {
		return nil, err
	}
	return encodeJSON(th, b.Name(), v, o)
}

// fFirst is first(value): the first element or character, or None if empty.
func fFirst(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	if s, ok := v.(starlark.String); ok {
		if s == "" {
			return starlark.None, nil
		}
		r, size := utf8.DecodeRuneInString(string(s))
		_ = r
		return s[:size], nil
	}
	iter := starlark.Iterate(v)
	if iter == nil {
		return nil, fmt.Errorf("%s: a %s is not a sequence", b.Name(), v.Type())
	}
	defer iter.Done()
	var x starlark.Value
	if iter.Next(&x) {
		return x, nil
	}
	return starlark.None, nil
}

// fLast is last(value): the last element or character, or None if empty.
func fLast(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case starlark.String:
		if v == "" {
			return starlark.None, nil
		}
		_, size := utf8.DecodeLastRuneInString(string(v))
		return v[len(v)-size:], nil
	case starlark.Indexable:
		if v.Len() == 0 {
			return starlark.None, nil
		}
		return v.Index(v.Len() - 1), nil
	}
	var last starlark.Value = starlark.None
	err := each(th, b.Name(), v, func(x starlark.Value) error { last = x; return nil })
	return last, err
}

// fSort is Jinja's sort(value, reverse=False, case_sensitive=False,
// attribute=None); unlike sorted, strings compare without case by default.
func fSort(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var reverse, caseSensitive bool
	attribute := ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "reverse?", &reverse,
		"case_sensitive?", &caseSensitive, "attribute?", &attribute); err != nil {
		return nil, err
	}
	var elems, keys []starlark.Value
	err := each(th, b.Name(), v, func(x starlark.Value) error {
		k := x
		if attribute != "" {
			var err error
			if k, err = lookup(x, attribute); err != nil {
				return err
			}
		}
		if s, ok := k.(starlark.String); ok && !caseSensitive {
			k = starlark.String(strings.ToLower(string(s)))
		}
		elems = append(elems, x)
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := work(th, len(elems)*bitsOf(len(elems))); err != nil {
		return nil, err
	}
	order := make([]int, len(elems))
	for i := range order {
		order[i] = i
	}
	var cmpErr error
	slices.SortStableFunc(order, func(i, j int) int {
		if cmpErr != nil {
			return 0
		}
		a, c := keys[i], keys[j]
		if reverse {
			a, c = c, a
		}
		less, err := starlark.Compare(syntax.LT, a, c)
		if err != nil {
			cmpErr = err
			return 0
		}
		if less {
			return -1
		}
		if greater, _ := starlark.Compare(syntax.LT, c, a); greater {
			return 1
		}
		return 0
	})
	if cmpErr != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), cmpErr)
	}
	out := make([]starlark.Value, len(order))
	for i, k := range order {
		out[i] = elems[k]
	}
	return starlark.NewList(out), nil
}

func bitsOf(n int) int {
	bits := 1
	for ; n > 1; n >>= 1 {
		bits++
	}
	return bits
}

// fUnique is unique(value): the elements in order, without repeats.
func fUnique(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	seen := starlark.NewSet(0)
	c := newComparer(th)
	var out, unhashable []starlark.Value
	err := each(th, b.Name(), v, func(x starlark.Value) error {
		if _, err := x.Hash(); err != nil {
			for _, y := range unhashable {
				if err := work(th, elemSteps); err != nil {
					return err
				}
				if same, err := c.equal(x, y, maxCompareDepth); err != nil || same {
					return err
				}
			}
			unhashable = append(unhashable, x)
			out = append(out, x)
			return nil
		}
		if found, _ := seen.Has(x); found {
			return nil
		}
		out = append(out, x)
		return seen.Insert(x)
	})
	return starlark.NewList(out), err
}

// fSplit is split(value, sep=None, maxsplit=-1).
func fSplit(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: missing argument", b.Name())
	}
	s, err := text(th, args[0])
	if err != nil {
		return nil, err
	}
	return stringMethod(th, starlark.String(s), "split", args[1:], kwargs)
}

// fTruncate is Jinja's truncate(value, length=255, killwords=False, end="...",
// leeway=0): at most length characters, cut at a space unless killwords, ending
// with end. Jinja's default leeway is 5; ours is 0.
func fTruncate(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	length, leeway := 255, 5 // Jinja's defaults
	killwords, end := false, "..."
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "length?", &length, "killwords?", &killwords,
		"end?", &end, "leeway?", &leeway); err != nil {
		return nil, err
	}
	s, err := text(th, v)
	if err != nil {
		return nil, err
	}
	runes := []rune(s)
	if len(runes) <= length+leeway {
		return starlark.String(s), nil
	}
	cut := max(length-utf8.RuneCountInString(end), 0)
	res := string(runes[:cut])
	if !killwords {
		if i := strings.LastIndexByte(res, ' '); i >= 0 {
			res = res[:i]
		}
	}
	return starlark.String(res + end), nil
}

// fReverse is reverse(value): a string backwards, or a list of the elements
// backwards.
func fReverse(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	if s, ok := v.(starlark.String); ok {
		runes := []rune(string(s))
		slices.Reverse(runes)
		return starlark.String(string(runes)), nil
	}
	var out []starlark.Value
	err := each(th, b.Name(), v, func(x starlark.Value) error { out = append(out, x); return nil })
	slices.Reverse(out)
	return starlark.NewList(out), err
}

// bRound is Python's round(number, ndigits=None): halves round to even; with no
// ndigits the result is an int.
func bRound(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, nd starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x, &nd); err != nil {
		return nil, err
	}
	ndigits, hasDigits := 0, nd != nil && nd != starlark.None
	if hasDigits {
		if err := starlark.AsInt(nd, &ndigits); err != nil {
			return nil, fmt.Errorf("%s: ndigits: %v", b.Name(), err)
		}
	}
	switch x := x.(type) {
	case starlark.Int:
		if ndigits >= 0 {
			return x, nil
		}
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(min(-ndigits, 400))), nil)
		q, r := new(big.Int).QuoRem(x.BigInt(), p, new(big.Int))
		twice := new(big.Int).Abs(new(big.Int).Mul(r, big.NewInt(2)))
		if c := twice.Cmp(p); c > 0 || c == 0 && q.Bit(0) == 1 {
			q.Add(q, big.NewInt(int64(x.Sign())))
		}
		return starlark.MakeBigInt(q.Mul(q, p)), nil
	case starlark.Float:
		f := float64(x)
		if !hasDigits {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%s: cannot convert %v to an integer", b.Name(), f)
			}
			r := math.RoundToEven(f)
			if math.Abs(r) < 1<<63 {
				return starlark.MakeInt64(int64(r)), nil
			}
			bf, _ := big.NewFloat(r).Int(nil)
			return starlark.MakeBigInt(bf), nil
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return x, nil
		}
		if ndigits >= 0 {
			r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', min(ndigits, 400), 64), 64)
			return starlark.Float(r), nil
		}
		p := math.Pow(10, float64(-ndigits))
		return starlark.Float(math.RoundToEven(f/p) * p), nil
	}
	return nil, fmt.Errorf("%s: want a number, got %s", b.Name(), x.Type())
}

// bSum is sum(iterable, start=0, attribute=None).
func bSum(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var acc starlark.Value = starlark.MakeInt(0)
	attribute := ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "iterable", &v, "start?", &acc, "attribute?", &attribute); err != nil {
		return nil, err
	}
	err := each(th, b.Name(), v, func(x starlark.Value) error {
		if attribute != "" {
			var err error
			if x, err = lookup(x, attribute); err != nil {
				return err
			}
		}
		var err error
		acc, err = add(th, acc, x)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return acc, nil
}

// bPow is pow(base, exp, mod=None).
func bPow(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y, m starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &y, &m); err != nil {
		return nil, err
	}
	if m == nil || m == starlark.None {
		return pow(th, x, y)
	}
	xi, ok1 := x.(starlark.Int)
	yi, ok2 := y.(starlark.Int)
	mi, ok3 := m.(starlark.Int)
	if !ok1 || !ok2 || !ok3 || yi.Sign() < 0 || mi.Sign() == 0 {
		return nil, fmt.Errorf("%s: with a modulus, want non-negative int exponent and non-zero int modulus", b.Name())
	}
	r := new(big.Int).Exp(xi.BigInt(), yi.BigInt(), new(big.Int).Abs(mi.BigInt()))
	if mi.Sign() < 0 && r.Sign() != 0 {
		r.Add(r, mi.BigInt())
	}
	return starlark.MakeBigInt(r), nil
}

// fRound is Jinja's round filter: round(value, precision=0, method="common"),
// where common rounds as Python's round does and floor and ceil round down and
// up; a float stays a float.
func fRound(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	precision, method := 0, "common"
	if err := starlark.UnpackArgs("round", args, kwargs, "value", &x, "precision?", &precision, "method?", &method); err != nil {
		return nil, err
	}
	if method != "common" && method != "floor" && method != "ceil" {
		return nil, fmt.Errorf("round: method must be common, floor or ceil, not %q", method)
	}
	if method == "common" {
		return bRound(th, b, starlark.Tuple{x, starlark.MakeInt(precision)}, nil)
	}
	f, ok := starlark.AsFloat(x)
	if !ok {
		return nil, fmt.Errorf("round: got %s, want a number", x.Type())
	}
	p := math.Pow(10, float64(precision))
	if method == "floor" {
		return starlark.Float(math.Floor(f*p) / p), nil
	}
	return starlark.Float(math.Ceil(f*p) / p), nil
}

// fInt is Jinja's int filter: int(value, default=0, base=10). A string that is
// not an integer is read as a float and truncated; a value that is not a number
// at all gives the default.
func fInt(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	var dflt starlark.Value = starlark.MakeInt(0)
	base := 10
	if err := starlark.UnpackArgs("int", args, kwargs, "value", &x, "default?", &dflt, "base?", &base); err != nil {
		return nil, err
	}
	intOf := starlark.Universe["int"].(*starlark.Builtin)
	if s, ok := x.(starlark.String); ok {
		if v, err := starlark.Call(th, intOf, starlark.Tuple{starlark.String(strings.TrimSpace(string(s))), starlark.MakeInt(base)}, nil); err == nil {
			return v, nil
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(string(s)), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return starlark.NumberToInt(starlark.Float(f))
		}
		return dflt, nil
	}
	if v, err := starlark.Call(th, intOf, starlark.Tuple{x}, nil); err == nil {
		return v, nil
	}
	return dflt, nil
}

// fFloat is Jinja's float filter: float(value, default=0.0).
func fFloat(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	var dflt starlark.Value = starlark.Float(0)
	if err := starlark.UnpackArgs("float", args, kwargs, "value", &x, "default?", &dflt); err != nil {
		return nil, err
	}
	if v, err := starlark.Call(th, starlark.Universe["float"], starlark.Tuple{x}, nil); err == nil {
		return v, nil
	}
	return dflt, nil
}
