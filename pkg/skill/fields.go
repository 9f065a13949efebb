package skill

import (
	"fmt"
	"slices"
	"strings"
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

// subagentFieldList is a subagent's metadata: a skill's, less what only
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
	"cost":             "cost_hint",     // the shorter name some skill files use
	"execution_policy": "execution",     // the name some skill routers use
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
			var phrases []string
			b.s.Triggers = b.unique(d, "triggers", items, func(i int, it item) bool {
				f := fmt.Sprintf("triggers[%d]", i)
				if prob := subjectTokenProblem(patternTokens(it.s)); prob != "" {
					// Not a CloudEvent type: a phrase matched in the request text, as
					// skill systems that route on words write triggers.
					if !strings.ContainsAny(it.s, " \t") && strings.Contains(it.s, ".") {
						d.warnAt(it.n, f, "write a CloudEvent type such as com.github.push, or a phrase with spaces",
							"trigger %q is not a CloudEvent type (it %s); it is matched only as a phrase in the request text", it.s, prob)
					}
					if !slices.Contains(phrases, it.s) {
						phrases = append(phrases, it.s)
					}
					return false
				}
				if strings.HasPrefix(it.s, "skill.") {
					d.errAt(it.n, f, "name the event, not the skill; a skill is invoked explicitly on skillbus.trigger.skill.<name>",
						"trigger %q is reserved: CloudEvent types starting with \"skill.\" are explicit invocations", it.s)
					return false
				}
				return true
			})
			b.s.TriggerPhrases = phrases
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
		{name: "priority", decode: decodePriority},
		{name: "cost_hint", decode: enumField("cost_hint", costHints, func(s *Skill) *string { return &s.CostHint })},
		{name: "repair", decode: enumField("repair", repairModes, func(s *Skill) *string { return &s.Repair })},
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
			if b.s.MaxConcurrent != 0 && b.s.MaxConcurrent != n {
				d.errAt(p.v, "max_concurrent", "a concurrency entry without key is max_concurrent: write one of them",
					"max_concurrent %d contradicts the concurrency limit %d without a key", n, b.s.MaxConcurrent)
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
	fs = append(fs, scheduleFields()...)
	fs = append(fs, flowFields()...)
	fs = append(fs, queuePriorityFields()...)
	fs = append(fs, concurrencyFields()...)
	fs = append(fs, throttleFields()...)
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
	priorities  = []string{"high", "medium", "low"}
	costHints   = []string{"low", "medium", "high"}
	repairModes = []string{RepairApprove, RepairAuto, RepairOff}
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

func nameHint(name string) string {
	if s := suggestName(name); s != "" && s != name {
		return "write " + s
	}
	return "use lowercase letters, digits, '-' and '_'"
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
