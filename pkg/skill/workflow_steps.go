package skill

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

const maxStepRetries = 10

func identHint(s string) string {
	if id := suggestIdent(s); id != "" && id != s {
		return "write " + id
	}
	return "use letters, digits and '_', not starting with a digit"
}

// stepField decodes one field of a step into the step being built.
type stepField struct {
	key    string
	decode func(sb *stepBuild, d *decoder, e pair, field string)
}

// stepBuild is a step while its fields are decoded: the step, what later checks
// need, and the nodes of the fields the checks after decoding look at.
type stepBuild struct {
	st   Step
	info stepInfo

	idN, toolN, computeN, loopN, onErrN, argsN, condN *yaml.Node
	sleepN, untilN, waitN                             *yaml.Node
}

// stepFields are the fields of a step, in the order hints list them. Each row
// is the one place its field is read.
var stepFields = []stepField{
	{"id", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.idN = e.v
		sb.st.ID, _ = d.str(e.v, f)
	}},
	{"description", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.st.Description, _ = d.str(e.v, f)
	}},
	{"tool", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.toolN = e.v
		sb.st.Tool, _ = d.strictStr(e.v, f, "write the tool's name")
	}},
	{"args", decodeStepArgs},
	{"compute", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.computeN = e.v
		sb.st.Compute, _ = d.strictStr(e.v, f, "write the code as a block: compute: |")
	}},
	{"condition", decodeStepCondition},
	{"loop", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.loopN = e.v
		sb.st.Loop, _ = d.strictStr(e.v, f, "write the collection as a template: loop: \"{{ items }}\"")
	}},
	{"loop_var", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.info.loopVarN = e.v
		sb.st.LoopVar, _ = d.str(e.v, f)
	}},
	{"output", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.info.outputN = e.v
		sb.st.Output, _ = d.str(e.v, f)
	}},
	{"on_error", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.onErrN = e.v
		sb.st.OnError, _ = d.str(e.v, f)
	}},
	{"timeout", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.info.timeoutN = e.v
		var ok bool
		if sb.st.Timeout, ok = d.duration(e.v, f); ok && sb.st.Timeout == 0 {
			d.errAt(e.v, f, "omit it to use the skill's timeout", "step timeout must be positive")
		}
	}},
	{"parallel_group", decodeStepParallelGroup},
	{"depends_on", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.info.dependsOn, _ = d.strList(e.v, f)
		for _, it := range sb.info.dependsOn {
			sb.st.DependsOn = append(sb.st.DependsOn, it.s)
		}
	}},
	{"cache", decodeStepCache},
	{"sleep", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.sleepN = e.v
		var ok bool
		if sb.st.Sleep, ok = d.duration(e.v, f); ok && sb.st.Sleep == 0 {
			d.errAt(e.v, f, "write how long, e.g. sleep: 10m", "sleep must be positive")
		} else if ok && time.Duration(sb.st.Sleep) > MaxParkedDefault {
			// The wake-up is a scheduled message in the events stream: a run sleeps at
			// most its retention, and one asked for longer fails.
			d.warnAt(e.v, f, retentionHint(time.Duration(sb.st.Sleep)),
				"sleep %s is longer than a run may sleep where events are kept %s, the default (their retention less a minute): such a run fails when it reaches this step", time.Duration(sb.st.Sleep), fmtDays(DefaultEventsRetention))
		}
	}},
	{"sleep_until", func(sb *stepBuild, d *decoder, e pair, f string) {
		sb.untilN = e.v
		sb.st.SleepUntil, _ = d.strictStr(e.v, f, "write an RFC 3339 time or a template giving one: sleep_until: \"{{ inputs.due }}\"")
	}},
	{"wait_for_event", decodeStepWait},
}

var (
	stepKeys       []string
	stepFieldByKey = map[string]stepField{}
)

func init() {
	for _, sf := range stepFields {
		stepKeys = append(stepKeys, sf.key)
		stepFieldByKey[sf.key] = sf
	}
}

func decodeStepArgs(sb *stepBuild, d *decoder, e pair, f string) {
	sb.argsN = e.v
	v, ok := d.value(e.v, f)
	if !ok || v == nil {
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		d.errAt(e.v, f, "write the tool's arguments as name: value pairs", "args must be a mapping, not %s", describe(d.resolve(e.v)))
		return
	}
	sb.st.Args = m
	if r := d.resolve(e.v); r != nil && r.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(r.Content); i += 2 {
			if r.Content[i].Value == "timeout" {
				sb.info.argTimeoutN = r.Content[i+1]
			}
		}
	}
}

func decodeStepCondition(sb *stepBuild, d *decoder, e pair, f string) {
	sb.condN = e.v
	if r := d.resolve(e.v); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
		b, _ := strconv.ParseBool(r.Value)
		sb.st.Condition = map[bool]string{true: "True", false: "False"}[b]
		return
	}
	sb.st.Condition, _ = d.str(e.v, f)
}

func decodeStepParallelGroup(sb *stepBuild, d *decoder, e pair, f string) {
	sb.info.group = e.v
	r := d.resolve(e.v)
	if r == nil || r.Kind != yaml.ScalarNode || isNull(r) {
		d.errAt(e.v, f, "write a number or a name", "parallel_group must be a number or a name, not %s", describe(r))
		return
	}
	sb.st.ParallelGroup = r.Value
}

func decodeStepCache(sb *stepBuild, d *decoder, e pair, f string) {
	if r := d.resolve(e.v); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
		d.errAt(e.v, f, "write the TTL in seconds, e.g. cache: 300", "cache takes how long to keep the result, not %s", describe(r))
		return
	}
	var ok bool
	if sb.st.Cache, ok = d.duration(e.v, f); ok && sb.st.Cache == 0 {
		d.errAt(e.v, f, "omit cache to not cache", "cache TTL must be positive")
	}
}

// confirmationInStep reports whether a step's unknown field is a confirmation
// written in the step instead of at the workflow's top level.
func confirmationInStep(key string) bool {
	switch strings.ToLower(key) {
	case "confirmations", "confirmation", "confirm", "requires_confirmation", "require_confirmation":
		return true
	}
	return false
}

// withoutStepField says what a step does without a field, for a misspelling's hint.
var withoutStepField = map[string]string{
	"condition": "the step always runs",
	"on_error":  "a failure of the step fails the run",
}

// decodeSteps decodes steps: each field through stepFields, then the checks of
// one step on its own; the checks across steps wait for workflowBuilder.finish.
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
		sb := &stepBuild{st: Step{Line: n.Line}, info: stepInfo{n: n, field: f}}
		if r := d.resolve(n); r != nil {
			sb.st.Line = r.Line
		}
		for _, e := range ps {
			ef := f + "." + e.key
			sf, known := stepFieldByKey[e.key]
			if !known && confirmationInStep(e.key) {
				// An approval written where it is not read would let the step run
				// without one: an error, not an ignored field.
				d.errAt(e.k, ef, "move it to the workflow's top level: confirmations: [{step: <this step's id>, message: ...}]",
					"%s is not a step field: confirmations are declared at the top level of the workflow, naming their step; as written, this step would run without anyone confirming it", ef)
				continue
			}
			if !known {
				d.warnAt(e.k, ef, misspeltHint(e.key, stepKeys, ps, withoutStepField), "unknown field %s; it is ignored", ef)
				continue
			}
			sf.decode(sb, d, e, ef)
		}
		sb.checkID(d, ids)
		sb.checkKind(b, d)
		sb.checkLoop(d)
		sb.checkOutput(d)
		sb.checkOnError(d)
		sb.addSites(wb, d)
		wb.steps = append(wb.steps, sb.info)
		wb.w.Steps = append(wb.w.Steps, sb.st)
	}
	if len(nodes) == 0 {
		d.errAt(p.k, "steps", "add steps, or remove steps: for a skill without a workflow", "steps is empty")
	}
}

// label names the step in messages: its id, or its place.
func (sb *stepBuild) label() string {
	if sb.st.ID == "" {
		return sb.info.field
	}
	return sb.st.ID
}

// checkID checks the step's identity; ids holds the ids of earlier steps.
func (sb *stepBuild) checkID(d *decoder, ids map[string]*yaml.Node) {
	st, f := &sb.st, sb.info.field
	switch {
	case st.ID == "":
		d.errAt(sb.info.n, f+".id", "give every step an id: - id: fetch_issue", "%s has no id", f)
	case !isIdent(st.ID):
		d.errAt(sb.idN, f+".id", identHint(st.ID), "step id %q is not an identifier (letters, digits, '_'; not starting with a digit)", st.ID)
	case slices.Contains(reservedNames, st.ID):
		d.errAt(sb.idN, f+".id", "rename the step", "step id %s is reserved: templates use it for the engine's %s", st.ID, st.ID)
	default:
		if prev, dup := ids[st.ID]; dup {
			d.errAt(sb.idN, f+".id", "give each step its own id", "step id %s is used twice (first at line %d)", st.ID, prev.Line)
		} else {
			ids[st.ID] = sb.idN
		}
	}
}

// checkKind checks what the step does: a tool, a computation or a sleep.
func (sb *stepBuild) checkKind(b *builder, d *decoder) {
	st, f := &sb.st, sb.info.field
	var kinds []string
	for _, k := range []struct {
		name string
		n    *yaml.Node
	}{{"tool", sb.toolN}, {"compute", sb.computeN}, {"sleep", sb.sleepN}, {"sleep_until", sb.untilN}, {"wait_for_event", sb.waitN}} {
		if k.n != nil {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case st.Tool != "" && st.Compute != "":
		d.errAt(sb.computeN, f, "split it into two steps", "step %s has both tool and compute; a step does one of them", sb.label())
	case len(kinds) > 1:
		d.errAt(sb.info.n, f, "split it into steps", "step %s has %s; a step does one of them", sb.label(), strings.Join(kinds, " and "))
	case len(kinds) == 0:
		d.errAt(sb.info.n, f, "add tool: NAME (with args:), compute: |, or sleep:", "step %s has neither tool nor compute", sb.label())
	}
	if (sb.sleepN != nil || sb.untilN != nil) && (sb.loopN != nil || sb.argsN != nil || sb.info.timeoutN != nil || st.Cache > 0) {
		d.errAt(sb.info.n, f, "remove loop, args, timeout and cache from the sleep", "step %s sleeps; loop, args, timeout and cache do not apply to a sleep", sb.label())
	}
	if sb.waitN != nil && (sb.loopN != nil || sb.argsN != nil || sb.info.timeoutN != nil || st.Cache > 0) {
		d.errAt(sb.info.n, f, "remove loop, args, timeout and cache; the wait's own timeout goes under wait_for_event", "step %s waits for an event; loop, args, timeout and cache do not apply to a wait", sb.label())
	}
	if sb.argsN != nil && st.Tool == "" && st.Compute != "" {
		d.warnAt(sb.argsN, f+".args", "compute reads names directly; remove args", "args are for tool steps; step %s computes", sb.label())
	}
	if st.Tool != "" {
		b.stepTools = append(b.stepTools, toolRef{name: st.Tool, field: f + ".tool", at: d.pos(sb.toolN)})
	}
}

func (sb *stepBuild) checkLoop(d *decoder) {
	st, f, varN := &sb.st, sb.info.field, sb.info.loopVarN
	switch {
	case sb.loopN != nil && st.LoopVar == "":
		d.errAt(sb.loopN, f+".loop_var", "add loop_var: item, the name each element is bound to", "step %s loops but has no loop_var", sb.label())
	case sb.loopN == nil && varN != nil:
		d.errAt(varN, f+".loop_var", "add loop: \"{{ items }}\" or remove loop_var", "step %s has loop_var but no loop", sb.label())
	case st.LoopVar != "" && !isIdent(st.LoopVar):
		d.errAt(varN, f+".loop_var", identHint(st.LoopVar), "loop_var %q is not an identifier", st.LoopVar)
	case st.LoopVar != "" && slices.Contains(reservedNames, st.LoopVar):
		d.errAt(varN, f+".loop_var", "pick another name", "loop_var %s hides the engine's %s", st.LoopVar, st.LoopVar)
	}
}

func (sb *stepBuild) checkOutput(d *decoder) {
	st, f, n := &sb.st, sb.info.field, sb.info.outputN
	switch {
	case n == nil:
	case !isIdent(st.Output):
		d.errAt(n, f+".output", identHint(st.Output), "output name %q is not an identifier", st.Output)
	case slices.Contains(reservedNames, st.Output):
		d.errAt(n, f+".output", "pick another name", "output name %s is reserved for the engine's %s", st.Output, st.Output)
	}
}

func (sb *stepBuild) checkOnError(d *decoder) {
	if sb.onErrN == nil || sb.st.OnError == "" {
		return
	}
	if prob, hint := onErrorProblem(sb.st.OnError); prob != "" {
		d.errAt(sb.onErrN, sb.info.field+".on_error", hint, "on_error %q %s", sb.st.OnError, prob)
	}
}

// addSites records the step's templates and expressions, checked once every
// step is known.
func (sb *stepBuild) addSites(wb *workflowBuilder, d *decoder) {
	st, f := &sb.st, sb.info.field
	idx := len(wb.w.Steps)
	if sb.condN != nil && st.Condition != "" {
		wb.newSite(siteExpr, st.Condition, f+".condition", sb.condN, idx, st.LoopVar)
	}
	if sb.computeN != nil && st.Compute != "" {
		wb.newSite(siteProgram, st.Compute, f+".compute", sb.computeN, idx, st.LoopVar)
		st.ComputeLine = wb.sites[len(wb.sites)-1].at.line
	}
	if sb.untilN != nil && st.SleepUntil != "" {
		if strings.Contains(st.SleepUntil, "{{") {
			wb.newSite(siteTemplate, st.SleepUntil, f+".sleep_until", sb.untilN, idx, "")
		} else if _, err := time.Parse(time.RFC3339, st.SleepUntil); err != nil {
			d.errAt(sb.untilN, f+".sleep_until", "write an RFC 3339 time (2026-01-02T15:04:05Z) or a template giving one",
				"sleep_until %q is not an RFC 3339 time", st.SleepUntil)
		}
	}
	if sb.loopN != nil && st.Loop != "" {
		if !strings.Contains(st.Loop, "{{") {
			d.errAt(sb.loopN, f+".loop", fmt.Sprintf("write loop: \"{{ %s }}\"", strings.TrimSpace(st.Loop)),
				"loop is the text %q, not a template giving a list", st.Loop)
		} else {
			wb.newSite(siteTemplate, st.Loop, f+".loop", sb.loopN, idx, "")
		}
	}
	if sb.argsN != nil {
		wb.templates(d, sb.argsN, f+".args", idx, st.LoopVar)
		sb.checkBuiltinArgs(d, f)
	}
}

// BuiltinToolArgs are the arguments each built-in tool takes, and nothing else:
// the tools refuse any other (tool.Args.Only), and validation refuses a step that
// sends one, since every run of it would fail.
var BuiltinToolArgs = map[string][]string{
	"http": {"url", "method", "headers", "query", "json", "body", "timeout"},
	"exec": {"command", "env", "stdin", "timeout", "dir"},
	"llm":  {"prompt", "messages", "system", "model", "temperature", "max_tokens", "response_format"},
}

// checkBuiltinArgs refuses an argument a built-in tool does not take, written as a
// key of the step's args. Only http and exec are checked: every worker has them,
// while a tool named llm may be a bus or MCP tool on a worker without a chat model.
// A merge key (<<: *base) is not an argument; the keys it merges are not checked.
func (sb *stepBuild) checkBuiltinArgs(d *decoder, f string) {
	if sb.st.Tool != "http" && sb.st.Tool != "exec" {
		return
	}
	known := BuiltinToolArgs[sb.st.Tool]
	n := d.resolve(sb.argsN)
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" || slices.Contains(known, k.Value) {
			continue
		}
		hint := "it takes " + strings.Join(known, ", ")
		if c := closest(k.Value, known); c != "" {
			hint = "did you mean " + c + "? " + hint
		}
		d.errAt(k, f+".args."+k.Value, hint, "the %s tool takes no argument %q: every run of step %s would fail", sb.st.Tool, k.Value, sb.label())
	}
}

// retryCountRE is an on_error that means retry:N but is written otherwise.
var retryCountRE = regexp.MustCompile(`^(?i:retry|retries|retries?_?times)\s*[ =:_-]?\s*(\d+)$`)

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
	// "retry 2", "retry=2", "retries:2": the author's count, written otherwise.
	if m := retryCountRE.FindStringSubmatch(s); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 && n <= maxStepRetries {
			return "is not a policy; did you mean retry:" + m[1] + "?", "write retry:N, with a colon and no spaces"
		}
		return fmt.Sprintf("is not a policy, and retries must be a number from 1 to %d", maxStepRetries), "write retry:3"
	}
	valid := []string{"fail", "continue", "retry:3"}
	if c := closest(s, valid); c != "" {
		return "is not a policy; did you mean " + c + "?", "use fail, continue or retry:N"
	}
	return "is not a policy", "use fail, continue or retry:N"
}
