package expr

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// This file implements the operations that the AST pass routes through internal
// builtins: each checks the allocation budget before it allocates, then does what
// Starlark would.

// maxIntBits bounds the size of integers that arithmetic may make.
const maxIntBits = 1 << 16

func bitLen(i starlark.Int) int {
	if x, ok := i.Int64(); ok {
		if x < 0 {
			return bits.Len64(uint64(-x))
		}
		return bits.Len64(uint64(x))
	}
	return i.BigInt().BitLen()
}

// chargeInt checks the size of an integer result of at least bits bits.
func chargeInt(th *starlark.Thread, bits int) error {
	if bits <= 64 {
		return nil
	}
	if bits > maxIntBits {
		return &limitError{fmt.Sprintf("integer result too large (more than %d bits)", maxIntBits)}
	}
	return charge(th, int64(bits/8))
}

// seqLen returns the length of a list-like value, or -1.
func seqLen(v starlark.Value) int {
	switch v := v.(type) {
	case *starlark.List, starlark.Tuple, *attrlist:
		return starlark.Len(v)
	}
	return -1
}

// asList materializes an attrlist into a Starlark list so Starlark's operators
// apply; other values are returned as they are.
func asList(th *starlark.Thread, v starlark.Value) (starlark.Value, error) {
	if l, ok := v.(*attrlist); ok {
		return l.toList(th)
	}
	return v, nil
}

func add(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	switch xv := x.(type) {
	case starlark.String:
		if yv, ok := y.(starlark.String); ok {
			if err := charge(th, int64(len(xv)+len(yv))); err != nil {
				return nil, err
			}
			return xv + yv, nil
		}
	case starlark.Int:
		if yv, ok := y.(starlark.Int); ok {
			if err := chargeInt(th, max(bitLen(xv), bitLen(yv))+1); err != nil {
				return nil, err
			}
			return xv.Add(yv), nil
		}
	}
	if nx, ny := seqLen(x), seqLen(y); nx >= 0 && ny >= 0 {
		if err := charge(th, int64(nx+ny)*elemBytes); err != nil {
			return nil, err
		}
		var err error
		if x, err = asList(th, x); err != nil {
			return nil, err
		}
		if y, err = asList(th, y); err != nil {
			return nil, err
		}
	}
	return starlark.Binary(syntax.PLUS, x, y)
}

// iadd is x += y: for a list x, it extends x in place, as Starlark does.
func iadd(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	if l, ok := x.(*starlark.List); ok {
		if err := extend(th, l, y); err != nil {
			return nil, err
		}
		return l, nil
	}
	return add(th, x, y)
}

// extend appends the elements of y to l; l.extend(l) doubles l, as in Python.
func extend(th *starlark.Thread, l *starlark.List, y starlark.Value) error {
	n := starlark.Len(y)
	if _, ok := y.(starlark.String); ok || n < 0 {
		// Not a collection of known size: copy it into a list first, counting
		// its elements, then extend with that.
		var elems []starlark.Value
		err := each(th, "extend", y, func(v starlark.Value) error {
			elems = append(elems, v)
			return nil
		})
		if err != nil {
			return err
		}
		y, n = starlark.NewList(elems), len(elems)
	}
	// Appending n elements copies about 2n as the list grows.
	if err := charge(th, 2*int64(n)*elemBytes); err != nil {
		return err
	}
	if err := work(th, n); err != nil {
		return err
	}
	m, err := l.Attr("extend")
	if err != nil {
		return err
	}
	_, err = starlark.Call(th, m, starlark.Tuple{y}, nil)
	return err
}

// repeatCount returns n of a repetition s * n, or an error if it cannot be small.
func repeatCount(th *starlark.Thread, n starlark.Int, unit int64) (int64, error) {
	c, ok := n.Int64()
	if !ok {
		return 0, allocErr(th)
	}
	if c <= 0 || unit == 0 {
		return 0, nil
	}
	if c > math.MaxInt64/unit {
		return 0, allocErr(th)
	}
	return c * unit, charge(th, c*unit)
}

func mul(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	if xi, ok := x.(starlark.Int); ok {
		if yi, ok := y.(starlark.Int); ok {
			if err := chargeInt(th, bitLen(xi)+bitLen(yi)); err != nil {
				return nil, err
			}
			return xi.Mul(yi), nil
		}
		x, y = y, x // n * seq
	}
	if n, ok := y.(starlark.Int); ok {
		var unit int64 = -1
		switch xv := x.(type) {
		case starlark.String:
			unit = int64(len(xv))
		case starlark.Bytes:
			unit = int64(len(xv))
		case *starlark.List, starlark.Tuple, *attrlist:
			unit = int64(starlark.Len(xv)) * elemBytes
		}
		if unit >= 0 {
			if _, err := repeatCount(th, n, unit); err != nil {
				return nil, err
			}
			var err error
			if x, err = asList(th, x); err != nil {
				return nil, err
			}
		}
	}
	return starlark.Binary(syntax.STAR, x, y)
}

// mod is x % y: string formatting, which is checked, or arithmetic.
func mod(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	f, ok := x.(starlark.String)
	if !ok {
		return starlark.Binary(syntax.PERCENT, x, y)
	}
	args := starlark.Tuple{y}
	if t, ok := y.(starlark.Tuple); ok {
		args = t
	} else if m, ok := y.(starlark.IterableMapping); ok {
		args = nil
		for _, kv := range m.Items() {
			args = append(args, kv[1])
		}
	}
	largest, err := largestText(th, args...)
	if err != nil {
		return nil, err
	}
	if est := int64(len(f)) + int64(strings.Count(string(f), "%"))*largest; est > allocLeft(th) {
		return nil, allocErr(th)
	}
	v, err := starlark.Binary(syntax.PERCENT, x, y)
	if err != nil {
		return nil, err
	}
	return v, charge(th, int64(len(v.(starlark.String))))
}

func lsh(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	if xi, ok := x.(starlark.Int); ok {
		if n, ok := y.(starlark.Int); ok {
			if c, ok := n.Int64(); ok && c > 0 && c < maxIntBits {
				if err := chargeInt(th, bitLen(xi)+int(c)); err != nil {
					return nil, err
				}
			}
		}
	}
	return starlark.Binary(syntax.LTLT, x, y)
}

func pow(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	xi, xInt := x.(starlark.Int)
	yi, yInt := y.(starlark.Int)
	if xInt && yInt && yi.Sign() >= 0 {
		xb, yb := xi.BigInt(), yi.BigInt()
		if xb.CmpAbs(big.NewInt(1)) <= 0 {
			// 0, 1 and -1 stay small whatever the exponent.
			if xb.Sign() < 0 && yb.Bit(0) == 1 {
				return starlark.MakeInt(-1), nil
			}
			if xb.Sign() == 0 && yb.Sign() != 0 {
				return starlark.MakeInt(0), nil
			}
			return starlark.MakeInt(1), nil
		}
		if !yb.IsInt64() || yb.Int64() > maxIntBits {
			return nil, chargeInt(th, maxIntBits+1)
		}
		if err := chargeInt(th, xb.BitLen()*int(yb.Int64())); err != nil {
			return nil, err
		}
		return starlark.MakeBigInt(new(big.Int).Exp(xb, yb, nil)), nil
	}
	xf, ok1 := starlark.AsFloat(x)
	yf, ok2 := starlark.AsFloat(y)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("unsupported operand types for **: %s and %s", x.Type(), y.Type())
	}
	if xf == 0 && yf < 0 {
		return nil, fmt.Errorf("zero cannot be raised to a negative power")
	}
	return starlark.Float(math.Pow(xf, yf)), nil
}

// concat is Jinja's a ~ b: the strings of both, None being "".
func concat(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	xs, err := text(th, x)
	if err != nil {
		return nil, err
	}
	ys, err := text(th, y)
	if err != nil {
		return nil, err
	}
	if err := charge(th, int64(len(xs)+len(ys))); err != nil {
		return nil, err
	}
	return starlark.String(xs + ys), nil
}

// The cost model of work done by builtins, in interpreter steps (about 15ns each):
// scanning bytesPerStep bytes of a string, or handling one element in Go code
// that converts it or calls back into Starlark (elemSteps).
const (
	bytesPerStep = 16
	elemSteps    = 4
)

// What list elements and dict entries cost against the allocation limit: more
// than their size, for the garbage collector scans them.
const (
	elemBytes  = 32
	entryBytes = 64
)

// in is x in y, counting a scan of y as work.
func in(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	switch y := y.(type) {
	case starlark.String:
		if err := work(th, len(y)/bytesPerStep); err != nil {
			return nil, err
		}
	case *starlark.List, starlark.Tuple, *attrlist:
		c := newComparer(th)
		for e := range starlark.Elements(y.(starlark.Iterable)) {
			if eq, err := c.equal(e, x, maxCompareDepth); err != nil || eq {
				return starlark.Bool(eq), err
			}
		}
		return starlark.False, nil
	}
	return starlark.Binary(syntax.IN, x, y)
}

func notIn(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	v, err := in(th, x, y)
	if err != nil {
		return nil, err
	}
	return !v.Truth(), nil
}

func eq(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	r, err := newComparer(th).equal(x, y, maxCompareDepth)
	return starlark.Bool(r), err
}

func ne(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	r, err := newComparer(th).equal(x, y, maxCompareDepth)
	return starlark.Bool(!r), err
}

// render renders the pieces of a template to one string: strings as they are,
// None as "", numbers and bools as Python prints them, lists and dicts as JSON.
func render(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	w := &writer{limit: allocLeft(th), th: th}
	for _, a := range args {
		switch a := a.(type) {
		case starlark.String:
			w.write(string(a))
		case starlark.NoneType:
		case starlark.Bool, starlark.Int:
			w.write(a.String())
		case starlark.Float:
			w.write(pyFloat(float64(a)))
		default:
			w.json(a, &jsonPython, 0)
			if w.err != nil && w.err != errTooLarge {
				return nil, fmt.Errorf("cannot render a %s in a template: %v", a.Type(), w.err)
			}
		}
		if w.err != nil {
			return nil, w.err
		}
	}
	if err := charge(th, w.n); err != nil {
		return nil, err
	}
	return starlark.String(w.b.String()), nil
}

// attr is x.name for the names in guardedMethods when they are not called at once.
func attr(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("internal error: attr needs two arguments")
	}
	x, name := args[0], string(args[1].(starlark.String))
	if handles(x, name) {
		return internals["|m."+name].(*starlark.Builtin).BindReceiver(x), nil
	}
	return getAttr(x, name)
}

func getAttr(x starlark.Value, name string) (starlark.Value, error) {
	if h, ok := x.(starlark.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil || v != nil {
			return v, err
		}
	}
	return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
}

// handles reports whether the guarded implementation of method name applies to x.
func handles(x starlark.Value, name string) bool {
	if !guardedMethods[name] {
		return false
	}
	switch x.(type) {
	case starlark.String:
		switch name {
		case "extend", "sort", "reverse", "copy":
			return false
		}
		return true
	case *starlark.List:
		switch name {
		case "extend", "sort", "reverse", "copy":
			return true
		}
	case *starlark.Dict:
		return name == "copy"
	}
	return false
}

// method returns the internal builtin for recv.name(args): the receiver is the
// first argument, or the bound receiver when reached through attr.
func method(name string) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		recv := b.Receiver()
		if recv == nil {
			if len(args) == 0 {
				return nil, fmt.Errorf("internal error: method %s without receiver", name)
			}
			recv, args = args[0], args[1:]
		}
		if d, ok := recv.(*attrdict); ok {
			if m, ok := attrdictMethods[name]; ok {
				return starlark.Call(th, m.BindReceiver(d), args, kwargs)
			}
		}
		if !handles(recv, name) {
			m, err := getAttr(recv, name)
			if err != nil {
				return nil, err
			}
			return starlark.Call(th, m, args, kwargs)
		}
		switch recv := recv.(type) {
		case starlark.String:
			return stringMethod(th, recv, name, args, kwargs)
		case *starlark.List:
			return listMethod(th, recv, name, args, kwargs)
		case *starlark.Dict:
			return starlark.Call(th, builtins["dict"], starlark.Tuple{recv}, nil)
		}
		return nil, fmt.Errorf("internal error: method %s", name)
	})
}

func stringMethod(th *starlark.Thread, s starlark.String, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := work(th, len(s)/bytesPerStep); err != nil {
		return nil, err
	}
	switch name {
	case "join":
		var iterable starlark.Value
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &iterable); err != nil {
			return nil, err
		}
		return join(th, string(s), iterable, false)
	case "replace":
		var old, repl string
		count := -1
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 2, &old, &repl, &count); err != nil {
			return nil, err
		}
		return replace(th, string(s), old, repl, count)
	case "format":
		values := append(starlark.Tuple(nil), args...)
		for _, kv := range kwargs {
			values = append(values, kv[1])
		}
		largest, err := largestText(th, values...)
		if err != nil {
			return nil, err
		}
		if est := int64(len(s)) + int64(strings.Count(string(s), "{"))*largest; est > allocLeft(th) {
			return nil, allocErr(th)
		}
	case "split", "rsplit":
		var sep starlark.Value = starlark.None
		maxsplit := -1
		if err := starlark.UnpackArgs(name, args, kwargs, "sep?", &sep, "maxsplit?", &maxsplit); err != nil {
			return nil, err
		}
		n := 0
		if sepStr, ok := sep.(starlark.String); ok && sepStr != "" {
			n = strings.Count(string(s), string(sepStr)) + 1
		} else {
			n = countFields(string(s))
		}
		if maxsplit >= 0 {
			n = min(n, maxsplit+1)
		}
		if err := work(th, n); err != nil {
			return nil, err
		}
		if err := charge(th, int64(n)*elemBytes); err != nil {
			return nil, err
		}
	case "splitlines":
		n := strings.Count(string(s), "\n") + 1
		if err := work(th, n); err != nil {
			return nil, err
		}
		if err := charge(th, int64(n)*elemBytes); err != nil {
			return nil, err
		}
	case "ljust", "rjust", "center", "zfill":
		return pad(th, s, name, args, kwargs)
	}
	m, err := s.Attr(name)
	if err != nil {
		return nil, err
	}
	v, err := starlark.Call(th, m, args, kwargs)
	if err != nil {
		return nil, err
	}
	if r, ok := v.(starlark.String); ok && name == "format" {
		return v, charge(th, int64(len(r)))
	}
	return v, nil
}

func countFields(s string) int {
	n, inField := 0, false
	for _, r := range s {
		space := r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
		if !space && !inField {
			n++
		}
		inField = !space
	}
	return n
}

// join joins the strings of iterable with sep. With convert, elements that are
// not strings are converted with str() (the join filter); otherwise they are an
// error (str.join).
func join(th *starlark.Thread, sep string, iterable starlark.Value, convert bool) (starlark.Value, error) {
	var parts []string
	var size int64
	err := each(th, "join", iterable, func(x starlark.Value) error {
		s, ok := x.(starlark.String)
		if !ok {
			if !convert {
				return fmt.Errorf("join: in list, want string, got %s", x.Type())
			}
			str, err := strValue(th, x)
			if err != nil {
				return err
			}
			s = starlark.String(str)
		}
		size += int64(len(s) + len(sep))
		if size > allocLeft(th) {
			return allocErr(th)
		}
		parts = append(parts, string(s))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := charge(th, size); err != nil {
		return nil, err
	}
	return starlark.String(strings.Join(parts, sep)), nil
}

func replace(th *starlark.Thread, s, old, repl string, count int) (starlark.Value, error) {
	n := 0
	if old == "" {
		n = utf8.RuneCountInString(s) + 1
	} else {
		n = strings.Count(s, old)
	}
	if count >= 0 {
		n = min(n, count)
	}
	if err := work(th, n); err != nil {
		return nil, err
	}
	if growth := int64(n) * int64(len(repl)-len(old)); growth > 0 {
		if err := charge(th, growth); err != nil {
			return nil, err
		}
	}
	return starlark.String(strings.Replace(s, old, repl, n)), nil
}

// pad implements Python's ljust, rjust, center and zfill, which Starlark lacks.
func pad(th *starlark.Thread, s starlark.String, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var width int
	fill := " "
	if name == "zfill" {
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &width); err != nil {
			return nil, err
		}
	} else if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &width, &fill); err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(fill) != 1 {
		return nil, fmt.Errorf("%s: the fill character must be exactly one character long", name)
	}
	n := width - utf8.RuneCountInString(string(s))
	if n <= 0 {
		return s, nil
	}
	if err := charge(th, int64(len(s))+int64(n)*int64(len(fill))); err != nil {
		return nil, err
	}
	str := string(s)
	switch name {
	case "ljust":
		return starlark.String(str + strings.Repeat(fill, n)), nil
	case "rjust":
		return starlark.String(strings.Repeat(fill, n) + str), nil
	case "center":
		left := n / 2
		if n%2 == 1 && width%2 == 1 {
			left++ // as CPython does
		}
		return starlark.String(strings.Repeat(fill, left) + str + strings.Repeat(fill, n-left)), nil
	}
	sign := ""
	if str != "" && (str[0] == '+' || str[0] == '-') {
		sign, str = str[:1], str[1:]
	}
	return starlark.String(sign + strings.Repeat("0", n) + str), nil
}

func listMethod(th *starlark.Thread, l *starlark.List, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	switch name {
	case "extend":
		var y starlark.Value
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &y); err != nil {
			return nil, err
		}
		return starlark.None, extend(th, l, y)
	case "copy":
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 0); err != nil {
			return nil, err
		}
		return starlark.Call(th, builtins["list"], starlark.Tuple{l}, nil)
	case "reverse":
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 0); err != nil {
			return nil, err
		}
		if err := work(th, l.Len()); err != nil {
			return nil, err
		}
		for i, j := 0, l.Len()-1; i < j; i, j = i+1, j-1 {
			x, y := l.Index(i), l.Index(j)
			if err := l.SetIndex(i, y); err != nil {
				return nil, err
			}
			if err := l.SetIndex(j, x); err != nil {
				return nil, err
			}
		}
		return starlark.None, nil
	case "sort":
		if len(args) > 0 {
			return nil, fmt.Errorf("sort: takes only keyword arguments (key=, reverse=)")
		}
		sorted, err := starlark.Call(th, builtins["sorted"], starlark.Tuple{l}, kwargs)
		if err != nil {
			return nil, fmt.Errorf("sort: %w", err)
		}
		s := sorted.(*starlark.List)
		for i := 0; i < s.Len(); i++ {
			if err := l.SetIndex(i, s.Index(i)); err != nil {
				return nil, err
			}
		}
		return starlark.None, nil
	}
	return nil, fmt.Errorf("internal error: list method %s", name)
}
