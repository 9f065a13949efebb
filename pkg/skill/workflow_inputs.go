package skill

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Input types of a workflow.
var inputTypes = []string{"string", "integer", "number", "boolean", "array", "object"}

// inputTypeAliases are spellings from other languages, for hints.
var inputTypeAliases = map[string]string{
	"str": "string", "text": "string", "int": "integer", "float": "number", "double": "number",
	"bool": "boolean", "list": "array", "dict": "object", "map": "object",
}

func decodeInputs(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	nodes, _ := d.seq(p.v, "inputs", "write a list such as - name: issue_key")
	for i, n := range nodes {
		f := fmt.Sprintf("inputs[%d]", i)
		ps, ok := d.pairs(n, f, "write name:, type:, required: ...")
		if !ok {
			continue
		}
		in := Input{}
		var nameN, typeN, defN, enumN, patN, maxN *yaml.Node
		var enumNodes []*yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "name":
				nameN = e.v
				in.Name, _ = d.str(e.v, ef)
			case "type":
				typeN = e.v
				in.Type, _ = d.str(e.v, ef)
			case "required":
				in.Required, _ = d.boolean(e.v, ef)
			case "default":
				if !isNull(d.resolve(e.v)) {
					defN = e.v
				}
			case "enum":
				enumN = e.v
				enumNodes, _ = d.seq(e.v, ef, "write a list of allowed values: [a, b]")
			case "pattern":
				patN = e.v
				in.Pattern, _ = d.strictStr(e.v, ef, "quote the pattern")
			case "max_length":
				maxN = e.v
				in.MaxLength, _ = d.integer(e.v, ef)
			case "description":
				in.Description, _ = d.str(e.v, ef)
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"name", "type", "required", "default", "enum", "pattern", "max_length", "description"}),
					"unknown field %s; it is ignored", ef)
			}
		}
		switch {
		case in.Name == "":
			d.errAt(n, f+".name", "add name: issue_key, the name templates read as inputs.issue_key", "%s has no name", f)
			continue
		case !isIdent(in.Name):
			d.errAt(nameN, f+".name", identHint(in.Name), "input name %q is not an identifier (letters, digits, '_'; not starting with a digit)", in.Name)
			continue
		}
		if prev, dup := wb.inputNodes[in.Name]; dup {
			d.errAt(nameN, f+".name", "rename one of them", "input %s is defined twice (first at line %d)", in.Name, prev.Line)
			continue
		}
		wb.inputNodes[in.Name] = n
		typ := in.Type
		if typ == "" {
			typ = "string"
		} else if !slices.Contains(inputTypes, typ) {
			hint := "use one of " + strings.Join(inputTypes, ", ")
			if a, ok := inputTypeAliases[strings.ToLower(typ)]; ok {
				hint = "write " + a
			} else if c := closest(typ, inputTypes); c != "" {
				hint = "did you mean " + c + "?"
			}
			d.errAt(typeN, f+".type", hint, "input %s has unknown type %q", in.Name, typ)
			typ = ""
		}
		var re *regexp.Regexp
		if patN != nil && in.Pattern != "" {
			var err error
			re, err = regexp.Compile(in.Pattern)
			if err != nil {
				d.errAt(patN, f+".pattern", regexpHint(err), "input %s: pattern does not compile: %v", in.Name, err)
				re = nil
			}
			if typ != "" && typ != "string" {
				d.warnAt(patN, f+".pattern", "remove it, or make the input a string", "pattern applies to string inputs; %s is %s", in.Name, typ)
			}
		}
		if maxN != nil {
			switch {
			case in.MaxLength < 0:
				d.errAt(maxN, f+".max_length", "omit it for no limit", "max_length must not be negative")
				in.MaxLength = 0
			case typ != "" && typ != "string" && typ != "array":
				d.warnAt(maxN, f+".max_length", "remove it", "max_length applies to strings and arrays; %s is %s", in.Name, typ)
			}
		}
		check := func(v *yaml.Node, what, field string) (any, bool) {
			val, ok := d.value(v, field)
			if !ok {
				return nil, false
			}
			r := d.resolve(v)
			if typ != "" && !matchesType(r, typ) {
				hint := "change the value, or the input's type"
				switch {
				case typ == "string" && r.Kind == yaml.ScalarNode:
					hint = "quote it: \"" + r.Value + "\""
				case r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" && matchesType(&yaml.Node{Kind: yaml.ScalarNode, Tag: resolveTag(r.Value)}, typ):
					hint = "write " + r.Value + " without quotes"
				}
				d.errAt(v, field, hint, "%s of input %s is %s, but the input is %s %s", what, in.Name, describe(r), article(typ), typ)
				return nil, false
			}
			if s, isStr := val.(string); isStr {
				if re != nil && !re.MatchString(s) {
					d.errAt(v, field, "change the value, or the pattern", "%s %q of input %s does not match its pattern %s", what, s, in.Name, in.Pattern)
					return nil, false
				}
				if in.MaxLength > 0 && utf8.RuneCountInString(s) > in.MaxLength {
					d.errAt(v, field, "", "%s of input %s is longer than its max_length %d", what, in.Name, in.MaxLength)
					return nil, false
				}
			}
			if arr, isArr := val.([]any); isArr && in.MaxLength > 0 && len(arr) > in.MaxLength {
				d.errAt(v, field, "", "%s of input %s has more than max_length %d items", what, in.Name, in.MaxLength)
				return nil, false
			}
			return val, true
		}
		if enumN != nil {
			if len(enumNodes) == 0 && !isNull(d.resolve(enumN)) && d.resolve(enumN).Kind == yaml.SequenceNode {
				d.errAt(enumN, f+".enum", "list the allowed values, or remove enum", "enum of input %s is empty", in.Name)
			}
			for j, en := range enumNodes {
				v, ok := check(en, "enum value", fmt.Sprintf("%s.enum[%d]", f, j))
				if !ok {
					continue
				}
				if slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }) {
					d.warnAt(en, fmt.Sprintf("%s.enum[%d]", f, j), "remove the duplicate", "enum of input %s lists %v twice", in.Name, v)
					continue
				}
				in.Enum = append(in.Enum, v)
			}
		}
		if defN != nil {
			if v, ok := check(defN, "default", f+".default"); ok {
				switch {
				case len(in.Enum) > 0 && !slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }):
					d.errAt(defN, f+".default", "use one of the enum values", "default %v of input %s is not one of its enum values%s",
						v, in.Name, didYouMean(fmt.Sprint(v), enumStrings(in.Enum)))
				default:
					in.Default = v
				}
				if in.Required {
					d.warnAt(defN, f+".default", "remove required: true or the default", "input %s is required, so its default is never used", in.Name)
				}
			}
		}
		wb.w.Inputs = append(wb.w.Inputs, in)
	}
}

// resolveTag is the tag YAML gives a plain scalar.
func resolveTag(v string) string {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(v), &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.ScalarNode {
		return "!!str"
	}
	return n.Content[0].ShortTag()
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func enumStrings(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprint(v)
	}
	return out
}

// matchesType reports whether a YAML node holds a value of a workflow input type.
func matchesType(n *yaml.Node, typ string) bool {
	if n == nil {
		return false
	}
	switch typ {
	case "array":
		return n.Kind == yaml.SequenceNode
	case "object":
		return n.Kind == yaml.MappingNode
	}
	if n.Kind != yaml.ScalarNode {
		return false
	}
	tag := n.ShortTag()
	switch typ {
	case "string":
		return tag == "!!str"
	case "integer":
		return tag == "!!int"
	case "number":
		return tag == "!!int" || tag == "!!float"
	case "boolean":
		return tag == "!!bool"
	}
	return false
}

func regexpHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "(?=") || strings.Contains(msg, "(?!") || strings.Contains(msg, "(?<=") || strings.Contains(msg, "(?<!"):
		return "Go regexps (RE2) have no lookahead or lookbehind; rewrite the pattern without them"
	case strings.Contains(msg, "escape sequence: `\\") && regexp.MustCompile("`\\\\[0-9]").MatchString(msg):
		return "Go regexps (RE2) have no backreferences (\\1)"
	case strings.Contains(msg, "(?>") || strings.Contains(msg, "++") || strings.Contains(msg, "*+"):
		return "Go regexps (RE2) have no atomic groups or possessive quantifiers"
	}
	return "patterns are Go regexps (RE2 syntax); inside double quotes in YAML, write \\\\ for one backslash"
}
