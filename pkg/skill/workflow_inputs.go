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

// inputBuild is an input while its fields are decoded, with the nodes the
// checks after decoding point at.
type inputBuild struct {
	in    Input
	field string
	typ   string         // the checked type: "string" when omitted, "" when unknown
	re    *regexp.Regexp // the compiled pattern

	nameN, typeN, defN, enumN, patN, maxN *yaml.Node
	enumNodes                             []*yaml.Node
}

// inputField decodes one field of an input.
type inputField struct {
	key    string
	decode func(ib *inputBuild, d *decoder, e pair, field string)
}

// inputFields are the fields of an input, in the order hints list them. Each row
// is the one place its field is read.
var inputFields = []inputField{
	{"name", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.nameN = e.v
		ib.in.Name, _ = d.str(e.v, f)
	}},
	{"type", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.typeN = e.v
		ib.in.Type, _ = d.str(e.v, f)
	}},
	{"required", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.in.Required, _ = d.boolean(e.v, f)
	}},
	{"default", func(ib *inputBuild, d *decoder, e pair, f string) {
		if !isNull(d.resolve(e.v)) {
			ib.defN = e.v
		}
	}},
	{"enum", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.enumN = e.v
		ib.enumNodes, _ = d.seq(e.v, f, "write a list of allowed values: [a, b]")
	}},
	{"pattern", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.patN = e.v
		ib.in.Pattern, _ = d.strictStr(e.v, f, "quote the pattern")
	}},
	{"max_length", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.maxN = e.v
		ib.in.MaxLength, _ = d.integer(e.v, f)
	}},
	{"description", func(ib *inputBuild, d *decoder, e pair, f string) {
		ib.in.Description, _ = d.str(e.v, f)
	}},
}

var inputKeys = func() []string {
	keys := make([]string, len(inputFields))
	for i, f := range inputFields {
		keys[i] = f.key
	}
	return keys
}()

// withoutInputField says what an input is without a field, for a misspelling's hint.
var withoutInputField = map[string]string{
	"required":   "the input is optional",
	"type":       "the input is a string",
	"default":    "the input has no default",
	"enum":       "the input takes any value of its type",
	"pattern":    "the input takes any string",
	"max_length": "the input takes a string of any length",
}

// decodeInputs decodes inputs: each field through inputFields, then the checks
// of one input, its enum and its default.
func decodeInputs(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	nodes, _ := d.seq(p.v, "inputs", "write a list such as - name: issue_key")
	for i, n := range nodes {
		f := fmt.Sprintf("inputs[%d]", i)
		ps, ok := d.pairs(n, f, "write name:, type:, required: ...")
		if !ok {
			continue
		}
		ib := &inputBuild{field: f}
		for _, e := range ps {
			ef := f + "." + e.key
			k := slices.IndexFunc(inputFields, func(x inputField) bool { return x.key == e.key })
			if k < 0 {
				d.warnAt(e.k, ef, misspeltHint(e.key, inputKeys, ps, withoutInputField), "unknown field %s; it is ignored", ef)
				continue
			}
			inputFields[k].decode(ib, d, e, ef)
		}
		if !ib.checkName(d, n, wb.inputNodes) {
			continue
		}
		wb.inputNodes[ib.in.Name] = n
		ib.checkType(d)
		ib.checkPattern(d)
		ib.checkMaxLength(d)
		ib.decodeEnum(d)
		ib.decodeDefault(d)
		wb.w.Inputs = append(wb.w.Inputs, ib.in)
	}
}

// checkName reports whether the input has a usable name, not used before.
func (ib *inputBuild) checkName(d *decoder, n *yaml.Node, seen map[string]*yaml.Node) bool {
	in, f := &ib.in, ib.field
	switch {
	case in.Name == "":
		d.errAt(n, f+".name", "add name: issue_key, the name templates read as inputs.issue_key", "%s has no name", f)
		return false
	case in.Name == AnyInput:
		// accepts undeclared fields; see AnyInput
	case !isIdent(in.Name):
		d.errAt(ib.nameN, f+".name", identHint(in.Name), "input name %q is not an identifier (letters, digits, '_'; not starting with a digit)", in.Name)
		return false
	}
	if prev, dup := seen[in.Name]; dup {
		d.errAt(ib.nameN, f+".name", "rename one of them", "input %s is defined twice (first at line %d)", in.Name, prev.Line)
		return false
	}
	return true
}

func (ib *inputBuild) checkType(d *decoder) {
	ib.typ = ib.in.Type
	switch {
	case ib.typ == "":
		ib.typ = "string"
	case !slices.Contains(inputTypes, ib.typ):
		hint := "use one of " + strings.Join(inputTypes, ", ")
		if a, ok := inputTypeAliases[strings.ToLower(ib.typ)]; ok {
			hint = "write " + a
		} else if c := closest(ib.typ, inputTypes); c != "" {
			hint = "did you mean " + c + "?"
		}
		d.errAt(ib.typeN, ib.field+".type", hint, "input %s has unknown type %q", ib.in.Name, ib.typ)
		ib.typ = ""
	}
}

func (ib *inputBuild) checkPattern(d *decoder) {
	in, f := &ib.in, ib.field
	if ib.patN == nil || in.Pattern == "" {
		return
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		d.errAt(ib.patN, f+".pattern", regexpHint(err), "input %s: pattern does not compile: %v", in.Name, err)
	} else {
		ib.re = re
	}
	if ib.typ != "" && ib.typ != "string" {
		d.warnAt(ib.patN, f+".pattern", "remove it, or make the input a string", "pattern applies to string inputs; %s is %s", in.Name, ib.typ)
	}
}

func (ib *inputBuild) checkMaxLength(d *decoder) {
	in, f := &ib.in, ib.field
	switch {
	case ib.maxN == nil:
	case in.MaxLength < 0:
		d.errAt(ib.maxN, f+".max_length", "omit it for no limit", "max_length must not be negative")
		in.MaxLength = 0
	case ib.typ != "" && ib.typ != "string" && ib.typ != "array":
		d.warnAt(ib.maxN, f+".max_length", "remove it", "max_length applies to strings and arrays; %s is %s", in.Name, ib.typ)
	}
}

// check decodes a value given for the input (an enum value or the default) and
// checks it against the input's type, pattern and max_length.
func (ib *inputBuild) check(d *decoder, v *yaml.Node, what, field string) (any, bool) {
	in, typ := &ib.in, ib.typ
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
		if ib.re != nil && !ib.re.MatchString(s) {
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

func (ib *inputBuild) decodeEnum(d *decoder) {
	in, f := &ib.in, ib.field
	if ib.enumN == nil {
		return
	}
	if r := d.resolve(ib.enumN); len(ib.enumNodes) == 0 && !isNull(r) && r.Kind == yaml.SequenceNode {
		d.errAt(ib.enumN, f+".enum", "list the allowed values, or remove enum", "enum of input %s is empty", in.Name)
	}
	for j, en := range ib.enumNodes {
		ef := fmt.Sprintf("%s.enum[%d]", f, j)
		v, ok := ib.check(d, en, "enum value", ef)
		if !ok {
			continue
		}
		if slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }) {
			d.warnAt(en, ef, "remove the duplicate", "enum of input %s lists %v twice", in.Name, v)
			continue
		}
		in.Enum = append(in.Enum, v)
	}
}

func (ib *inputBuild) decodeDefault(d *decoder) {
	in, f := &ib.in, ib.field
	if ib.defN == nil {
		return
	}
	v, ok := ib.check(d, ib.defN, "default", f+".default")
	if !ok {
		return
	}
	if len(in.Enum) > 0 && !slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }) {
		d.errAt(ib.defN, f+".default", "use one of the enum values", "default %v of input %s is not one of its enum values%s",
			v, in.Name, didYouMean(fmt.Sprint(v), enumStrings(in.Enum)))
	} else {
		in.Default = v
	}
	if in.Required {
		d.warnAt(ib.defN, f+".default", "remove required: true or the default", "input %s is required, so its default is never used", in.Name)
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
