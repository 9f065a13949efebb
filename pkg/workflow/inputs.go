package workflow

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
)

// undeclared is the error for inputs the skill does not declare, naming the first
// in alphabetical order so the message does not depend on map order.
func undeclared(decl []cinput, given map[string]any) error {
	names := make([]string, 0, len(decl))
	for _, ci := range decl {
		names = append(names, ci.in.Name)
	}
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			// A typo stands for a declared input that was not given: look among
			// those first.
			var missing []string
			for _, n := range names {
				if _, ok := given[n]; !ok {
					missing = append(missing, n)
				}
			}
			hint := ""
			if c := cmp.Or(skill.Closest(k, missing), skill.Closest(k, names)); c != "" {
				hint = "; did you mean " + c + "?"
			}
			if _, obj := given[k].(map[string]any); k == "data" && len(given) == 1 && !obj {
				// What the router makes of a trigger whose data is not an object.
				hint = ": the trigger's data is not a JSON object, and such data comes as one input named data"
			}
			return failure.Fatalf("input %s is not declared by the skill%s (declared: %s; a skill that takes other fields declares an input named \"*\")",
				k, hint, strings.Join(names, ", "))
		}
	}
	return nil
}

// validateInputs checks given against the declared inputs and returns the inputs the
// run sees: given values plus defaults. A skill that declares inputs rejects fields
// it does not declare, unless it declares the input "*" (skill.AnyInput); a skill that
// declares none takes anything. Every violation is Fatal: the same inputs will fail
// again.
//
// The map returned is given itself unless a default or a conversion changes it
// (then a copy, unless own says given is the run's to change): a run reads its
// inputs and never writes them.
func validateInputs(decl []cinput, given map[string]any, own bool) (map[string]any, error) {
	out, copied := given, own
	if out == nil {
		out = map[string]any{}
	}
	set := func(k string, v any) {
		if !copied {
			out, copied = maps.Clone(out), true
		}
		out[k] = v
	}
	if len(decl) > 0 && !slices.ContainsFunc(decl, func(ci cinput) bool { return ci.in.Name == skill.AnyInput }) {
		for k := range given {
			if !slices.ContainsFunc(decl, func(ci cinput) bool { return ci.in.Name == k }) {
				return nil, undeclared(decl, given)
			}
		}
	}
	for _, ci := range decl {
		in := ci.in
		if in.Name == skill.AnyInput {
			continue
		}
		v, ok := out[in.Name]
		if !ok || v == nil {
			if in.Default != nil {
				set(in.Name, in.Default)
				continue
			}
			if in.Required {
				return nil, failure.Fatalf("input %s is required%s", in.Name, describe(in.Description))
			}
			continue
		}
		typ := in.Type
		if typ == "" {
			typ = "string"
		}
		if err := checkType(typ, v); err != nil {
			return nil, failure.Fatalf("input %s: %v", in.Name, err)
		}
		if typ == "integer" {
			if f, ok := v.(float64); ok {
				set(in.Name, int64(f))
			}
		}
		if len(in.Enum) > 0 && !inEnum(in.Enum, v) {
			return nil, failure.Fatalf("input %s: %v is not one of %v", in.Name, v, in.Enum)
		}
		if s, ok := v.(string); ok {
			if in.MaxLength > 0 && utf8.RuneCountInString(s) > in.MaxLength {
				return nil, failure.Fatalf("input %s: %d characters, more than max_length %d", in.Name, utf8.RuneCountInString(s), in.MaxLength)
			}
			if ci.pattern != nil && !ci.pattern.MatchString(s) {
				return nil, failure.Fatalf("input %s: %q does not match pattern %s", in.Name, s, in.Pattern)
			}
		}
	}
	return out, nil
}

func describe(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

func checkType(typ string, v any) error {
	ok := false
	switch typ {
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "number":
		switch v.(type) {
		case float64, int64, int:
			ok = true
		}
	case "integer":
		switch n := v.(type) {
		case int64, int:
			ok = true
		case float64:
			ok = n == math.Trunc(n) && !math.IsInf(n, 0)
		}
	case "array":
		_, ok = v.([]any)
	case "object":
		_, ok = v.(map[string]any)
	default:
		return fmt.Errorf("unknown type %q", typ)
	}
	if !ok {
		return fmt.Errorf("want %s, got %s", typ, jsonKind(v))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case float64, int64, int:
		return fmt.Sprintf("number %v", v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		if reflect.DeepEqual(e, v) {
			return true
		}
		// YAML ints vs JSON floats.
		if a, ok := toFloat(e); ok {
			if b, ok := toFloat(v); ok && a == b {
				return true
			}
		}
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}
