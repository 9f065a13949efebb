package skill

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

// reservedNames are provided by the engine to templates and expressions; steps,
// outputs, inputs and loop variables cannot take them.
var reservedNames = []string{"inputs", "trigger", "execution"}

// workflowBuilder collects a skill.yaml's workflow and what later checks need.
type workflowBuilder struct {
	d          *decoder
	w          *Workflow
	stepsKey   *yaml.Node
	steps      []stepInfo
	inputNodes map[string]*yaml.Node
	sites      []site // template and expression sources to check
	outputsAt  *yaml.Node
	confirms   []confirmInfo
}

type stepInfo struct {
	n         *yaml.Node
	field     string
	dependsOn []item
	group     *yaml.Node
	outputN   *yaml.Node
	timeoutN  *yaml.Node
	// argTimeoutN is args.timeout, a tool call's own time limit.
	argTimeoutN *yaml.Node
	loopVarN    *yaml.Node
	match       *flow.WaitMatch // a wait_for_event's match, compiled
	matchN      *yaml.Node
}

type confirmInfo struct {
	n     *yaml.Node
	field string
	stepN *yaml.Node
}

func (b *builder) workflow(d *decoder) *workflowBuilder {
	if b.wf == nil {
		b.wf = &workflowBuilder{d: d, w: &Workflow{Source: d.file}, inputNodes: map[string]*yaml.Node{}}
		b.s.Workflow = b.wf.w
	}
	return b.wf
}

// finish checks what needs the whole workflow: references between steps,
// confirmations, parallel groups, then templates.
func (wb *workflowBuilder) finish(b *builder) {
	w := wb.w
	if len(w.Steps) == 0 {
		if wb.stepsKey == nil {
			wb.d.add(SeverityError, 1, 1, "steps", "add steps:, or remove inputs, outputs and confirmations", "the workflow has no steps")
		}
		return
	}
	index := map[string]int{}
	for i, st := range w.Steps {
		if st.ID != "" {
			if _, dup := index[st.ID]; !dup {
				index[st.ID] = i
			}
		}
	}
	ids := slices.Collect(func(yield func(string) bool) {
		for _, st := range w.Steps {
			if st.ID != "" && !yield(st.ID) {
				return
			}
		}
	})
	wb.checkDependsOn(index, ids)
	wb.checkGroups()
	wb.checkTimeouts(b)
	wb.checkOutputNames(index)
	wb.checkConfirmations(index, ids)
	wb.checkReferences(b, index)
}

// checkDependsOn checks depends_on: earlier steps only, so the order is the
// list order and no cycle can form.
func (wb *workflowBuilder) checkDependsOn(index map[string]int, ids []string) {
	d, w := wb.d, wb.w
	for i, st := range w.Steps {
		info := wb.steps[i]
		for j, dep := range info.dependsOn {
			f := fmt.Sprintf("%s.depends_on[%d]", info.field, j)
			k, ok := index[dep.s]
			switch {
			case !ok:
				d.errAt(dep.n, f, "depends_on names step ids", "step %s depends on unknown step %s%s", st.ID, dep.s, didYouMean(dep.s, ids))
			case k == i:
				d.errAt(dep.n, f, "remove it", "step %s depends on itself", st.ID)
			case k > i:
				d.errAt(dep.n, f, fmt.Sprintf("move %s before %s: steps run in the order they are listed", dep.s, st.ID),
					"step %s depends on %s, which comes later (line %d)", st.ID, dep.s, w.Steps[k].Line)
			case st.ParallelGroup != "" && w.Steps[k].ParallelGroup == st.ParallelGroup:
				d.errAt(dep.n, f, "put them in different parallel groups",
					"step %s depends on %s, but both are in parallel group %s and run at the same time", st.ID, dep.s, st.ParallelGroup)
			}
		}
	}
}

// checkGroups checks that the steps of a parallel group, which run together,
// are listed together.
func (wb *workflowBuilder) checkGroups() {
	w := wb.w
	seen := map[string]bool{}
	for i, st := range w.Steps {
		g := st.ParallelGroup
		if g == "" || i > 0 && w.Steps[i-1].ParallelGroup == g {
			continue
		}
		if seen[g] {
			wb.d.warnAt(wb.steps[i].group, wb.steps[i].field+".parallel_group", "list the steps of a group one after another",
				"parallel group %s is split: step %s is apart from the group's earlier steps", g, st.ID)
		}
		seen[g] = true
	}
}

// checkTimeouts checks that no step outlasts its skill.
func (wb *workflowBuilder) checkTimeouts(b *builder) {
	limit := b.s.Timeout
	if limit == 0 {
		limit = Duration(DefaultTimeout)
	}
	for i, st := range wb.w.Steps {
		if st.Timeout > limit {
			wb.d.warnAt(wb.steps[i].timeoutN, wb.steps[i].field+".timeout", "raise the skill's timeout, or lower the step's",
				"step %s may run %s, longer than the skill's timeout %s", st.ID, st.Timeout, limit)
		}
		// A call's own timeout (exec's and http's args.timeout) longer than
		// the step's or the skill's never fires: the shorter one stops it.
		n := wb.steps[i].argTimeoutN
		if n == nil || !timedTools[st.Tool] {
			continue
		}
		t, ok := literalTimeout(wb.d.resolve(n))
		if !ok {
			continue
		}
		switch {
		case st.Timeout > 0 && st.Timeout < limit && t > st.Timeout:
			wb.d.warnAt(n, wb.steps[i].field+".args.timeout", "raise the step's timeout, or lower args.timeout",
				"step %s's %s call may run %s (args.timeout), longer than the step's timeout %s, which stops it first", st.ID, st.Tool, t, st.Timeout)
		case t > limit && (st.Timeout == 0 || st.Timeout >= limit):
			hint := fmt.Sprintf("raise the skill's timeout (timeout: %s), or lower args.timeout", shortest(time.Duration(t)))
			if b.s.Timeout == 0 {
				hint = fmt.Sprintf("set the skill's timeout (timeout: %s; the default is %s), or lower args.timeout", shortest(time.Duration(t)), limit)
			}
			wb.d.warnAt(n, wb.steps[i].field+".args.timeout", hint,
				"step %s's %s call may run %s (args.timeout), longer than the skill's timeout %s, which stops it first", st.ID, st.Tool, t, limit)
		}
	}
}

// timedTools are the tools whose calls take a time limit of their own, as
// args.timeout.
var timedTools = map[string]bool{"exec": true, "http": true}

// literalTimeout reads a tool's args.timeout written as a literal: seconds (120,
// 1.5, "120") or a duration ("2m"). A template, or what the tool would refuse,
// is not one.
func literalTimeout(n *yaml.Node) (Duration, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return 0, false
	}
	v := strings.TrimSpace(n.Value)
	switch n.ShortTag() {
	case "!!int", "!!float", "!!str":
	default:
		return 0, false
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 || f > float64(math.MaxInt64/int64(time.Second)) {
			return 0, false
		}
		d = time.Duration(f * float64(time.Second))
	} else if n.ShortTag() != "!!str" {
		return 0, false
	} else if d, err = time.ParseDuration(v); err != nil || d <= 0 {
		return 0, false
	}
	return Duration(d), true
}

// shortest writes a duration as briefly as a skill may: 2m, 1h30m, 90s.
func shortest(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// checkOutputNames checks that an output name means one thing.
func (wb *workflowBuilder) checkOutputNames(index map[string]int) {
	d, w := wb.d, wb.w
	outputs := map[string]int{}
	for i, st := range w.Steps {
		if st.Output == "" || !isIdent(st.Output) {
			continue
		}
		if k, ok := index[st.Output]; ok && k != i {
			d.errAt(wb.steps[i].outputN, wb.steps[i].field+".output", "rename the output",
				"output name %s is also the id of step %s (line %d)", st.Output, st.Output, w.Steps[k].Line)
			continue
		}
		if k, dup := outputs[st.Output]; dup {
			d.warnAt(wb.steps[i].outputN, wb.steps[i].field+".output", "rename one of them if both results are needed",
				"output %s is also written by step %s (line %d); the later step's result wins", st.Output, w.Steps[k].ID, w.Steps[k].Line)
			continue
		}
		outputs[st.Output] = i
	}
}

// checkConfirmations checks that confirmations name existing steps, once each.
func (wb *workflowBuilder) checkConfirmations(index map[string]int, ids []string) {
	confirmed := map[string]bool{}
	for i, c := range wb.w.Confirmations {
		ci := wb.confirms[i]
		if _, ok := index[c.Step]; !ok {
			wb.d.errAt(ci.stepN, ci.field+".step", "step: names a step id", "confirmation names unknown step %s%s", c.Step, didYouMean(c.Step, ids))
			continue
		}
		if confirmed[c.Step] {
			wb.d.errAt(ci.stepN, ci.field+".step", "merge the two confirmations", "step %s is confirmed twice", c.Step)
		}
		confirmed[c.Step] = true
	}
}
