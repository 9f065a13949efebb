package skill

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxYAMLNodes bounds how many nodes one document may expand to through aliases, so
// that a "billion laughs" document or an alias cycle is an error, not a hang.
const maxYAMLNodes = 100_000

// decoder turns yaml.Nodes of one file into Go values, reporting every problem at its
// line and column instead of stopping at the first.
type decoder struct {
	report
	src    string // the file's text, for positions inside block scalars; may be empty
	budget int
	top    *yaml.Node // the value being converted, where an exhausted budget is reported
}

func newDecoder(file string, ds *Diagnostics) *decoder {
	return &decoder{report: report{file: file, ds: ds}, budget: maxYAMLNodes}
}

func (d *decoder) errAt(n *yaml.Node, field, hint, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	d.add(SeverityError, line, col, field, hint, format, args...)
}

func (d *decoder) warnAt(n *yaml.Node, field, hint, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	d.add(SeverityWarning, line, col, field, hint, format, args...)
}

func (d *decoder) pos(n *yaml.Node) at {
	if n == nil {
		return at{file: d.file}
	}
	return at{file: d.file, line: n.Line, col: n.Column}
}

// spend charges one node against the document's budget; false once it is exhausted
// (reported once).
func (d *decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == 0 {
		if d.top != nil {
			n = d.top
		}
		d.errAt(n, "", "avoid deeply nested aliases", "YAML aliases expand to more than %d nodes", maxYAMLNodes)
	}
	return d.budget > 0
}

// resolve follows aliases to the node they name.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		if n.Alias == nil {
			return nil
		}
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// describe names the kind of value a node holds, for messages: `the string "three"`.
func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "the boolean " + v
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!str":
		return "the string " + strconv.Quote(v)
	}
	return fmt.Sprintf("the %s value %q", n.ShortTag(), v)
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// pair is one key and value of a mapping.
type pair struct {
	key  string
	k, v *yaml.Node
}

// pairs returns the entries of a mapping in order, with YAML merge keys (<<) expanded
// and duplicate keys reported. A null node is an empty mapping. ok is false when the
// node is not a mapping (reported).
func (d *decoder) pairs(n *yaml.Node, field, hint string) (ps []pair, ok bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.errAt(orig, field, hint, "%s must be a mapping, not %s", fieldName(field), describe(n))
		return nil, false
	}
	seen := map[string]*yaml.Node{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(k) {
			return ps, false
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, field)...)
			continue
		}
		rk := d.resolve(k)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			if hint := misreadTextHint(n, field); hint != "" {
				d.errAt(n, field, hint, "%s has %s as a key", fieldName(field), describe(rk))
				continue
			}
			d.errAt(k, field, "keys are plain names", "%s has %s as a key", fieldName(field), describe(rk))
			continue
		}
		if first, dup := seen[rk.Value]; dup {
			d.errAt(k, join(field, rk.Value), "remove one of them", "duplicate key %s (first at line %d)", rk.Value, first.Line)
			continue
		}
		seen[rk.Value] = k
		ps = append(ps, pair{key: rk.Value, k: k, v: v})
	}
	// Explicit keys win over merged ones.
	for _, p := range merged {
		if _, dup := seen[p.key]; !dup {
			seen[p.key] = p.k
			ps = append(ps, p)
		}
	}
	return ps, true
}

func (d *decoder) mergePairs(v *yaml.Node, field string) []pair {
	r := d.resolve(v)
	if r == nil {
		return nil
	}
	switch r.Kind {
	case yaml.MappingNode:
		ps, _ := d.pairs(r, field, "")
		return ps
	case yaml.SequenceNode:
		var out []pair
		for _, item := range r.Content {
			if !d.spend(item) {
				return out
			}
			out = append(out, d.mergePairs(item, field)...)
		}
		return out
	}
	d.errAt(v, field, "<< merges a mapping or a list of mappings", "cannot merge %s", describe(r))
	return nil
}

// seq returns the items of a list; a null node is an empty list.
func (d *decoder) seq(n *yaml.Node, field, hint string) ([]*yaml.Node, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		d.errAt(orig, field, hint, "%s must be a list, not %s", fieldName(field), describe(n))
		return nil, false
	}
	return n.Content, true
}

// str reads a scalar as text, exactly as written: `version: 1.10` is "1.10", not
// 1.1. ok is false when the node is null (not reported: the caller knows whether
// the field is required) or not a scalar (reported).
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.errAt(orig, field, misreadTextHint(n, field), "%s must be a string, not %s", fieldName(field), describe(n))
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
		return n.Value, true
	}
	d.errAt(orig, field, "", "%s must be a string, not %s", fieldName(field), describe(n))
	return "", false
}

// strictStr is str for fields where a number or boolean is certainly a mistake.
func (d *decoder) strictStr(n *yaml.Node, field, hint string) (string, bool) {
	r := d.resolve(n)
	if r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() != "!!str" && !isNull(r) {
		d.errAt(n, field, hint, "%s must be a string, not %s", fieldName(field), describe(r))
		return "", false
	}
	return d.str(n, field)
}

// item is one string of a list, with its node for positions.
type item struct {
	s string
	n *yaml.Node
}

// strList reads a list of strings. Empty strings are reported and dropped.
func (d *decoder) strList(n *yaml.Node, field string) ([]item, bool) {
	r := d.resolve(n)
	if r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
		d.errAt(n, field, fmt.Sprintf("write %s: [%s], or one '- item' per line", fieldName(field), r.Value),
			"%s must be a list, not %s", fieldName(field), describe(r))
		return nil, false
	}
	nodes, ok := d.seq(n, field, "")
	if !ok {
		return nil, false
	}
	out := make([]item, 0, len(nodes))
	for i, it := range nodes {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := d.str(it, f)
		if !ok {
			if isNull(d.resolve(it)) {
				d.errAt(it, f, "remove the empty item", "%s is empty", f)
			}
			continue
		}
		if strings.TrimSpace(s) == "" {
			d.errAt(it, f, "remove the empty item", "%s is empty", f)
			continue
		}
		out = append(out, item{s: s, n: it})
	}
	return out, true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return false, false
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	}
	hint := "write true or false"
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		switch strings.ToLower(n.Value) {
		case "true", "false", "yes", "no", "on", "off":
			hint = "write true or false, without quotes"
		}
	}
	d.errAt(orig, field, hint, "%s must be true or false, not %s", fieldName(field), describe(n))
	return false, false
}

func (d *decoder) integer(n *yaml.Node, field string) (int, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return 0, false
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			var i int
			if err := n.Decode(&i); err == nil {
				return i, true
			}
			d.errAt(orig, field, "", "%s %s is out of range", fieldName(field), n.Value)
			return 0, false
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return int(f), true
			}
		case "!!str":
			if _, err := strconv.Atoi(strings.TrimSpace(n.Value)); err == nil {
				d.errAt(orig, field, "write the number without quotes", "%s must be an integer, not %s", fieldName(field), describe(n))
				return 0, false
			}
		}
	}
	d.errAt(orig, field, "write a whole number, e.g. 3", "%s must be an integer, not %s", fieldName(field), describe(n))
	return 0, false
}

// duration reads seconds (30, 1.5) or a Go duration string ("1m30s").
func (d *decoder) duration(n *yaml.Node, field string) (Duration, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return 0, false
	}
	hint := "write seconds (30) or a Go duration (\"1m30s\")"
	if n.Kind != yaml.ScalarNode {
		d.errAt(orig, field, hint, "%s must be a duration, not %s", fieldName(field), describe(n))
		return 0, false
	}
	switch n.ShortTag() {
	case "!!int", "!!float", "!!str":
		v, err := ParseDuration(n.Value)
		if f, ferr := strconv.ParseFloat(strings.TrimSpace(n.Value), 64); err != nil && ferr == nil && f < 0 {
			d.errAt(orig, field, hint, "%s must not be negative", fieldName(field))
			return 0, false
		}
		if err != nil {
			d.errAt(orig, field, hint, "%s must be a duration, not %s", fieldName(field), describe(n))
			return 0, false
		}
		if v > Duration(365*24*time.Hour) || v < 0 {
			d.errAt(orig, field, hint, "%s %s is out of range", fieldName(field), n.Value)
			return 0, false
		}
		return v, true
	}
	d.errAt(orig, field, hint, "%s must be a duration, not %s", fieldName(field), describe(n))
	return 0, false
}

// size reads a positive number of bytes: a whole number or a string such as
// "512MiB" (ParseSize).
func (d *decoder) size(n *yaml.Node, field string) (int64, bool) {
	orig := n
	n = d.resolve(n)
	if isNull(n) {
		return 0, false
	}
	hint := `write bytes (1048576) or a size with a unit ("512MiB", "2GB")`
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" && n.ShortTag() != "!!float" && n.ShortTag() != "!!str" {
		d.errAt(orig, field, hint, "%s must be a size, not %s", fieldName(field), describe(n))
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.errAt(orig, field, hint, "%s: %v", fieldName(field), err)
		return 0, false
	}
	if v < 1 {
		d.errAt(orig, field, hint+", at least 1 byte; or leave it out to keep the worker's", "%s must be at least 1 byte, not %s", fieldName(field), n.Value)
		return 0, false
	}
	return v, true
}

// value converts a node to plain Go data that survives a JSON round trip: nil, bool,
// int, float64, string, []any and map[string]any.
func (d *decoder) value(n *yaml.Node, field string) (any, bool) {
	if d.top == nil {
		d.top = n
		defer func() { d.top = nil }()
	}
	if !d.spend(n) {
		return nil, false
	}
	orig := n
	n = d.resolve(n)
	if n == nil {
		d.errAt(orig, field, "", "%s: unresolved alias", fieldName(field))
		return nil, false
	}
	switch n.Kind {
	case 0:
		return nil, true
	case yaml.ScalarNode:
		return d.scalar(n, orig, field)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := d.value(c, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && vok
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		ps, ok := d.pairs(n, field, "")
		out := make(map[string]any, len(ps))
		for _, p := range ps {
			v, vok := d.value(p.v, join(field, p.key))
			ok = ok && vok
			out[p.key] = v
		}
		return out, ok
	}
	d.errAt(orig, field, "", "%s: unexpected %s", fieldName(field), describe(n))
	return nil, false
}

func (d *decoder) scalar(n, orig *yaml.Node, field string) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	case "!!int":
		var i int
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsInf(f, 0) {
			return f, true
		}
		d.errAt(orig, field, "", "%s: integer %s is out of range", fieldName(field), n.Value)
		return nil, false
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				d.errAt(orig, field, "quote it if you mean the text", "%s: %s is not a finite number", fieldName(field), n.Value)
				return nil, false
			}
			return f, true
		}
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, true
	default:
		d.errAt(orig, field, "remove the tag", "%s: unsupported YAML tag %s", fieldName(field), n.Tag)
		return nil, false
	}
	d.errAt(orig, field, "", "%s: cannot read %s", fieldName(field), describe(n))
	return nil, false
}

// fieldName is the field for messages; the top level of a document has none.
func fieldName(field string) string {
	if field == "" {
		return "the document"
	}
	return field
}

// misreadTextHint is how to write as text a value YAML read as a mapping because
// it is not quoted, or "" when n does not look like one: a template, {{ x }},
// which YAML reads as {{x: null}: null}, or a line holding ': ', which it reads
// as a key and its value.
func misreadTextHint(n *yaml.Node, field string) string {
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return ""
	}
	k, v := n.Content[0], n.Content[1]
	switch {
	case n.Style&yaml.FlowStyle != 0 && k.Kind == yaml.MappingNode && k.Style&yaml.FlowStyle != 0 && isNull(v) &&
		len(k.Content) == 2 && k.Content[0].Kind == yaml.ScalarNode && k.Content[0].Style == 0 && isNull(k.Content[1]):
		return "YAML reads {{ }} without quotes as a mapping; quote it: " + asText(field, "{{ "+k.Content[0].Value+" }}")
	case n.Style&yaml.FlowStyle == 0 && k.Kind == yaml.ScalarNode && k.Style == 0 && v.Kind == yaml.ScalarNode && v.Style == 0 && !isNull(v):
		return "YAML reads ': ' without quotes as a key and its value; quote it: " + asText(field, k.Value+": "+v.Value)
	}
	return ""
}

// asText is field set to the quoted text: `condition: "{{ x }}"`, or for an item of a
// list, `- "convert: 451 F"`.
func asText(field, text string) string {
	q := `"` + text + `"`
	if strings.ContainsAny(text, `"\`) {
		q = "'" + strings.ReplaceAll(text, "'", "''") + "'"
	}
	if strings.HasSuffix(field, "]") {
		return "- " + q
	}
	return field[strings.LastIndexByte(field, '.')+1:] + ": " + q
}

// join appends a key to a field path.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}
