package skill

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ParseSkillMD parses a SKILL.md, or a single-file skill <name>.md: YAML front matter
// and a markdown body of instructions. The skill is nil when there are errors. It
// uses the zero LoadOptions; see LoadOptions.ParseSkillMD.
func ParseSkillMD(file string, data []byte) (*Skill, Diagnostics) {
	return LoadOptions{}.ParseSkillMD(file, data)
}

// ParseWorkflow parses a skill.yaml, or a single-file skill <name>.yaml: seed 004's
// workflow, plus any metadata field a SKILL.md front matter may hold. The skill is
// nil when there are errors. It uses the zero LoadOptions; see
// LoadOptions.ParseWorkflow.
func ParseWorkflow(file string, data []byte) (*Skill, Diagnostics) {
	return LoadOptions{}.ParseWorkflow(file, data)
}

// ParseSkillMD is the package's ParseSkillMD with these options.
func (o LoadOptions) ParseSkillMD(file string, data []byte) (*Skill, Diagnostics) {
	var ds Diagnostics
	f := fileData{path: file, rel: path.Base(filepath.ToSlash(file)), data: data}
	b := o.parse(&ds, &f, nil, "", metaFields)
	return finishParsed(b, &ds, []fileData{f}), ds
}

// ParseWorkflow is the package's ParseWorkflow with these options.
func (o LoadOptions) ParseWorkflow(file string, data []byte) (*Skill, Diagnostics) {
	var ds Diagnostics
	f := fileData{path: file, rel: path.Base(filepath.ToSlash(file)), data: data}
	b := o.parse(&ds, nil, &f, "", metaFields)
	return finishParsed(b, &ds, []fileData{f}), ds
}

func finishParsed(b *builder, ds *Diagnostics, files []fileData) *Skill {
	ds.Sort()
	if b == nil || ds.HasErrors() {
		return nil
	}
	b.s.Digest = digest(files)
	return b.s
}

// fileData is one file of a skill: its path for messages, its path relative to the
// skill directory, and its contents.
type fileData struct {
	path string
	rel  string
	data []byte
	sum  string // sha256 of data, hex, once computed
}

// parse builds a skill from a SKILL.md, a skill.yaml, or both. dir is the skill
// directory, "" for a single file; mdFields the fields the markdown may hold. The
// result is nil when the files could not be read as YAML at all.
func (o *LoadOptions) parse(ds *Diagnostics, md, wf *fileData, dir string, mdFields *fieldSet) *builder {
	o = o.withDefaults()
	b := newBuilder(o, ds)
	var doc markdown
	main := md
	if main == nil {
		main = wf
	}
	mainR := report{file: main.path, ds: ds}
	ok := true
	if md != nil {
		b.s.Source = md.path
		doc, ok = o.readMarkdown(b, md, wf != nil, mdFields)
	}
	if wf != nil {
		if md == nil {
			b.s.Source = wf.path
		}
		ok = o.readWorkflow(b, wf) && ok
	}
	if !ok {
		return nil
	}
	b.finish(mainR)
	if md != nil {
		checkBody(report{file: md.path, ds: ds}, doc, b.s.Kind == KindInstruction)
	}
	b.s.Dir = dir
	return b
}

// readMarkdown reads a SKILL.md into b. Front matter is required unless a skill.yaml
// carries the metadata, in which case the whole file is the body.
func (o *LoadOptions) readMarkdown(b *builder, f *fileData, haveYAML bool, fields *fieldSet) (markdown, bool) {
	r := report{file: f.path, ds: b.ds}
	if !o.sizeOK(r, f) || !textOK(r, f) {
		return markdown{}, false
	}
	data := normalizeText(f.data)
	doc := splitFrontMatter(data)
	switch {
	case !doc.hasFM && haveYAML:
		b.s.Body, b.s.BodyLine = doc.body, 1
		return doc, true
	case !doc.hasFM:
		hint := "start the file with a front matter block: a line ---, name: and description: fields, and a closing ---"
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("---")) || bytes.Contains(data, []byte("\n---\n")) {
			hint = "front matter starts on the first line, which must be exactly ---"
		}
		r.add(SeverityError, 1, 1, "", hint, "%s has no front matter", path.Base(filepath.ToSlash(f.path)))
		return doc, false
	case !doc.closed:
		r.add(SeverityError, 1, 1, "", "end the front matter with a line ---", "front matter is not closed")
		return doc, false
	}
	root, ok := parseYAML(r, doc.fm, fields, "front matter")
	if !ok {
		return doc, false
	}
	d := newDecoder(f.path, b.ds)
	if root != nil {
		if !isMapping(d, root, "front matter") {
			return doc, false
		}
		ps, ok := d.pairs(root, "", "")
		if !ok {
			return doc, false
		}
		b.fields(d, ps, fields, "front matter")
	}
	b.mainDecoder = d
	b.s.Body, b.s.BodyLine = doc.body, doc.bodyLine
	return doc, true
}

// readWorkflow reads a skill.yaml into b.
func (o *LoadOptions) readWorkflow(b *builder, f *fileData) bool {
	r := report{file: f.path, ds: b.ds}
	if !o.sizeOK(r, f) || !textOK(r, f) {
		return false
	}
	data := normalizeText(f.data)
	root, ok := parseYAML(r, data, workflowFields, path.Base(filepath.ToSlash(f.path)))
	if !ok {
		return false
	}
	d := newDecoder(f.path, b.ds)
	d.src = string(data)
	if b.mainDecoder == nil {
		b.mainDecoder = d
	}
	if root == nil {
		return true
	}
	if !isMapping(d, root, path.Base(filepath.ToSlash(f.path))) {
		return false
	}
	ps, ok := d.pairs(root, "", "")
	if !ok {
		return false
	}
	b.fields(d, ps, workflowFields, path.Base(filepath.ToSlash(f.path)))
	return true
}

// isMapping reports whether a document's root is a mapping of fields.
func isMapping(d *decoder, root *yaml.Node, what string) bool {
	if r := d.resolve(root); r != nil && r.Kind == yaml.MappingNode {
		return true
	}
	d.errAt(root, "", "write one field per line: name: my-skill, description: ...", "%s must be a mapping of fields, not %s", what, describe(d.resolve(root)))
	return false
}

func (o *LoadOptions) sizeOK(r report, f *fileData) bool {
	if o.MaxFileSize > 0 && int64(len(f.data)) > o.MaxFileSize {
		r.add(SeverityError, 0, 0, "", "split it: move detail into references/",
			"%s is %s; the limit for a text file is %s", path.Base(filepath.ToSlash(f.path)), size(int64(len(f.data))), size(o.MaxFileSize))
		return false
	}
	return true
}

// textOK rejects files that are not UTF-8 text.
func textOK(r report, f *fileData) bool {
	if isBinary(f.data) {
		r.add(SeverityError, 0, 0, "", "save it as UTF-8 text", "%s is not UTF-8 text", path.Base(filepath.ToSlash(f.path)))
		return false
	}
	return true
}

// isBinary reports whether data holds a NUL byte or is not valid UTF-8.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data)
}

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// semver is Semantic Versioning 2.0.0.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

const (
	minTimeout = time.Second     // seed 000
	maxTimeout = 5 * time.Minute // seed 000
)

// finish checks what needs more than one field, derives the kind and fills in the
// defaults.
func (b *builder) finish(r report) {
	s := b.s
	d := b.mainDecoder
	if d == nil {
		d = newDecoder(r.file, b.ds)
	}
	posOr := func(key string) at {
		if p, ok := b.pos[key]; ok {
			return p
		}
		return at{file: r.file, line: 1, col: 1}
	}
	// reported says whether a field's value was wrong and has been reported.
	reported := func(key string) bool {
		set, ok := b.set[key]
		return ok && !isNull(set.d.resolve(set.val))
	}
	// Identity.
	switch {
	case s.Name == "" && reported("name"):
	case s.Name == "":
		p := posOr("name")
		*b.ds = append(*b.ds, p.diag(SeverityError, "name", "add name: my-skill (lowercase letters, digits, '-' and '_')", "name is required"))
	default:
		if prob := nameProblem(s.Name); prob != "" {
			*b.ds = append(*b.ds, posOr("name").diag(SeverityError, "name", nameHint(s.Name), "name %q %s", s.Name, prob))
		}
	}
	switch n := utf8.RuneCountInString(s.Description); {
	case s.Description == "" && reported("description"):
	case strings.TrimSpace(s.Description) == "":
		*b.ds = append(*b.ds, posOr("description").diag(SeverityError, "description",
			"add description: saying what the skill does and when to use it", "description is required"))
	case n > maxDescription:
		*b.ds = append(*b.ds, posOr("description").diag(SeverityWarning, "description",
			"keep it to what the skill does and when to use it", "description is %d characters; Agent Skills allows %d", n, maxDescription))
	}
	if s.Version != "" && !semver.MatchString(s.Version) {
		hint := "write MAJOR.MINOR.PATCH, e.g. 1.0.0"
		if parts := strings.Split(s.Version, "."); len(parts) == 2 && semver.MatchString(s.Version+".0") {
			hint = fmt.Sprintf("write %s.0", s.Version)
		} else if v := strings.TrimPrefix(s.Version, "v"); v != s.Version && semver.MatchString(v) {
			hint = "write " + v
		}
		*b.ds = append(*b.ds, posOr("version").diag(SeverityWarning, "version", hint,
			"version %q is not a semantic version", s.Version))
	}
	if s.Timeout != 0 && (time.Duration(s.Timeout) < minTimeout || time.Duration(s.Timeout) > maxTimeout) {
		*b.ds = append(*b.ds, posOr("timeout").diag(SeverityWarning, "timeout", "use a timeout from 1s to 5m",
			"timeout %s is outside 1s–5m", s.Timeout))
	}
	// Workflow.
	if b.wf != nil {
		b.wf.finish(b)
	}
	// Kind.
	switch {
	case s.Workflow != nil:
		s.Kind = KindWorkflow
		if len(s.Entrypoints) > 0 {
			*b.ds = append(*b.ds, posOr("entrypoints").diag(SeverityWarning, "entrypoints", "remove them, or the steps",
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
			*b.ds = append(*b.ds, posOr("type").diag(SeverityWarning, "type", kindHint(s.Kind),
				"type %s names an executor, but this skill runs as %s", s.Type, s.Kind))
		}
	}
	b.checkTools()
	b.checkSupported()
	// Defaults.
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

// checkTools checks tool names against the known tools and against each other.
func (b *builder) checkTools() {
	s := b.s
	var known []string
	if b.opts.KnownTools != nil {
		known = b.opts.KnownTools
	}
	refs := func(field string, list []string) []toolRef {
		out := make([]toolRef, len(list))
		for i, t := range list {
			f := fmt.Sprintf("%s[%d]", field, i)
			out[i] = toolRef{name: t, field: f, at: b.pos[f]}
		}
		return out
	}
	required := refs("required_tools", s.RequiredTools)
	allowed := refs("allowed-tools", s.AllowedTools)
	disallowed := refs("disallowed_tools", s.DisallowedTools)
	if b.opts.KnownTools != nil {
		check := func(refs []toolRef, sev Severity) {
			for _, t := range refs {
				name := toolName(t.name)
				if slices.Contains(known, name) {
					continue
				}
				hint := ""
				if c := closest(name, known); c != "" {
					hint = "did you mean " + c + "?"
				} else if len(known) <= 20 {
					hint = "known tools: " + strings.Join(known, ", ")
				}
				*b.ds = append(*b.ds, t.at.diag(sev, t.field, hint, "unknown tool %s", name))
			}
		}
		check(required, SeverityError)
		check(allowed, SeverityError)
		check(b.stepTools, SeverityError)
		check(disallowed, SeverityWarning)
	}
	banned := map[string]bool{}
	for _, t := range disallowed {
		banned[toolName(t.name)] = true
	}
	for _, group := range [][]toolRef{required, allowed, b.stepTools} {
		for _, t := range group {
			if banned[toolName(t.name)] {
				*b.ds = append(*b.ds, t.at.diag(SeverityError, t.field, "remove it from one of the lists",
					"tool %s is also in disallowed_tools", toolName(t.name)))
			}
		}
	}
}

// entrypointProblem checks an entrypoint's command: it runs a file inside the skill
// directory, either directly (scripts/run.sh) or through an interpreter named without
// a path (python3 scripts/run.py).
func entrypointProblem(cmd []string) (problem, hint string) {
	script := entrypointScript(cmd)
	const hint0 = "run a file of the skill: scripts/run.sh, or [python3, scripts/run.py]"
	switch {
	case script == "":
		return "runs no file of the skill", hint0
	case path.IsAbs(script) || filepath.IsAbs(script) || strings.HasPrefix(script, "~"):
		return fmt.Sprintf("runs %s, outside the skill directory", script), hint0
	case !filepath.IsLocal(filepath.FromSlash(script)):
		return fmt.Sprintf("runs %s, outside the skill directory", script), hint0
	}
	return "", ""
}

// entrypointScript is the file an entrypoint command runs: the program itself when it
// is a path, else the first argument that is not a flag.
func entrypointScript(cmd []string) string {
	if len(cmd) == 0 {
		return ""
	}
	if strings.ContainsAny(cmd[0], `/\`) || path.Ext(cmd[0]) != "" {
		return cmd[0]
	}
	for _, a := range cmd[1:] {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
