package workflow

import (
	"fmt"
	"regexp"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
)

// compiled is a workflow with every expression parsed once.
type compiled struct {
	steps   []cstep
	outputs []coutput
	inputs  []cinput
}

type cstep struct {
	step      *skill.Step
	condition *expr.Expr
	args      *expr.Value
	compute   *expr.Program
	loop      *expr.Template
	onError   string // fail | continue | retry
	retries   int
}

type coutput struct {
	name  string
	value *expr.Value
}

type cinput struct {
	in      *skill.Input
	pattern *regexp.Regexp
}

func compile(wf *skill.Workflow) (*compiled, error) {
	c := &compiled{}
	for i := range wf.Inputs {
		in := &wf.Inputs[i]
		ci := cinput{in: in}
		if in.Pattern != "" {
			re, err := regexp.Compile(in.Pattern)
			if err != nil {
				return nil, failure.Repair("input %s: pattern: %v", in.Name, err)
			}
			ci.pattern = re
		}
		c.inputs = append(c.inputs, ci)
	}
	for i := range wf.Steps {
		st := &wf.Steps[i]
		cs := cstep{step: st, onError: "fail"}
		var err error
		where := func(what string, err error) error {
			return failure.Wrap(failure.ClassOf(err), fmt.Errorf("step %s: %s: %w", st.ID, what, err))
		}
		if st.Condition != "" {
			if cs.condition, err = expr.ParseExpr(st.Condition, expr.WithName("condition")); err != nil {
				return nil, where("condition", err)
			}
		}
		if st.Args != nil {
			if cs.args, err = expr.CompileValue(st.Args, expr.WithName("args")); err != nil {
				return nil, where("args", err)
			}
		}
		if st.Compute != "" {
			if cs.compute, err = expr.ParseProgram(st.Compute, expr.WithName("compute")); err != nil {
				return nil, where("compute", err)
			}
		}
		if st.Loop != "" {
			if cs.loop, err = expr.ParseTemplate(st.Loop, expr.WithName("loop")); err != nil {
				return nil, where("loop", err)
			}
		}
		switch policy, n := st.ErrorPolicy(); policy {
		case "fail", "continue":
			cs.onError = policy
		case "retry":
			if n < 1 {
				return nil, failure.Repair("step %s: on_error %q: want retry:N with N ≥ 1", st.ID, st.OnError)
			}
			cs.onError, cs.retries = "retry", n
		default:
			return nil, failure.Repair("step %s: on_error %q: want fail, continue or retry:N", st.ID, st.OnError)
		}
		c.steps = append(c.steps, cs)
	}
	for _, o := range wf.Outputs {
		v, err := expr.CompileValue(o.Value, expr.WithName("outputs."+o.Name))
		if err != nil {
			return nil, failure.Wrap(failure.ClassOf(err), fmt.Errorf("output %s: %w", o.Name, err))
		}
		c.outputs = append(c.outputs, coutput{name: o.Name, value: v})
	}
	return c, nil
}
