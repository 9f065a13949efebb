package skill

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

const maxStepRetries = 10

func identHint(s string) string {
	if id := suggestIdent(s); id != "" && id != s {
		return "write " + id
	}
	return "use letters, digits and '_', not starting with a digit"
}

func decodeSteps(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	wb.stepsKey = p.k
	nodes, _ := d.seq(p.v, "steps", "write a list of steps, each starting with - id:")
	ids := map[string]*yaml.Node{}
	for i, n := range nodes {
		f := fmt.Sprintf("steps[%d]", i)
		ps, ok := d.pairs(n, f, "a step is a mapping: id:, tool: or compute:, ...")
		if !ok {
			continue
		}
		st := Step{Line: n.Line}
		if r := d.resolve(n); r != nil {
			st.Line = r.Line
		}
		info := stepInfo{n: n, field: f}
		var idN, toolN, computeN, loopN, onErrN, argsN, condN *yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "id":
				idN = e.v
				st.ID, _ = d.str(e.v, ef)
			case "description":
				st.Description, _ = d.str(e.v, ef)
			case "tool":
				toolN = e.v
				st.Tool, _ = d.strictStr(e.v, ef, "write the tool's name")
			case "args":
				argsN = e.v
				v, ok := d.value(e.v, ef)
				if !ok || v == nil {
					continue
				}
				m, isMap := v.(map[string]any)
				if !isMap {
					d.errAt(e.v, ef, "write the tool's arguments as name: value pairs", "args must be a mapping, not %s", describe(d.resolve(e.v)))
					continue
				}
				st.Args = m
			case "compute":
				computeN = e.v
				st.Compute, _ = d.strictStr(e.v, ef, "write the code as a block: compute: |")
			case "condition":
				condN = e.v
				if r := d.resolve(e.v); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
					b, _ := strconv.ParseBool(r.Value)
					st.Condition = map[bool]string{true: "True", false: "False"}[b]
				} else {
					st.Condition, _ = d.str(e.v, ef)
				}
			case "loop":
				loopN = e.v
				st.Loop, _ = d.strictStr(e.v, ef, "write the collection as a template: loop: \"{{ items }}\"")
			case "loop_var":
				info.loopVarN = e.v
				st.LoopVar, _ = d.str(e.v, ef)
			case "output":
				info.outputN = e.v
				st.Output, _ = d.str(e.v, ef)
			case "on_error":
				onErrN = e.v
				st.OnError, _ = d.str(e.v, ef)
			case "timeout":
				info.timeoutN = e.v
				var ok bool
				if st.Timeout, ok = d.duration(e.v, ef); ok && st.Timeout == 0 {
					d.errAt(e.v, ef, "omit it to use the skill's timeout", "step timeout must be positive")
				}
			case "parallel_group":
				info.group = e.v
				r := d.resolve(e.v)
				if r == nil || r.Kind != yaml.ScalarNode || isNull(r) {
					d.errAt(e.v, ef, "write a number or a name", "parallel_group must be a number or a name, not %s", describe(r))
					continue
				}
				st.ParallelGroup = r.Value
			case "depends_on":
				info.dependsOn, _ = d.strList(e.v, ef)
				for _, it := range info.dependsOn {
					st.DependsOn = append(st.DependsOn, it.s)
				}
			case "cache":
				if r := d.resolve(e.v); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
					d.errAt(e.v, ef, "write the TTL in seconds, e.g. cache: 300", "cache takes how long to keep the result, not %s", describe(r))
					continue
				}
				var ok bool
				if st.Cache, ok = d.duration(e.v, ef); ok && st.Cache == 0 {
					d.errAt(e.v, ef, "omit cache to not cache", "cache TTL must be positive")
				}
			default:
				d.warnAt(e.k, ef, hintFor(e.key, stepKeys), "unknown field %s; it is ignored", ef)
			}
		}
		// Identity.
		switch {
		case st.ID == "":
			d.errAt(n, f+".id", "give every step an id: - id: fetch_issue", "%s has no id", f)
		case !isIdent(st.ID):
			d.errAt(idN, f+".id", identHint(st.ID), "step id %q is not an identifier (letters, digits, '_'; not starting with a digit)", st.ID)
		case slices.Contains(reservedNames, st.ID):
			d.errAt(idN, f+".id", "rename the step", "step id %s is reserved: templates use it for the engine's %s", st.ID, st.ID)
		default:
			if prev, dup := ids[st.ID]; dup {
				d.errAt(idN, f+".id", "give each step its own id", "step id %s is used twice (first at line %d)", st.ID, prev.Line)
			} else {
				ids[st.ID] = idN
			}
		}
		label := st.ID
		if label == "" {
			label = f
		}
		// What the step does.
		switch {
		case st.Tool != "" && st.Compute != "":
			d.errAt(computeN, f, "split it into two steps", "step %s has both tool and compute; a step does one of them", label)
		case st.Tool == "" && st.Compute == "" && toolN == nil && computeN == nil:
			d.errAt(n, f, "add tool: NAME (with args:) or compute: |", "step %s has neither tool nor compute", label)
		}
		if argsN != nil && st.Tool == "" && st.Compute != "" {
			d.warnAt(argsN, f+".args", "compute reads names directly; remove args", "args are for tool steps; step %s computes", label)
		}
		if st.Tool != "" {
			b.stepTools = append(b.stepTools, toolRef{name: st.Tool, field: f + ".tool", at: d.pos(toolN)})
		}
		// Loops.
		switch {
		case loopN != nil && st.LoopVar == "":
			d.errAt(loopN, f+".loop_var", "add loop_var: item, the name each element is bound to", "step %s loops but has no loop_var", label)
		case loopN == nil && info.loopVarN != nil:
			d.errAt(info.loopVarN, f+".loop_var", "add loop: \"{{ items }}\" or remove loop_var", "step %s has loop_var but no loop", label)
		case st.LoopVar != "" && !isIdent(st.LoopVar):
			d.errAt(info.loopVarN, f+".loop_var", identHint(st.LoopVar), "loop_var %q is not an identifier", st.LoopVar)
		case st.LoopVar != "" && slices.Contains(reservedNames, st.LoopVar):
			d.errAt(info.loopVarN, f+".loop_var", "pick another name", "loop_var %s hides the engine's %s", st.LoopVar, st.LoopVar)
		}
		// Output.
		if info.outputN != nil {
			switch {
			case !isIdent(st.Output):
				d.errAt(info.outputN, f+".output", identHint(st.Output), "output name %q is not an identifier", st.Output)
			case slices.Contains(reservedNames, st.Output):
				d.errAt(info.outputN, f+".output", "pick another name", "output name %s is reserved for the engine's %s", st.Output, st.Output)
			}
		}
		// Error policy.
		if onErrN != nil && st.OnError != "" {
			if prob, hint := onErrorProblem(st.OnError); prob != "" {
				d.errAt(onErrN, f+".on_error", hint, "on_error %q %s", st.OnError, prob)
			}
		}
		// Templates and expressions, checked once every step is known.
		idx := len(wb.w.Steps)
		if condN != nil && st.Condition != "" {
			wb.newSite(siteExpr, st.Condition, f+".condition", condN, idx, st.LoopVar)
		}
		if computeN != nil && st.Compute != "" {
			wb.newSite(siteProgram, st.Compute, f+".compute", computeN, idx, st.LoopVar)
		}
		if loopN != nil && st.Loop != "" {
			if !strings.Contains(st.Loop, "{{") {
				d.errAt(loopN, f+".loop", fmt.Sprintf("write loop: \"{{ %s }}\"", strings.TrimSpace(st.Loop)),
					"loop is the text %q, not a template giving a list", st.Loop)
			} else {
				wb.newSite(siteTemplate, st.Loop, f+".loop", loopN, idx, "")
			}
		}
		if argsN != nil {
			wb.templates(d, argsN, f+".args", idx, st.LoopVar)
		}
		wb.steps = append(wb.steps, info)
		wb.w.Steps = append(wb.w.Steps, st)
	}
	if len(nodes) == 0 {
		d.errAt(p.k, "steps", "add steps, or remove steps: for a skill without a workflow", "steps is empty")
	}
}

var stepKeys = []string{"id", "description", "tool", "args", "compute", "condition", "loop", "loop_var",
	"output", "on_error", "timeout", "parallel_group", "depends_on", "cache"}

func onErrorProblem(s string) (problem, hint string) {
	switch {
	case s == "fail" || s == "continue":
		return "", ""
	case strings.HasPrefix(s, "retry:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "retry:"))
		if err != nil || n < 1 || n > maxStepRetries {
			return fmt.Sprintf("retries must be a number from 1 to %d", maxStepRetries), "write retry:3"
		}
		return "", ""
	case s == "retry":
		return "does not say how often", "write retry:3"
	}
	valid := []string{"fail", "continue", "retry:3"}
	if c := closest(s, valid); c != "" {
		return "is not a policy; did you mean " + c + "?", "use fail, continue or retry:N"
	}
	return "is not a policy", "use fail, continue or retry:N"
}
