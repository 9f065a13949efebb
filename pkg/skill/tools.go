package skill

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// toolRef is a tool named by a skill, with where.
type toolRef struct {
	name  string
	field string
	at    at
}

// tools reads a tool list. Agent Skills' allowed-tools may be one string of
// space- or comma-separated tools, each optionally with an argument pattern:
// "Bash(git:*) Read".
func (b *builder) tools(d *decoder, n *yaml.Node, key string, stringForm bool) []string {
	field := key
	if c, ok := fieldAliases[key]; ok {
		field = c
	}
	r := d.resolve(n)
	var items []item
	if stringForm && r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
		s, _ := d.str(n, field)
		for _, t := range splitTools(s) {
			items = append(items, item{s: t, n: n})
		}
	} else {
		items, _ = d.strList(n, field)
	}
	out := b.unique(d, field, items, nil)
	for i, t := range out {
		for _, it := range items {
			if it.s == t {
				b.pos[fmt.Sprintf("%s[%d]", field, i)] = d.pos(it.n)
				break
			}
		}
	}
	return out
}

// splitTools splits "Bash(git add:*), Read Grep" into tools, keeping parenthesised
// argument patterns whole.
func splitTools(s string) []string {
	var out []string
	depth, start := 0, -1
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ',' || r == ' ' || r == '\t' || r == '\n'):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// toolName is a tool reference without its argument pattern: "Bash(git:*)" → "Bash".
func toolName(t string) string {
	if i := strings.IndexByte(t, '('); i > 0 {
		return strings.TrimSpace(t[:i])
	}
	return t
}

// checkTools checks tool names against the known tools and against each other.
func (b *builder) checkTools() {
	s := b.s
	var known []string
	if b.opts.KnownTools != nil {
		known = b.opts.KnownTools
	}
	refs := func(field string, list []string) []toolRef {
		out := make([]toolRef, len(list))
		for i, t := range list {
			f := fmt.Sprintf("%s[%d]", field, i)
			out[i] = toolRef{name: t, field: f, at: b.pos[f]}
		}
		return out
	}
	required := refs("required_tools", s.RequiredTools)
	allowed := refs("allowed-tools", s.AllowedTools)
	disallowed := refs("disallowed_tools", s.DisallowedTools)
	if b.opts.KnownTools != nil {
		check := func(refs []toolRef, sev Severity) {
			for _, t := range refs {
				name := toolName(t.name)
				if slices.Contains(known, name) {
					continue
				}
				hint := ""
				if c := closest(name, known); c != "" {
					hint = "did you mean " + c + "?"
				} else if len(known) <= 20 {
					hint = "known tools: " + strings.Join(known, ", ")
				}
				*b.ds = append(*b.ds, t.at.diag(sev, t.field, hint, "unknown tool %s", name))
			}
		}
		check(required, SeverityError)
		check(allowed, SeverityError)
		check(b.stepTools, SeverityError)
		check(disallowed, SeverityWarning)
	}
	if b.opts.KnownTools == nil && b.opts.LikelyTools != nil {
		for _, t := range b.stepTools {
			if slices.Contains(b.opts.LikelyTools, t.name) {
				continue
			}
			if c := closest(t.name, b.opts.LikelyTools); c != "" {
				*b.ds = append(*b.ds, t.at.diag(SeverityWarning, t.field,
					"tools served on the bus or by MCP servers are not known offline: --known-tools names a fleet's tools, --remote asks its registry",
					"tool %s is not a built-in tool; did you mean %s?", t.name, c))
			}
		}
	}
	banned := map[string]bool{}
	for _, t := range disallowed {
		banned[toolName(t.name)] = true
	}
	for _, group := range [][]toolRef{required, allowed, b.stepTools} {
		for _, t := range group {
			if banned[toolName(t.name)] {
				*b.ds = append(*b.ds, t.at.diag(SeverityError, t.field, "remove it from one of the lists",
					"tool %s is also in disallowed_tools", toolName(t.name)))
			}
		}
	}
}
