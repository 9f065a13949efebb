package expr

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"
)

// Jinja's undefined: a name env lacks, or a key, attribute or index that is not
// there. Expressions read a missing name as None and fail on a missing key, so
// that mistakes are loud; `is defined`, `is undefined` and the default filter
// are where Jinja's undefined is asked about, and there they evaluate their
// operand through undefinedOr.

// isDefined is `X is defined`: |defined(root, lambda: X).
func isDefined(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	_, defined, err := undefinedOr(th, args, kwargs)
	return starlark.Bool(defined), err
}

// lazyValue is the operand of the default filter: |lazy(root, lambda: X) is X,
// or None when X is undefined.
func lazyValue(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, defined, err := undefinedOr(th, args, kwargs)
	if err != nil || !defined {
		return starlark.None, err
	}
	return v, nil
}

// undefinedOr evaluates the function in args[1], whose value starts from the
// name args[0] ("" if not a name from env), and reports whether it is defined.
func undefinedOr(th *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, bool, error) {
	if len(args) != 2 || len(kwargs) != 0 {
		return nil, false, fmt.Errorf("internal error: defined needs two arguments")
	}
	root, _ := starlark.AsString(args[0])
	if st := stateOf(th); root != "" && st != nil && slices.Contains(st.missing, root) {
		return nil, false, nil
	}
	v, err := starlark.Call(th, args[1], nil, nil)
	if err != nil {
		if isUndefined(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return v, true, nil
}

// isUndefined reports whether err is a read of something that is not there.
func isUndefined(err error) bool {
	var me *missingError
	if errors.As(err, &me) {
		return true
	}
	var ee *starlark.EvalError
	msg := err.Error()
	if errors.As(err, &ee) {
		msg = ee.Msg
	}
	for _, s := range []string{"out of range", "not in dict", "has no .", "has no key"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
