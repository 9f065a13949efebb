package skill

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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

// reservedNames are provided by the engine to templates and expressions; steps,
// outputs, inputs and loop variables cannot take them.
var reservedNames = []string{"inputs", "trigger", "execution"}

const maxStepRetries = 10

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
	loopVarN  *yaml.Node
}

type confirmInfo struct {
	n     *yaml.Node
	field string
	stepN *yaml.Node
}

// siteKind is how a source string is read.
type siteKind int

const (
	siteTemplate siteKind = iota // text with {{ }} templates
	siteExpr                     // a condition: one expression
	siteProgram                  // a compute block: statements assigning result
)

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

func (b *builder) workflow(d *decoder) *workflowBuilder {
	if b.wf == nil {
		b.wf = &workflowBuilder{d: d, w: &Workflow{Source: d.file}, inputNodes: map[string]*yaml.Node{}}
		b.s.Workflow = b.wf.w
	}
	return b.wf
}

func decodeInputs(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	nodes, _ := d.seq(p.v, "inputs", "write a list such as - name: issue_key")
	for i, n := range nodes {
		f := fmt.Sprintf("inputs[%d]", i)
		ps, ok := d.pairs(n, f, "write name:, type:, required: ...")
		if !ok {
			continue
		}
		in := Input{}
		var nameN, typeN, defN, enumN, patN, maxN *yaml.Node
		var enumNodes []*yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "name":
				nameN = e.v
				in.Name, _ = d.str(e.v, ef)
			case "type":
				typeN = e.v
				in.Type, _ = d.str(e.v, ef)
			case "required":
				in.Required, _ = d.boolean(e.v, ef)
			case "default":
				if !isNull(d.resolve(e.v)) {
					defN = e.v
				}
			case "enum":
				enumN = e.v
				enumNodes, _ = d.seq(e.v, ef, "write a list of allowed values: [a, b]")
			case "pattern":
				patN = e.v
				in.Pattern, _ = d.strictStr(e.v, ef, "quote the pattern")
			case "max_length":
				maxN = e.v
				in.MaxLength, _ = d.integer(e.v, ef)
			case "description":
				in.Description, _ = d.str(e.v, ef)
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"name", "type", "required", "default", "enum", "pattern", "max_length", "description"}),
					"unknown field %s; it is ignored", ef)
			}
		}
		switch {
		case in.Name == "":
			d.errAt(n, f+".name", "add name: issue_key, the name templates read as inputs.issue_key", "%s has no name", f)
			continue
		case in.Name == AnyInput:
			// accepts undeclared fields; see AnyInput
		case !isIdent(in.Name):
			d.errAt(nameN, f+".name", identHint(in.Name), "input name %q is not an identifier (letters, digits, '_'; not starting with a digit)", in.Name)
			continue
		}
		if prev, dup := wb.inputNodes[in.Name]; dup {
			d.errAt(nameN, f+".name", "rename one of them", "input %s is defined twice (first at line %d)", in.Name, prev.Line)
			continue
		}
		wb.inputNodes[in.Name] = n
		typ := in.Type
		if typ == "" {
			typ = "string"
		} else if !slices.Contains(inputTypes, typ) {
			hint := "use one of " + strings.Join(inputTypes, ", ")
			if a, ok := inputTypeAliases[strings.ToLower(typ)]; ok {
				hint = "write " + a
			} else if c := closest(typ, inputTypes); c != "" {
				hint = "did you mean " + c + "?"
			}
			d.errAt(typeN, f+".type", hint, "input %s has unknown type %q", in.Name, typ)
			typ = ""
		}
		var re *regexp.Regexp
		if patN != nil && in.Pattern != "" {
			var err error
			re, err = regexp.Compile(in.Pattern)
			if err != nil {
				d.errAt(patN, f+".pattern", regexpHint(err), "input %s: pattern does not compile: %v", in.Name, err)
				re = nil
			}
			if typ != "" && typ != "string" {
				d.warnAt(patN, f+".pattern", "remove it, or make the input a string", "pattern applies to string inputs; %s is %s", in.Name, typ)
			}
		}
		if maxN != nil {
			switch {
			case in.MaxLength < 0:
				d.errAt(maxN, f+".max_length", "omit it for no limit", "max_length must not be negative")
				in.MaxLength = 0
			case typ != "" && typ != "string" && typ != "array":
				d.warnAt(maxN, f+".max_length", "remove it", "max_length applies to strings and arrays; %s is %s", in.Name, typ)
			}
		}
		check := func(v *yaml.Node, what, field string) (any, bool) {
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
				if re != nil && !re.MatchString(s) {
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
		if enumN != nil {
			if len(enumNodes) == 0 && !isNull(d.resolve(enumN)) && d.resolve(enumN).Kind == yaml.SequenceNode {
				d.errAt(enumN, f+".enum", "list the allowed values, or remove enum", "enum of input %s is empty", in.Name)
			}
			for j, en := range enumNodes {
				v, ok := check(en, "enum value", fmt.Sprintf("%s.enum[%d]", f, j))
				if !ok {
					continue
				}
				if slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }) {
					d.warnAt(en, fmt.Sprintf("%s.enum[%d]", f, j), "remove the duplicate", "enum of input %s lists %v twice", in.Name, v)
					continue
				}
				in.Enum = append(in.Enum, v)
			}
		}
		if defN != nil {
			if v, ok := check(defN, "default", f+".default"); ok {
				switch {
				case len(in.Enum) > 0 && !slices.ContainsFunc(in.Enum, func(o any) bool { return reflect.DeepEqual(o, v) }):
					d.errAt(defN, f+".default", "use one of the enum values", "default %v of input %s is not one of its enum values%s",
						v, in.Name, didYouMean(fmt.Sprint(v), enumStrings(in.Enum)))
				default:
					in.Default = v
				}
				if in.Required {
					d.warnAt(defN, f+".default", "remove required: true or the default", "input %s is required, so its default is never used", in.Name)
				}
			}
		}
		wb.w.Inputs = append(wb.w.Inputs, in)
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

func decodeOutputs(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	wb.outputsAt = p.k
	ps, _ := d.pairs(p.v, "outputs", "write name: value pairs, such as branch: \"{{ branch_name }}\"")
	for _, e := range ps {
		f := "outputs." + e.key
		v, _ := d.value(e.v, f)
		wb.w.Outputs = append(wb.w.Outputs, Output{Name: e.key, Value: v})
		wb.templates(d, e.v, f, scopeAll, "")
	}
}

func decodeConfirmations(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	nodes, _ := d.seq(p.v, "confirmations", "write a list such as - step: create_branch, message: ...")
	for i, n := range nodes {
		f := fmt.Sprintf("confirmations[%d]", i)
		ps, ok := d.pairs(n, f, "write step: and message:")
		if !ok {
			continue
		}
		var c Confirmation
		ci := confirmInfo{n: n, field: f}
		var msgN *yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "step":
				ci.stepN = e.v
				c.Step, _ = d.str(e.v, ef)
			case "message":
				msgN = e.v
				c.Message, _ = d.str(e.v, ef)
			case "default":
				c.Default, _ = d.boolean(e.v, ef)
			case "timeout":
				c.Timeout, _ = d.duration(e.v, ef)
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"step", "message", "default", "timeout"}), "unknown field %s; it is ignored", ef)
			}
		}
		if c.Step == "" {
			d.errAt(n, f+".step", "name the step to confirm", "%s names no step", f)
			continue
		}
		if strings.TrimSpace(c.Message) == "" {
			d.errAt(n, f+".message", "say what is about to happen, e.g. \"Create branch {{ branch_name }}?\"", "confirmation of %s has no message", c.Step)
			continue
		}
		if msgN != nil && strings.Contains(c.Message, "{{") {
			wb.newSite(siteTemplate, c.Message, f+".message", msgN, scopeConfirm, "")
			wb.sites[len(wb.sites)-1].confirm = len(wb.confirms)
		}
		wb.confirms = append(wb.confirms, ci)
		wb.w.Confirmations = append(wb.w.Confirmations, c)
	}
}

// finish checks what needs the whole workflow: references between steps,
// confirmations, parallel groups, then templates.
func (wb *workflowBuilder) finish(b *builder) {
	d := wb.d
	w := wb.w
	if len(w.Steps) == 0 {
		if wb.stepsKey == nil {
			d.add(SeverityError, 1, 1, "steps", "add steps:, or remove inputs, outputs and confirmations", "the workflow has no steps")
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
	// depends_on: earlier steps only, so the order is the list order and no cycle
	// can form.
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
	// Parallel groups run their steps together, so their steps are listed together.
	seen := map[string]bool{}
	for i, st := range w.Steps {
		g := st.ParallelGroup
		if g == "" || i > 0 && w.Steps[i-1].ParallelGroup == g {
			continue
		}
		if seen[g] {
			d.warnAt(wb.steps[i].group, wb.steps[i].field+".parallel_group", "list the steps of a group one after another",
				"parallel group %s is split: step %s is apart from the group's earlier steps", g, st.ID)
		}
		seen[g] = true
	}
	// A step cannot outlast its skill.
	limit := b.s.Timeout
	if limit == 0 {
		limit = Duration(DefaultTimeout)
	}
	for i, st := range w.Steps {
		if st.Timeout > limit {
			d.warnAt(wb.steps[i].timeoutN, wb.steps[i].field+".timeout", "raise the skill's timeout, or lower the step's",
				"step %s may run %s, longer than the skill's timeout %s", st.ID, st.Timeout, limit)
		}
	}
	// Output names: a name means one thing.
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
	// Confirmations name existing steps, once each.
	confirmed := map[string]bool{}
	for i, c := range w.Confirmations {
		ci := wb.confirms[i]
		if _, ok := index[c.Step]; !ok {
			d.errAt(ci.stepN, ci.field+".step", "step: names a step id", "confirmation names unknown step %s%s", c.Step, didYouMean(c.Step, ids))
			continue
		}
		if confirmed[c.Step] {
			d.errAt(ci.stepN, ci.field+".step", "merge the two confirmations", "step %s is confirmed twice", c.Step)
		}
		confirmed[c.Step] = true
	}
	wb.checkReferences(b, index)
}
