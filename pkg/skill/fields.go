package skill

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// field is one top-level key of a SKILL.md front matter or skill.yaml.
type field struct {
	name      string
	container bool // holds a mapping or a list of mappings
	decode    func(b *builder, d *decoder, p pair)
}

// fieldSet is the keys one kind of file accepts.
type fieldSet struct {
	byName  map[string]*field
	aliases map[string]string // alias → canonical name
	names   []string          // every accepted spelling, for suggestions
}

func (fs *fieldSet) lookup(key string) (*field, string) {
	if c, ok := fs.aliases[key]; ok {
		key = c
	}
	return fs.byName[key], key
}

func (fs *fieldSet) known(key string) bool {
	f, _ := fs.lookup(key)
	return f != nil
}

func (fs *fieldSet) container(key string) bool {
	f, _ := fs.lookup(key)
	return f != nil && f.container
}

func newFieldSet(fields []*field, aliases map[string]string) *fieldSet {
	fs := &fieldSet{byName: map[string]*field{}, aliases: aliases}
	for _, f := range fields {
		fs.byName[f.name] = f
		fs.names = append(fs.names, f.name)
	}
	for a := range aliases {
		fs.names = append(fs.names, a)
	}
	slices.Sort(fs.names)
	return fs
}

// metaFields are the fields of a skill's metadata, accepted in SKILL.md front matter
// and in skill.yaml; workflowFields are skill.yaml's alone. They are built once and
// never modified.
var (
	metaFields     = newFieldSet(metaFieldList(false), fieldAliases)
	workflowFields = newFieldSet(metaFieldList(true), fieldAliases)
	subagentFields = newFieldSet(subagentFieldList(), fieldAliases)
)

// subagentFieldList is seed 000's subagent metadata: a skill's, less what only
// makes sense for skills the router activates and workers execute.
func subagentFieldList() []*field {
	keep := []string{"name", "description", "license", "compatibility", "metadata", "allowed-tools", "type",
		"version", "author", "triggers", "tags", "required_tools", "disallowed_tools", "max_retries",
		"timeout_ms", "timeout", "priority", "capabilities", "max_concurrent"}
	var out []*field
	for _, f := range metaFieldList(false) {
		if slices.Contains(keep, f.name) {
			out = append(out, f)
		}
	}
	return out
}

var fieldAliases = map[string]string{
	"allowed_tools":    "allowed-tools", // Agent Skills spells it with a hyphen
	"cost":             "cost_hint",     // DESIGN §6 calls it cost
	"execution_policy": "execution",     // seed 001's name
}

func metaFieldList(withWorkflow bool) []*field {
	fs := []*field{
		{name: "name", decode: func(b *builder, d *decoder, p pair) {
			if s, ok := d.str(p.v, "name"); ok {
				b.s.Name = s
				b.pos["name"] = d.pos(p.v)
			}
		}},
		{name: "description", decode: func(b *builder, d *decoder, p pair) {
			b.s.Description, _ = d.str(p.v, "description")
		}},
		{name: "license", decode: strField(func(s *Skill) *string { return &s.License })},
		{name: "compatibility", decode: func(b *builder, d *decoder, p pair) {
			s, _ := d.str(p.v, "compatibility")
			if n := len([]rune(s)); n > maxCompatibility {
				d.warnAt(p.v, "compatibility", "shorten it", "compatibility is %d characters; Agent Skills allows %d", n, maxCompatibility)
			}
			b.s.Compatibility = s
		}},
		{name: "metadata", container: true, decode: func(b *builder, d *decoder, p pair) {
			v, ok := d.value(p.v, "metadata")
			if !ok || v == nil {
				return
			}
			m, isMap := v.(map[string]any)
			if !isMap {
				d.errAt(p.v, "metadata", "write key: value pairs", "metadata must be a mapping, not %s", describe(d.resolve(p.v)))
				return
			}
			b.s.Metadata = m
		}},
		{name: "allowed-tools", decode: func(b *builder, d *decoder, p pair) {
			b.s.AllowedTools = b.tools(d, p.v, p.key, true)
		}},
		{name: "type", decode: strField(func(s *Skill) *string { return &s.Type })},
		{name: "version", decode: func(b *builder, d *decoder, p pair) {
			if s, ok := d.str(p.v, "version"); ok {
				b.s.Version = s
				b.pos["version"] = d.pos(p.v)
			}
		}},
		{name: "author", decode: strField(func(s *Skill) *string { return &s.Author })},
		{name: "triggers", decode: func(b *builder, d *decoder, p pair) {
			items, _ := d.strList(p.v, "triggers")
			b.s.Triggers = b.unique(d, "triggers", items, func(i int, it item) bool {
				f := fmt.Sprintf("triggers[%d]", i)
				if prob := subjectTokenProblem(patternTokens(it.s)); prob != "" {
					hint := "triggers are CloudEvent types such as com.github.push; put trigger phrases under examples.positive"
					d.errAt(it.n, f, hint, "trigger %q %s", it.s, prob)
					return false
				}
				if strings.HasPrefix(it.s, "skill.") {
					d.errAt(it.n, f, "name the event, not the skill; a skill is invoked explicitly on skillbus.trigger.skill.<name>",
						"trigger %q is reserved: CloudEvent types starting with \"skill.\" are explicit invocations", it.s)
					return false
				}
				return true
			})
		}},
		{name: "anti_triggers", decode: strListField(func(s *Skill) *[]string { return &s.AntiTriggers })},
		{name: "tags", decode: strListField(func(s *Skill) *[]string { return &s.Tags })},
		{name: "dependencies", decode: func(b *builder, d *decoder, p pair) {
			items, _ := d.strList(p.v, "dependencies")
			b.s.Dependencies = b.unique(d, "dependencies", items, func(i int, it item) bool {
				f := fmt.Sprintf("dependencies[%d]", i)
				if prob := nameProblem(it.s); prob != "" {
					d.errAt(it.n, f, nameHint(it.s), "dependency %q is not a skill name: it %s", it.s, prob)
					return false
				}
				return true
			})
			for i, dep := range b.s.Dependencies {
				for _, it := range items {
					if it.s == dep {
						b.pos[fmt.Sprintf("dependencies[%d]", i)] = d.pos(it.n)
						break
					}
				}
			}
		}},
		{name: "required_tools", decode: func(b *builder, d *decoder, p pair) {
			b.s.RequiredTools = b.tools(d, p.v, p.key, false)
		}},
		{name: "disallowed_tools", decode: func(b *builder, d *decoder, p pair) {
			b.s.DisallowedTools = b.tools(d, p.v, p.key, false)
		}},
		{name: "cacheable", decode: func(b *builder, d *decoder, p pair) {
			b.s.Cacheable, _ = d.boolean(p.v, "cacheable")
		}},
		{name: "max_retries", decode: func(b *builder, d *decoder, p pair) {
			n, ok := d.integer(p.v, "max_retries")
			if !ok {
				return
			}
			if n < 0 {
				d.errAt(p.v, "max_retries", "write 0 for no retries", "max_retries must not be negative")
				return
			}
			b.s.MaxRetries = &n
		}},
		{name: "timeout_ms", decode: func(b *builder, d *decoder, p pair) {
			n, ok := d.integer(p.v, "timeout_ms")
			if !ok {
				return
			}
			if n <= 0 {
				d.errAt(p.v, "timeout_ms", "omit it for the 30 s default", "timeout_ms must be positive")
				return
			}
			b.setTimeout(d, p, Duration(int64(n)*1e6))
		}},
		{name: "timeout", decode: func(b *builder, d *decoder, p pair) {
			if v, ok := d.duration(p.v, "timeout"); ok {
				b.setTimeout(d, p, v)
			}
		}},
		{name: "priority", decode: enumField("priority", priorities, func(s *Skill) *string { return &s.Priority })},
		{name: "cost_hint", decode: enumField("cost_hint", costHints, func(s *Skill) *string { return &s.CostHint })},
		{name: "parallel_safe", decode: func(b *builder, d *decoder, p pair) {
			b.s.ParallelSafe, _ = d.boolean(p.v, "parallel_safe")
		}},
		{name: "always", decode: func(b *builder, d *decoder, p pair) {
			b.s.Always, _ = d.boolean(p.v, "always")
		}},
		{name: "prerequisites", container: true, decode: decodePrerequisites},
		{name: "permissions", container: true, decode: decodePermissions},
		{name: "execution", container: true, decode: decodeExecution},
		{name: "entrypoints", container: true, decode: decodeEntrypoints},
		{name: "capabilities", decode: strListField(func(s *Skill) *[]string { return &s.Capabilities })},
		{name: "max_concurrent", decode: func(b *builder, d *decoder, p pair) {
			n, ok := d.integer(p.v, "max_concurrent")
			if !ok {
				return
			}
			if n < 1 {
				d.errAt(p.v, "max_concurrent", "omit it for no limit", "max_concurrent must be at least 1")
				return
			}
			b.s.MaxConcurrent = n
		}},
		{name: "pool", decode: func(b *builder, d *decoder, p pair) {
			s, ok := d.str(p.v, "pool")
			if !ok {
				return
			}
			switch {
			case s == "" || strings.ContainsAny(s, ".") || subjectTokenProblem(s) != "":
				d.errAt(p.v, "pool", "use letters, digits, '-' and '_'", "pool %q is not a NATS subject token", s)
			case strings.HasPrefix(s, soloPoolPrefix):
				d.errAt(p.v, "pool", "set max_concurrent instead, or pick another name",
					"pool names starting with %q are reserved for skills with max_concurrent", soloPoolPrefix)
			default:
				b.s.Pool = s
			}
		}},
		{name: "examples", container: true, decode: decodeExamples},
	}
	wf := []*field{
		{name: "inputs", container: true, decode: decodeInputs},
		{name: "steps", container: true, decode: decodeSteps},
		{name: "outputs", container: true, decode: decodeOutputs},
		{name: "confirmations", container: true, decode: decodeConfirmations},
	}
	if !withWorkflow {
		for _, f := range wf {
			f.decode = nil // known, so that the message can say where it belongs
		}
	}
	return append(fs, wf...)
}

const (
	maxDescription   = 1024 // Agent Skills
	maxCompatibility = 500  // Agent Skills
	soloPoolPrefix   = "solo-"
)

var (
	priorities = []string{"high", "medium", "low"}
	costHints  = []string{"low", "medium", "high"}
)

func strField(get func(*Skill) *string) func(*builder, *decoder, pair) {
	return func(b *builder, d *decoder, p pair) {
		*get(b.s), _ = d.str(p.v, p.key)
	}
}

func strListField(get func(*Skill) *[]string) func(*builder, *decoder, pair) {
	return func(b *builder, d *decoder, p pair) {
		items, _ := d.strList(p.v, p.key)
		*get(b.s) = b.unique(d, p.key, items, nil)
	}
}

func enumField(name string, values []string, get func(*Skill) *string) func(*builder, *decoder, pair) {
	return func(b *builder, d *decoder, p pair) {
		s, ok := d.str(p.v, name)
		if !ok {
			return
		}
		if !slices.Contains(values, s) {
			d.errAt(p.v, name, "use one of "+strings.Join(values, ", "), "%s %q is not valid%s", p.key, s, didYouMean(s, values))
			return
		}
		*get(b.s) = s
	}
}

// builder assembles one skill from the fields of one or two files.
type builder struct {
	opts        *LoadOptions
	s           *Skill
	ds          *Diagnostics
	set         map[string]setAt // canonical field → where it was set
	pos         map[string]at    // positions later checks need
	wf          *workflowBuilder
	stepTools   []toolRef
	mainDecoder *decoder // of the main file, for messages about the whole skill
}

type setAt struct {
	d   *decoder
	key *yaml.Node
	val *yaml.Node
}

func newBuilder(opts *LoadOptions, ds *Diagnostics) *builder {
	return &builder{opts: opts, s: &Skill{}, ds: ds, set: map[string]setAt{}, pos: map[string]at{}}
}

// fields applies the top-level pairs of one file. A field set in two files must have
// the same value in both.
func (b *builder) fields(d *decoder, ps []pair, fs *fieldSet, what string) {
	for _, p := range ps {
		f, canon := fs.lookup(p.key)
		if f == nil && strings.HasPrefix(p.key, "x-") {
			continue // an extension field, e.g. a home for YAML anchors
		}
		if f == nil {
			hint := ""
			if c := closest(p.key, fs.names); c != "" {
				hint = "did you mean " + c + "?"
			}
			d.warnAt(p.k, p.key, hint, "unknown field %s in %s; it is ignored", p.key, what)
			continue
		}
		if f.decode == nil {
			d.errAt(p.k, p.key, "move it to a skill.yaml beside the SKILL.md",
				"%s belongs in skill.yaml, not in %s", p.key, what)
			continue
		}
		if prev, dup := b.set[canon]; dup {
			if prev.d == d {
				d.errAt(p.k, p.key, "keep one of them", "%s and %s are the same field; both are set", prev.key.Value, p.key)
				continue
			}
			pv, _ := prev.d.value(prev.val, canon)
			v, _ := d.value(p.v, canon)
			if !reflect.DeepEqual(pv, v) {
				d.errAt(p.k, p.key, "set it in one file only",
					"%s here differs from %s at %s", p.key, prev.key.Value, prev.d.pos(prev.key))
			}
			continue
		}
		b.set[canon] = setAt{d: d, key: p.k, val: p.v}
		b.pos[canon] = d.pos(p.k)
		f.decode(b, d, p)
	}
}

// unique drops duplicates (warning) and items keep rejects.
func (b *builder) unique(d *decoder, field string, items []item, keep func(int, item) bool) []string {
	if len(items) == 0 {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if keep != nil && !keep(i, it) {
			continue
		}
		if slices.Contains(out, it.s) {
			d.warnAt(it.n, fmt.Sprintf("%s[%d]", field, i), "remove the duplicate", "%s lists %q twice", field, it.s)
			continue
		}
		out = append(out, it.s)
	}
	return out
}

func (b *builder) setTimeout(d *decoder, p pair, v Duration) {
	if b.s.Timeout != 0 && b.s.Timeout != v {
		d.errAt(p.k, p.key, "set one of timeout, timeout_ms and execution.timeout",
			"%s (%s) contradicts the timeout set before (%s)", p.key, v, b.s.Timeout)
		return
	}
	b.s.Timeout = v
	b.pos["timeout"] = d.pos(p.v)
}

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

func nameHint(name string) string {
	if s := suggestName(name); s != "" && s != name {
		return "write " + s
	}
	return "use lowercase letters, digits, '-' and '_'"
}

func decodeExamples(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "examples", "write positive: [...] and negative: [...]")
	for _, e := range ps {
		f := "examples." + e.key
		switch e.key {
		case "positive":
			items, _ := d.strList(e.v, f)
			b.s.Examples.Positive = b.unique(d, f, items, nil)
		case "negative":
			items, _ := d.strList(e.v, f)
			b.s.Examples.Negative = b.unique(d, f, items, nil)
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"positive", "negative"}), "unknown field %s; it is ignored", f)
		}
	}
}

// hintFor is "did you mean X?" or a list of the valid keys.
func hintFor(key string, valid []string) string {
	if c := closest(key, valid); c != "" {
		return "did you mean " + c + "?"
	}
	return "valid keys: " + strings.Join(valid, ", ")
}

var prerequisiteKinds = []string{"env", "command", "tool", "file"}

func decodePrerequisites(b *builder, d *decoder, p pair) {
	nodes, _ := d.seq(p.v, "prerequisites", "write a list such as - env: GITHUB_TOKEN")
	for i, n := range nodes {
		f := fmt.Sprintf("prerequisites[%d]", i)
		ps, ok := d.pairs(n, f, "write env: NAME, command: NAME, tool: NAME or file: PATH")
		if !ok {
			continue
		}
		var pr Prerequisite
		for _, e := range ps {
			ef := f + "." + e.key
			switch {
			case e.key == "description":
				pr.Description, _ = d.str(e.v, ef)
			case slices.Contains(prerequisiteKinds, e.key):
				if pr.Kind != "" {
					d.errAt(e.k, ef, "write one prerequisite per list item", "%s names both %s and %s", f, pr.Kind, e.key)
					continue
				}
				s, ok := d.str(e.v, ef)
				if !ok || strings.TrimSpace(s) == "" {
					d.errAt(e.v, ef, "", "%s is empty", ef)
					continue
				}
				pr.Kind, pr.Name = PrerequisiteKind(e.key), s
			default:
				d.warnAt(e.k, ef, hintFor(e.key, append(slices.Clone(prerequisiteKinds), "description")), "unknown field %s; it is ignored", ef)
			}
		}
		if pr.Kind == "" {
			if len(ps) > 0 || isNull(d.resolve(n)) {
				d.errAt(n, f, "write env: NAME, command: NAME, tool: NAME or file: PATH", "%s says nothing to check", f)
			}
			continue
		}
		b.s.Prerequisites = append(b.s.Prerequisites, pr)
	}
}

func decodePermissions(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "permissions", "")
	perm := &b.s.Permissions
	for _, e := range ps {
		f := "permissions." + e.key
		switch e.key {
		case "filesystem":
			fps, _ := d.pairs(e.v, f, "write read: [paths] and write: [paths]")
			for _, fe := range fps {
				ff := f + "." + fe.key
				switch fe.key {
				case "read":
					items, _ := d.strList(fe.v, ff)
					perm.Filesystem.Read = b.unique(d, ff, items, nil)
				case "write":
					items, _ := d.strList(fe.v, ff)
					perm.Filesystem.Write = b.unique(d, ff, items, nil)
				default:
					d.warnAt(fe.k, ff, hintFor(fe.key, []string{"read", "write"}), "unknown field %s; it is ignored", ff)
				}
			}
		case "network":
			nps, _ := d.pairs(e.v, f, "write outbound: true")
			for _, ne := range nps {
				nf := f + "." + ne.key
				if ne.key != "outbound" {
					d.warnAt(ne.k, nf, hintFor(ne.key, []string{"outbound"}), "unknown field %s; it is ignored", nf)
					continue
				}
				perm.Network.Outbound, _ = d.boolean(ne.v, nf)
			}
		case "environment":
			eps, _ := d.pairs(e.v, f, "write allow: [VARIABLE, ...]")
			for _, ee := range eps {
				ef := f + "." + ee.key
				if ee.key != "allow" {
					d.warnAt(ee.k, ef, hintFor(ee.key, []string{"allow"}), "unknown field %s; it is ignored", ef)
					continue
				}
				items, _ := d.strList(ee.v, ef)
				perm.Environment.Allow = b.unique(d, ef, items, nil)
			}
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"filesystem", "network", "environment"}), "unknown field %s; it is ignored", f)
		}
	}
}

var (
	sandboxes = []string{SandboxNone, SandboxProcess, SandboxContainer}
	approvals = []string{ApprovalAuto, ApprovalAsk}
)

func decodeExecution(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "execution", "write sandbox:, approval: and timeout:")
	for _, e := range ps {
		f := "execution." + e.key
		switch e.key {
		case "sandbox", "approval":
			valid := sandboxes
			dst := &b.s.Execution.Sandbox
			if e.key == "approval" {
				valid, dst = approvals, &b.s.Execution.Approval
			}
			s, ok := d.str(e.v, f)
			if !ok {
				continue
			}
			if !slices.Contains(valid, s) {
				d.errAt(e.v, f, "use one of "+strings.Join(valid, ", "), "%s %q is not valid%s", f, s, didYouMean(s, valid))
				continue
			}
			*dst = s
		case "timeout":
			if v, ok := d.duration(e.v, f); ok {
				b.setTimeout(d, e, v)
			}
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"sandbox", "approval", "timeout"}), "unknown field %s; it is ignored", f)
		}
	}
}

func decodeEntrypoints(b *builder, d *decoder, p pair) {
	nodes, _ := d.seq(p.v, "entrypoints", "write a list such as - name: default, command: scripts/run.sh")
	for i, n := range nodes {
		f := fmt.Sprintf("entrypoints[%d]", i)
		ps, ok := d.pairs(n, f, "write name: and command:")
		if !ok {
			continue
		}
		var ep Entrypoint
		var cmdNode *yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "name":
				ep.Name, _ = d.str(e.v, ef)
			case "description":
				ep.Description, _ = d.str(e.v, ef)
			case "command":
				cmdNode = e.v
				r := d.resolve(e.v)
				if r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
					s, _ := d.str(e.v, ef)
					ep.Command = strings.Fields(s)
				} else {
					items, _ := d.strList(e.v, ef)
					for _, it := range items {
						ep.Command = append(ep.Command, it.s)
					}
				}
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"name", "command", "description"}), "unknown field %s; it is ignored", ef)
			}
		}
		if ep.Name == "" {
			if len(nodes) == 1 {
				ep.Name = DefaultEntrypoint
			} else {
				d.errAt(n, f+".name", "name each entrypoint; the one run by default is called default", "%s has no name", f)
				continue
			}
		}
		if len(ep.Command) == 0 {
			d.errAt(n, f+".command", "write command: scripts/run.sh, or a list such as [python3, scripts/run.py]", "entrypoint %s has no command", ep.Name)
			continue
		}
		if slices.ContainsFunc(b.s.Entrypoints, func(o Entrypoint) bool { return o.Name == ep.Name }) {
			d.errAt(n, f+".name", "give each entrypoint its own name", "entrypoint %s is defined twice", ep.Name)
			continue
		}
		if prob, hint := entrypointProblem(ep.Command); prob != "" {
			d.errAt(cmdNode, f+".command", hint, "entrypoint %s %s", ep.Name, prob)
			continue
		}
		b.pos["entrypoints."+ep.Name] = d.pos(cmdNode)
		b.s.Entrypoints = append(b.s.Entrypoints, ep)
	}
}

// patternTokens replaces the wildcards of a trigger pattern (a "*" token, a final ">"
// token) by a plain token, so the rest is checked like a CloudEvent type.
func patternTokens(t string) string {
	toks := strings.Split(t, ".")
	for i, tok := range toks {
		if tok == "*" || tok == ">" && i == len(toks)-1 {
			toks[i] = "x"
		}
	}
	return strings.Join(toks, ".")
}
