package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// compiled is a workflow with every expression parsed once and its dependency graph
// worked out. It is immutable and shared by every run of the same skill version.
type compiled struct {
	steps   []cstep
	outputs []coutput
	// outSteps are the steps whose results the outputs read, ascending: the
	// outputs' Env holds the run's names and only these.
	outSteps []int
	inputs   []cinput
	index    map[string]int // step id → index
	// readsTrigger and readsExecution: some expression reads `trigger` or
	// `execution`, so a run builds them (a run of a workflow that reads neither, the
	// usual case, makes neither map). A compute block whose source so much as
	// mentions the name counts too: the hint a block gets for a name it reads before
	// assigning it is about the workflow's name of the same spelling.
	readsTrigger, readsExecution bool
	// ref is the runs' skill version (skillRef) when the engine's cache keys the
	// workflow by its skill's digest; "" when each run makes its own.
	ref string
	// perms are the permissions of the skill last run with this workflow.
	perms atomic.Pointer[skillPermissions]
}

// skillPermissions are a skill's permissions, bound once for its runs.
type skillPermissions struct {
	s *skill.Skill
	b tool.BoundPermissions
}

// permissions returns the permissions of s, a skill of this workflow, bound for
// its run's context: made once for the skill (a catalog hands out one *skill.Skill
// per version), not at every run.
func (c *compiled) permissions(s *skill.Skill) tool.BoundPermissions {
	if p := c.perms.Load(); p != nil && p.s == s {
		return p.b
	}
	p := &skillPermissions{s: s, b: tool.BindPermissions(tool.SkillPermissions(s))}
	c.perms.Store(p)
	return p.b
}

// reads notes the free names an expression reads.
func (c *compiled) reads(names []string) {
	for _, n := range names {
		switch n {
		case "trigger":
			c.readsTrigger = true
		case "execution":
			c.readsExecution = true
		}
	}
}

type cstep struct {
	step      *skill.Step
	kind      string          // tool | compute | sleep | wait
	until     *expr.Template  // sleep_until
	match     *flow.WaitMatch // wait_for_event's match; nil takes any event of the type
	condition *expr.Expr
	args      *expr.Value
	compute   *expr.Program
	loop      *expr.Template
	onError   string // fail | continue | retry
	retries   int
	confirm   *cconfirm

	// deps are the steps this one waits for (see doc.go, "Order"), ascending.
	deps []int
	// anc are deps and their ancestors, ascending: the steps whose results the step
	// sees. Whatever else has finished when it starts stays invisible, so what a step
	// sees never depends on timing.
	anc []int
	// condRefs are the earlier steps the condition reads (by id or output name);
	// refs those every part of the step reads. Both feed the auto-heal rule.
	condRefs []int
	refs     []int
	// keys are the name.get('key'), name['key'] and name.key reads of the
	// condition, in source order, for the auto-heal failure type.
	keys []keyRead
}

type cconfirm struct {
	message *expr.Template
	def     bool
	timeout skill.Duration
}

type keyRead struct{ name, key string }

type coutput struct {
	name  string
	value *expr.Value
}

type cinput struct {
	in      *skill.Input
	pattern *regexp.Regexp
}

func compile(wf *skill.Workflow) (*compiled, error) {
	c := &compiled{index: make(map[string]int, len(wf.Steps))}
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
	// writers lists, for every name a step binds (its id, its output), the steps
	// binding it so far, in list order.
	writers := map[string][]int{}
	for i := range wf.Steps {
		st := &wf.Steps[i]
		if st.ID == "" {
			return nil, failure.Repair("step %d has no id", i+1)
		}
		if _, dup := c.index[st.ID]; dup {
			return nil, failure.Repair("step id %s is used twice", st.ID)
		}
		c.index[st.ID] = i
		cs, refs, err := compileStep(st, writers)
		if err != nil {
			return nil, err
		}
		cs.refs = resolve(refs, writers, st.LoopVar)
		c.reads(refs)
		if cs.compute != nil {
			c.readsTrigger = c.readsTrigger || strings.Contains(st.Compute, "trigger")
			c.readsExecution = c.readsExecution || strings.Contains(st.Compute, "execution")
		}
		if err := cs.order(c, wf.Steps, i); err != nil {
			return nil, err
		}
		c.steps = append(c.steps, cs)
		writers[st.ID] = append(writers[st.ID], i)
		if st.Output != "" && st.Output != st.ID {
			writers[st.Output] = append(writers[st.Output], i)
		}
	}
	for _, cf := range wf.Confirmations {
		i, ok := c.index[cf.Step]
		if !ok {
			return nil, failure.Repair("confirmation names unknown step %s", cf.Step)
		}
		cs := &c.steps[i]
		if cs.confirm != nil {
			return nil, failure.Repair("step %s is confirmed twice", cf.Step)
		}
		t, err := expr.ParseTemplate(cf.Message, expr.WithName("confirmations."+cf.Step+".message"))
		if err != nil {
			return nil, failure.Wrap(failure.ClassOf(err), fmt.Errorf("confirmation of %s: %w", cf.Step, err))
		}
		cs.confirm = &cconfirm{message: t, def: cf.Default, timeout: cf.Timeout}
		c.reads(t.Refs())
		// The message may read earlier steps: they become dependencies too.
		extra := resolve(t.Refs(), writersBefore(writers, i), "")
		if len(extra) > 0 {
			cs.deps = union(cs.deps, extra)
			cs.refs = union(cs.refs, extra)
			cs.anc = ancestors(c.steps, cs.deps)
			// Later steps' ancestor sets include i's; recompute them.
			for j := i + 1; j < len(c.steps); j++ {
				c.steps[j].anc = ancestors(c.steps, c.steps[j].deps)
			}
		}
	}
	for _, o := range wf.Outputs {
		v, err := expr.CompileValue(o.Value, expr.WithName("outputs."+o.Name))
		if err != nil {
			return nil, failure.Wrap(failure.ClassOf(err), fmt.Errorf("output %s: %w", o.Name, err))
		}
		c.reads(v.Refs())
		c.outSteps = union(c.outSteps, resolve(v.Refs(), writers, ""))
		c.outputs = append(c.outputs, coutput{name: o.Name, value: v})
	}
	if len(c.outputs) > 0 {
		// A step named like a builtin shadows it, and an expression's references
		// leave builtins out: the outputs' Env holds such steps too.
		for name, ws := range writers {
			if expr.IsBuiltin(name) {
				c.outSteps = union(c.outSteps, ws)
			}
		}
	}
	return c, nil
}

// compileStep compiles a step's expressions and error policy, and returns the
// names they read.
func compileStep(st *skill.Step, writers map[string][]int) (cstep, []string, error) {
	cs := cstep{step: st, onError: "fail", kind: "tool"}
	switch {
	case st.Compute != "":
		cs.kind = "compute"
	case st.Sleep > 0 || st.SleepUntil != "":
		cs.kind = "sleep"
	case st.WaitForEvent != nil:
		cs.kind = "wait"
	}
	var err error
	where := func(what string, err error) error {
		return failure.Wrap(failure.ClassOf(err), fmt.Errorf("step %s: %s: %w", st.ID, what, err))
	}
	var refs []string
	if st.Condition != "" {
		if cs.condition, err = expr.ParseExpr(st.Condition, expr.WithName("condition")); err != nil {
			return cstep{}, nil, where("condition", err)
		}
		cs.condRefs = resolve(cs.condition.Refs(), writers, st.LoopVar)
		cs.keys = keyReads(cs.condition.Reads())
		refs = append(refs, cs.condition.Refs()...)
	}
	if st.Args != nil {
		if cs.args, err = expr.CompileValue(st.Args, expr.WithName("args")); err != nil {
			return cstep{}, nil, where("args", err)
		}
		refs = append(refs, cs.args.Refs()...)
	}
	if st.Compute != "" {
		if cs.compute, err = expr.ParseProgram(st.Compute, expr.WithName("compute")); err != nil {
			return cstep{}, nil, where("compute", err)
		}
		refs = append(refs, cs.compute.Refs()...)
	}
	if st.SleepUntil != "" {
		if cs.until, err = expr.ParseTemplate(st.SleepUntil, expr.WithName("sleep_until")); err != nil {
			return cstep{}, nil, where("sleep_until", err)
		}
		refs = append(refs, cs.until.Refs()...)
	}
	if w := st.WaitForEvent; w != nil && w.Match != "" {
		if cs.match, err = flow.CompileWaitMatch(w.Match); err != nil {
			return cstep{}, nil, failure.Repair("step %s: wait_for_event.match: %v", st.ID, err)
		}
		refs = append(refs, waitRefs(cs.match, writers)...)
	}
	if st.Loop != "" {
		if cs.loop, err = expr.ParseTemplate(st.Loop, expr.WithName("loop")); err != nil {
			return cstep{}, nil, where("loop", err)
		}
		refs = append(refs, cs.loop.Refs()...)
	}
	switch policy, n := st.ErrorPolicy(); policy {
	case "fail", "continue":
		cs.onError = policy
	case "retry":
		if n < 1 {
			return cstep{}, nil, failure.Repair("step %s: on_error %q: want retry:N with N ≥ 1", st.ID, st.OnError)
		}
		cs.onError, cs.retries = "retry", n
	default:
		return cstep{}, nil, failure.Repair("step %s: on_error %q: want fail, continue or retry:N", st.ID, st.OnError)
	}
	return cs, refs, nil
}

// order works out what step i waits for: its depends_on if it has one, else every
// earlier step (outside its own parallel group if it has one); and in every case
// the earlier steps it reads.
func (cs *cstep) order(c *compiled, steps []skill.Step, i int) error {
	st := &steps[i]
	var deps []int
	if len(st.DependsOn) > 0 {
		for _, d := range st.DependsOn {
			j, ok := c.index[d]
			switch {
			case !ok && slices.ContainsFunc(steps[i+1:], func(s skill.Step) bool { return s.ID == d }):
				return failure.Repair("step %s depends on %s, which comes later: steps run in the order they are listed", st.ID, d)
			case !ok:
				return failure.Repair("step %s depends on unknown step %s", st.ID, d)
			case j == i:
				return failure.Repair("step %s depends on itself", st.ID)
			case st.ParallelGroup != "" && steps[j].ParallelGroup == st.ParallelGroup:
				return failure.Repair("step %s depends on %s, but both are in parallel group %s", st.ID, d, st.ParallelGroup)
			}
			deps = append(deps, j)
		}
	} else {
		for j := range i {
			if st.ParallelGroup == "" || steps[j].ParallelGroup != st.ParallelGroup {
				deps = append(deps, j)
			}
		}
	}
	cs.deps = union(deps, cs.refs)
	cs.anc = ancestors(c.steps, cs.deps)
	return nil
}

// resolve maps the names an expression reads to the earlier steps binding them:
// the step with that id and every step with that output name.
func resolve(names []string, writers map[string][]int, loopVar string) []int {
	var out []int
	for _, n := range names {
		if n == loopVar {
			continue
		}
		out = append(out, writers[n]...)
	}
	return union(out, nil)
}

func writersBefore(writers map[string][]int, i int) map[string][]int {
	out := make(map[string][]int, len(writers))
	for n, ws := range writers {
		for _, w := range ws {
			if w < i {
				out[n] = append(out[n], w)
			}
		}
	}
	return out
}

// union returns the sorted set of a and b.
func union(a, b []int) []int {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func ancestors(steps []cstep, deps []int) []int {
	out := slices.Clone(deps)
	for _, d := range deps {
		out = append(out, steps[d].anc...)
	}
	return union(out, nil)
}

// keyReads are the constant keys a condition reads of names, in source order,
// as the expression parser found them (name.get('key'), name['key'],
// name.key). They name an auto-heal's failure type.
func keyReads(reads []expr.Read) []keyRead {
	var out []keyRead
	for _, r := range reads {
		if r.Key != "" {
			out = append(out, keyRead{name: r.Name, key: r.Key})
		}
	}
	return out
}
