package skill

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// siteKind is how a source string is read.
type siteKind int

// site is a template or expression written in a workflow.
type site struct {
	kind    siteKind
	src     string
	field   string
	at      at
	scope   int    // the names of steps[:scope] are visible; scopeAll, or scopeConfirm
	confirm int    // with scopeConfirm: the confirmation, which sees the steps before the one it confirms
	loopVar string // the step's own loop variable, visible in its condition, args and compute
	block   bool   // a block scalar (|, >): the source starts on the line after at
	quoted  bool   // a quoted scalar: the source starts one column after at
}

// newSite records a source at node n.
func (wb *workflowBuilder) newSite(kind siteKind, src, field string, n *yaml.Node, scope int, loopVar string) {
	s := site{kind: kind, src: src, field: field, at: wb.d.pos(n), scope: scope, loopVar: loopVar}
	if r := wb.d.resolve(n); r != nil {
		s.block = r.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
		s.quoted = r.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
		s.at = wb.d.pos(r)
	}
	if s.block {
		s.at.line++
		s.at.col = 0
	}
	wb.sites = append(wb.sites, s)
}

const (
	scopeAll     = -1
	scopeConfirm = -2
)

// templates collects every string holding "{{" under a node as a template site.
func (wb *workflowBuilder) templates(d *decoder, n *yaml.Node, field string, scope int, loopVar string) {
	budget := 10_000
	var walk func(n *yaml.Node, field string, depth int)
	walk = func(n *yaml.Node, field string, depth int) {
		budget--
		if n = d.resolve(n); n == nil || budget < 0 || depth > 100 {
			return
		}
		switch n.Kind {
		case yaml.ScalarNode:
			if n.ShortTag() == "!!str" && strings.Contains(n.Value, "{{") {
				wb.newSite(siteTemplate, n.Value, field, n, scope, loopVar)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", field, i), depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(field, n.Content[i].Value), depth+1)
			}
		}
	}
	walk(n, field, 0)
}

const (
	siteTemplate siteKind = iota // text with {{ }} templates
	siteExpr                     // a condition: one expression
	siteProgram                  // a compute block: statements assigning result
)
