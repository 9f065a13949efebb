package skill

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/expr"
)

// checkReferences compiles every template, condition and compute block of the
// workflow and checks the names they read: each must be provided by the engine, an
// earlier step (its id or output), or the step's own loop variable; attributes of
// inputs must be declared inputs.
func (wb *workflowBuilder) checkReferences(b *builder, index map[string]int) {
	w := wb.w
	nc := nameCheck{definedBy: map[string]int{}}
	for _, in := range w.Inputs {
		nc.inputNames = append(nc.inputNames, in.Name)
	}
	// definedBy maps each name a step defines to the first step defining it.
	for i, st := range w.Steps {
		for _, n := range []string{st.ID, st.Output} {
			if _, ok := nc.definedBy[n]; n != "" && !ok {
				nc.definedBy[n] = i
			}
		}
	}
	for _, s := range wb.sites {
		refs, reads, err := compileSite(s)
		if err != nil {
			wb.reportCompileError(s, err)
			continue
		}
		if len(refs) == 0 {
			continue
		}
		scope := wb.scopeOf(s, index)
		known := append(slices.Clone(reservedNames), wb.visible(scope)...)
		if s.loopVar != "" {
			known = append(known, s.loopVar)
		}
		for _, name := range refs {
			if !slices.Contains(known, name) {
				wb.reportName(s, nc, scope, known, name, wb.readPos(s, reads, name))
			}
		}
		if slices.Contains(refs, "inputs") {
			wb.checkInputReads(s, nc.inputNames, reads)
		}
	}
	wb.checkWaitMatches(nc)
}

// nameCheck is what checking a name needs to know of the workflow.
type nameCheck struct {
	inputNames []string
	definedBy  map[string]int // each name a step defines → the first step defining it
}

// scopeOf is how many steps, from the first, a site sees.
func (wb *workflowBuilder) scopeOf(s site, index map[string]int) int {
	switch s.scope {
	case scopeAll:
		return len(wb.w.Steps)
	case scopeConfirm:
		if k, ok := index[wb.w.Confirmations[s.confirm].Step]; ok {
			return k
		}
		return len(wb.w.Steps)
	}
	return s.scope
}

// visible are the names the first scope steps define.
func (wb *workflowBuilder) visible(scope int) []string {
	var out []string
	for _, st := range wb.w.Steps[:scope] {
		if st.ID != "" {
			out = append(out, st.ID)
		}
		if st.Output != "" {
			out = append(out, st.Output)
		}
	}
	return out
}

// reportName reports a name a site reads that it cannot see, saying why.
func (wb *workflowBuilder) reportName(s site, nc nameCheck, scope int, known []string, name string, p at) {
	d, w := wb.d, wb.w
	k, defined := nc.definedBy[name]
	switch {
	case defined && k == scope && s.scope >= 0:
		d.add(SeverityError, p.line, p.col, s.field, "a step cannot read its own result; use it in a later step",
			"%s is the result of this step, which is not available yet", name)
	case defined && k >= scope:
		what := fmt.Sprintf("step %s (line %d)", name, w.Steps[k].Line)
		if name != w.Steps[k].ID {
			what = fmt.Sprintf("%s comes from step %s (line %d), which", name, w.Steps[k].ID, w.Steps[k].Line)
		}
		if s.scope == scopeConfirm {
			d.add(SeverityError, p.line, p.col, s.field, "a confirmation is asked before its step runs; it can use earlier steps only",
				"%s has not run when this confirmation is asked", what)
			return
		}
		d.add(SeverityError, p.line, p.col, s.field, "move the step that uses it after "+w.Steps[k].ID,
			"%s runs later", what)
	case slices.Contains(nc.inputNames, name):
		d.add(SeverityError, p.line, p.col, s.field, "inputs are read through inputs",
			"unknown step or name %s; did you mean inputs.%s?", name, name)
	default:
		d.add(SeverityError, p.line, p.col, s.field, knownHint(known),
			"unknown step or name %s%s", name, didYouMean(name, known))
	}
}

// checkInputReads checks that the keys a site reads of inputs are declared.
func (wb *workflowBuilder) checkInputReads(s site, inputNames []string, reads []expr.Read) {
	for _, r := range reads {
		if r.Name == "inputs" && r.Key != "" {
			wb.checkInput(wb.srcPos(s, r.KeyLine, r.KeyCol), s.field, inputNames, r.Key)
		}
	}
}

// checkInput reports an input read at p that is not declared. A skill that
// declares "*" takes every field, so any name may be read; a run whose data
// lacks it fails there, as it does on any missing input.
func (wb *workflowBuilder) checkInput(p at, field string, inputNames []string, name string) {
	switch {
	case slices.Contains(inputNames, name), slices.Contains(inputNames, AnyInput):
	case len(inputNames) == 0:
		wb.d.add(SeverityError, p.line, p.col, field, "declare it under inputs:", "unknown input %s: the skill declares no inputs", name)
	default:
		wb.d.add(SeverityError, p.line, p.col, field, "declared inputs: "+strings.Join(inputNames, ", "),
			"unknown input %s%s", name, didYouMean(name, inputNames))
	}
}

func knownHint(known []string) string {
	if len(known) > 12 {
		return ""
	}
	return "names available here: " + strings.Join(known, ", ")
}

// compileSite compiles a site with the parser that runs it, and returns the
// names it reads and where it reads them.
func compileSite(s site) ([]string, []expr.Read, error) {
	switch s.kind {
	case siteExpr:
		e, err := expr.ParseExpr(s.src)
		if err != nil {
			return nil, nil, err
		}
		return e.Refs(), e.Reads(), nil
	case siteProgram:
		p, err := expr.ParseProgram(s.src)
		if err != nil {
			return nil, nil, err
		}
		return p.Refs(), p.Reads(), nil
	}
	t, err := expr.ParseTemplate(s.src)
	if err != nil {
		return nil, nil, err
	}
	return t.Refs(), t.Reads(), nil
}

func (wb *workflowBuilder) reportCompileError(s site, err error) {
	what := map[siteKind]string{siteTemplate: "template", siteExpr: "condition", siteProgram: "compute block"}[s.kind]
	var e *expr.Error
	if !errors.As(err, &e) {
		wb.d.add(SeverityError, s.at.line, s.at.col, s.field, "", "invalid %s: %v", what, err)
		return
	}
	p := s.at
	if e.Line > 0 {
		p = wb.srcPos(s, e.Line, e.Col)
	}
	hint := ""
	switch {
	case strings.Contains(e.Msg, "unclosed {{"):
		hint = "close it with }}"
	case strings.Contains(e.Msg, "syntax error") && cOperators.MatchString(celStrings.ReplaceAllString(s.src, `""`)):
		hint = "expressions here are Python: write &&, ||, ! as and, or, not"
	case strings.Contains(e.Msg, "syntax error"):
		hint = "expressions use Python syntax (Starlark); see docs/authoring.md, Templates, conditions and compute"
	}
	wb.d.add(SeverityError, p.line, p.col, s.field, hint, "invalid %s: %s", what, e.Msg)
}

// cOperators finds &&, || and a ! that is not !=, as CEL, JavaScript and C write them.
var cOperators = regexp.MustCompile(`&&|\|\||!($|[^=])`)

// readPos is where a site first reads name.
func (wb *workflowBuilder) readPos(s site, reads []expr.Read, name string) at {
	for _, r := range reads {
		if r.Name == name {
			return wb.srcPos(s, r.Line, r.Col)
		}
	}
	return s.at
}

// srcPos maps a 1-based line and column of a site's source to a file position: for
// a block scalar, its lines are the file's lines below the indicator, indented; for
// a one-line value, the column is offset by the value's column and its quote.
func (wb *workflowBuilder) srcPos(s site, line, col int) at {
	p := s.at
	switch {
	case s.block:
		p.line += line - 1
		p.col = 0
		if text, ok := wb.d.line(p.line); ok {
			p.col = utf8.RuneCountInString(text) - utf8.RuneCountInString(strings.TrimLeft(text, " ")) + col
		}
	case line == 1 && p.col > 0:
		p.col += col - 1
		if s.quoted {
			p.col++
		}
	default:
		p.line += line - 1
		p.col = 0
	}
	return p
}

// line returns the text of a line of the decoder's file, when it has the source.
func (d *decoder) line(n int) (string, bool) {
	if d.src == "" || n < 1 {
		return "", false
	}
	src := d.src
	for range n - 1 {
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return "", false
		}
		src = src[i+1:]
	}
	if i := strings.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return src, true
}
