package skill

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

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
	// runKeys are the keys evaluated on a run's trigger (rate_limit) or on the
	// run (concurrency, throttle), with what they read: a batch's or a burst's
	// run is not its triggers (checkBatchKeys, checkDebounceReads), and a run's
	// inputs are what the workflow declares (checkRunKeyInputs).
	runKeys []keyUse
	// filter is the filter and what it reads (checkDebounceReads).
	filter *keyUse
	// prio is queue_priority and what it reads (checkBatchKeys).
	prio *keyUse
}

// keyUse is a key expression of field, at n in d, and what it reads.
type keyUse struct {
	d     *decoder
	n     *yaml.Node
	field string
	reads []flow.Read
}

// withoutField says what a skill does without a top-level field, for the fields
// whose absence changes it: without a control it runs more, or more often, than
// its author meant; without triggers, on no event. A misspelling of one says so.
var withoutField = func() map[string]string {
	m := map[string]string{
		"triggers":      "the skill has no triggers",
		"outputs":       "the run returns every step's result by name",
		"confirmations": "the workflow has no confirmations",
	}
	for _, c := range []string{"filter", "rate_limit", "debounce", "batch", "cancel_on",
		"concurrency", "throttle", "anti_triggers", "permissions", "timeout", "max_retries"} {
		m[c] = "the skill has no " + c
	}
	return m
}()

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
			if closest(p.key, fs.names) != "" {
				hint = misspeltHint(p.key, fs.names, ps, withoutField)
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

// semver is Semantic Versioning 2.0.0.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// finish checks what needs more than one field, derives the kind and fills in the
// defaults.
func (b *builder) finish(r report) {
	b.checkIdentity(r)
	if b.wf != nil {
		b.wf.finish(b)
	}
	b.deriveKind(r)
	b.checkTools()
	b.checkSchedule()
	b.checkBatchInputs()
	b.checkBatchKeys()
	b.checkRunKeyInputs()
	b.checkDebounceReads()
	b.checkSupported()
	b.checkQueuePriority()
	b.applyDefaults()
}

// posOr is where a field was set, or the file's start.
func (b *builder) posOr(r report, key string) at {
	if p, ok := b.pos[key]; ok {
		return p
	}
	return at{file: r.file, line: 1, col: 1}
}

// reported says whether a field's value was wrong and has been reported.
func (b *builder) reported(key string) bool {
	set, ok := b.set[key]
	return ok && !isNull(set.d.resolve(set.val))
}

// checkIdentity checks name, description, version and timeout.
func (b *builder) checkIdentity(r report) {
	s := b.s
	switch {
	case s.Name == "" && b.reported("name"):
	case s.Name == "":
		p := b.posOr(r, "name")
		*b.ds = append(*b.ds, p.diag(SeverityError, "name", "add name: my-skill (lowercase letters, digits, '-' and '_')", "name is required"))
	default:
		if prob := nameProblem(s.Name); prob != "" {
			*b.ds = append(*b.ds, b.posOr(r, "name").diag(SeverityError, "name", nameHint(s.Name), "name %q %s", s.Name, prob))
		}
	}
	switch n := utf8.RuneCountInString(s.Description); {
	case s.Description == "" && b.reported("description"):
	case strings.TrimSpace(s.Description) == "":
		*b.ds = append(*b.ds, b.posOr(r, "description").diag(SeverityError, "description",
			"add description: saying what the skill does and when to use it", "description is required"))
	case n > maxDescription:
		*b.ds = append(*b.ds, b.posOr(r, "description").diag(SeverityWarning, "description",
			"keep it to what the skill does and when to use it", "description is %d characters; Agent Skills allows %d", n, maxDescription))
	}
	if s.Version != "" && !semver.MatchString(s.Version) {
		hint := "write MAJOR.MINOR.PATCH, e.g. 1.0.0"
		if parts := strings.Split(s.Version, "."); len(parts) == 2 && semver.MatchString(s.Version+".0") {
			hint = fmt.Sprintf("write %s.0", s.Version)
		} else if v := strings.TrimPrefix(s.Version, "v"); v != s.Version && semver.MatchString(v) {
			hint = "write " + v
		}
		*b.ds = append(*b.ds, b.posOr(r, "version").diag(SeverityWarning, "version", hint,
			"version %q is not a semantic version", s.Version))
	}
	if s.Timeout != 0 && (time.Duration(s.Timeout) < minTimeout || time.Duration(s.Timeout) > maxTimeout) {
		*b.ds = append(*b.ds, b.posOr(r, "timeout").diag(SeverityWarning, "timeout", "use a timeout from 1s to 5m",
			"timeout %s is outside 1s–5m", s.Timeout))
	}
}

// deriveKind sets the kind from what the skill has to run.
func (b *builder) deriveKind(r report) {
	s := b.s
	switch {
	case s.Workflow != nil:
		s.Kind = KindWorkflow
		if len(s.Entrypoints) > 0 {
			*b.ds = append(*b.ds, b.posOr(r, "entrypoints").diag(SeverityWarning, "entrypoints", "remove them, or the steps",
				"entrypoints are never run: a skill with steps runs its workflow"))
		}
	case len(s.Entrypoints) > 0:
		s.Kind = KindScript
	default:
		s.Kind = KindInstruction
		if s.Body == "" && !strings.HasSuffix(s.Source, ".md") {
			*b.ds = append(*b.ds, at{file: r.file, line: 1, col: 1}.diag(SeverityError, "", "add steps:, entrypoints:, or a SKILL.md with instructions",
				"the skill has nothing to run: no steps, no entrypoints and no instructions"))
		}
	}
	if k := Kind(s.Type); k == KindWorkflow || k == KindScript || k == KindInstruction {
		if k != s.Kind {
			*b.ds = append(*b.ds, b.posOr(r, "type").diag(SeverityWarning, "type", kindHint(s.Kind),
				"type %s names an executor, but this skill runs as %s", s.Type, s.Kind))
		}
	}
}

func (b *builder) applyDefaults() {
	s := b.s
	if s.Priority == "" {
		s.Priority = DefaultPriority
	}
	if s.CostHint == "" {
		s.CostHint = DefaultCostHint
	}
	if s.MaxRetries == nil {
		n := DefaultMaxRetries
		s.MaxRetries = &n
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(DefaultTimeout)
	}
	if s.Execution.Sandbox == "" {
		s.Execution.Sandbox = DefaultSandbox
	}
	if s.Execution.Approval == "" {
		s.Execution.Approval = DefaultApproval
	}
}

func kindHint(k Kind) string {
	switch k {
	case KindWorkflow:
		return "the kind follows from the files: steps make a workflow"
	case KindScript:
		return "the kind follows from the files: entrypoints without steps make a script skill"
	}
	return "the kind follows from the files: add steps in skill.yaml for a workflow, or entrypoints for a script skill"
}
