package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Deterministic returns the deterministic repairers, one per fault kind.
func Deterministic() []Repairer {
	return []Repairer{ReferenceRepairer{}, FilterRepairer{}, PathRepairer{}, ParameterRepairer{}}
}

// ReferenceRepairer renames a key or attribute the value does not have to the
// nearest name it has.
type ReferenceRepairer struct{}

func (ReferenceRepairer) Name() string { return "reference" }

func (ReferenceRepairer) Propose(_ context.Context, d *Diagnosis, files Files) (string, string, error) {
	f := &d.Fault
	if f.Kind != failure.FaultReference || f.Name == "" {
		return "", "", ErrNoProposal
	}
	near := failure.Nearest(f.Name, f.Have)
	if near == "" {
		return "", "", ErrNoProposal
	}
	n := regexp.QuoteMeta(f.Name)
	// value.name, value["name"], value['name'] — where value is what was read when
	// known, any dotted access otherwise.
	pats := []*regexp.Regexp{}
	if f.Value != "" {
		v := regexp.QuoteMeta(f.Value)
		pats = append(pats, regexp.MustCompile(`(`+v+`\.)`+n+`\b`), regexp.MustCompile(`(`+v+`\[["'])`+n+`(["']\])`))
	}
	pats = append(pats, regexp.MustCompile(`(\.)`+n+`\b`), regexp.MustCompile(`(\[["'])`+n+`(["']\])`))
	return replaceFirstMatching(d, files, pats, near, fmt.Sprintf("%s has no key %q: read %q", valueName(f), f.Name, near))
}

// FilterRepairer renames an unknown filter to the nearest filter there is.
type FilterRepairer struct{}

func (FilterRepairer) Name() string { return "filter" }

func (FilterRepairer) Propose(_ context.Context, d *Diagnosis, files Files) (string, string, error) {
	f := &d.Fault
	if f.Kind != failure.FaultUnknownFilter || f.Name == "" {
		return "", "", ErrNoProposal
	}
	near := failure.Nearest(f.Name, f.Have)
	if near == "" {
		return "", "", ErrNoProposal
	}
	pat := regexp.MustCompile(`(\|\s*)` + regexp.QuoteMeta(f.Name) + `\b`)
	return replaceFirstMatching(d, files, []*regexp.Regexp{pat}, near, fmt.Sprintf("unknown filter %q: use %q", f.Name, near))
}

// PathRepairer replaces a relative path that is no file of the skill with the
// nearest path that is (the same name in another directory, or a misspelling).
type PathRepairer struct{}

func (PathRepairer) Name() string { return "path" }

func (PathRepairer) Propose(_ context.Context, d *Diagnosis, files Files) (string, string, error) {
	f := &d.Fault
	if f.Kind != failure.FaultPath || f.Name == "" || path.IsAbs(f.Name) {
		return "", "", ErrNoProposal
	}
	have := f.Have
	if len(have) == 0 {
		have = files.Paths()
	}
	want := strings.TrimPrefix(f.Name, "./")
	near := ""
	for _, h := range have { // the same file name elsewhere in the skill
		if path.Base(h) == path.Base(want) && h != want {
			near = h
			break
		}
	}
	if near == "" {
		near = failure.Nearest(want, have)
	}
	if near == "" {
		return "", "", ErrNoProposal
	}
	if strings.HasPrefix(f.Name, "./") {
		near = "./" + near
	}
	pat := regexp.MustCompile(`(^|[\s"'=:\[,(])` + regexp.QuoteMeta(f.Name) + `($|[\s"',\])])`)
	return replaceFirstMatching(d, files, []*regexp.Regexp{pat}, near, fmt.Sprintf("%s is no file of the skill: use %s", f.Name, near))
}

// ParameterRepairer fixes an argument a tool refused: a misspelt argument the tool
// named becomes its name; a missing one that the skill takes as an input with a
// default is passed that input.
type ParameterRepairer struct{}

func (ParameterRepairer) Name() string { return "parameter" }

func (ParameterRepairer) Propose(_ context.Context, d *Diagnosis, files Files) (string, string, error) {
	f := &d.Fault
	if f.Kind != failure.FaultParameter || f.Name == "" {
		return "", "", ErrNoProposal
	}
	// The argument sent under a misspelt name: rename the key in the step.
	var sent []string
	for _, h := range f.Have {
		if h != f.Name {
			sent = append(sent, h)
		}
	}
	if wrong := failure.Nearest(f.Name, sent); wrong != "" {
		pat := regexp.MustCompile(`(?m)(^\s*(?:-\s+)?["']?)` + regexp.QuoteMeta(wrong) + `(["']?\s*:)`)
		return replaceFirstMatching(d, files, []*regexp.Regexp{pat}, f.Name, fmt.Sprintf("the tool wants %q, the step sent %q", f.Name, wrong))
	}
	// A missing argument the skill declares as an input with a default.
	if def, ok := inputDefault(files, f.Name); ok {
		return addArgument(d, files, f.Name, def)
	}
	return "", "", ErrNoProposal
}

// replaceFirstMatching replaces, in the first definition file where one of pats
// matches (tried in order), every match of that pattern within the failing step's
// block (or the whole file when the step is not found), keeping the groups around
// the name. It returns the diff.
func replaceFirstMatching(d *Diagnosis, files Files, pats []*regexp.Regexp, repl, summary string) (string, string, error) {
	for _, pat := range pats {
		for _, p := range files.definitions() {
			text := files[p]
			from, to := stepBlock(text, d.Fault.Step)
			block := text[from:to]
			if !pat.MatchString(block) {
				continue
			}
			fixed := pat.ReplaceAllStringFunc(block, func(m string) string {
				sm := pat.FindStringSubmatch(m)
				out := sm[1] + repl
				if len(sm) > 2 {
					out += sm[2]
				}
				return out
			})
			after := files.Clone()
			after[p] = text[:from] + fixed + text[to:]
			return Diff(files, after), summary, nil
		}
	}
	return "", "", ErrNoProposal
}

var stepID = regexp.MustCompile(`(?m)^(\s*)-?\s*id:\s*["']?([A-Za-z0-9_.-]+)["']?\s*$`)

// stepBlock returns the byte range of the YAML list item of step id in text: from
// its line to the first later line indented no deeper than the item's dash. The
// whole text when not found.
func stepBlock(text, id string) (int, int) {
	if id == "" {
		return 0, len(text)
	}
	for _, l := range stepID.FindAllStringSubmatchIndex(text, -1) {
		if text[l[4]:l[5]] != id {
			continue
		}
		start := strings.LastIndexByte(text[:l[0]+1], '\n') + 1
		if l[0] < len(text) && text[l[0]] == '\n' {
			start = l[0] + 1
		}
		line := text[start:]
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl]
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if !strings.HasPrefix(strings.TrimLeft(line, " "), "-") {
			indent -= 2 // "id:" is not the item's first key: the dash is two to the left
		}
		pos := start + len(line) + 1
		for pos < len(text) {
			next := text[pos:]
			if nl := strings.IndexByte(next, '\n'); nl >= 0 {
				next = next[:nl]
			}
			if t := strings.TrimLeft(next, " "); t != "" && !strings.HasPrefix(t, "#") && len(next)-len(t) <= indent {
				return start, pos
			}
			pos += len(next) + 1
		}
		return start, len(text)
	}
	return 0, len(text)
}

var inputLine = regexp.MustCompile(`(?m)^(\s*)-\s*name:\s*["']?([A-Za-z0-9_-]+)["']?\s*$`)

// inputDefault finds the default of the input name in skill.yaml's inputs list.
func inputDefault(files Files, name string) (string, bool) {
	text, ok := files["skill.yaml"]
	if !ok {
		return "", false
	}
	for _, l := range inputLine.FindAllStringSubmatchIndex(text, -1) {
		if text[l[4]:l[5]] != name {
			continue
		}
		rest := text[l[1]:]
		indent := l[3] - l[2]
		for _, line := range strings.Split(rest, "\n")[1:] {
			trimmed := strings.TrimLeft(line, " ")
			if trimmed == "" {
				continue
			}
			if len(line)-len(trimmed) <= indent {
				break
			}
			if v, ok := strings.CutPrefix(trimmed, "default:"); ok {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

var jsonArgs = regexp.MustCompile(`(?m)^(\s*)(json|args):\s*$`)

// addArgument passes input name to the failing step: a line "name: {{ inputs.name }}"
// under the step's json mapping (or its args when it has no json).
func addArgument(d *Diagnosis, files Files, name, def string) (string, string, error) {
	text, ok := files["skill.yaml"]
	if !ok || d.Fault.Step == "" {
		return "", "", ErrNoProposal
	}
	from, to := stepBlock(text, d.Fault.Step)
	block := text[from:to]
	ms := jsonArgs.FindAllStringSubmatchIndex(block, -1)
	if len(ms) == 0 {
		return "", "", ErrNoProposal
	}
	m := ms[len(ms)-1] // json: nests inside args:
	eol := strings.IndexByte(block[m[1]:], '\n')
	if eol < 0 {
		return "", "", ErrNoProposal
	}
	at := m[1] + eol + 1
	indent := block[m[2]:m[3]] + "  "
	if nl := strings.IndexByte(block[at:], '\n'); nl > 0 { // follow the indentation of the next line
		line := block[at : at+nl]
		if t := strings.TrimLeft(line, " "); len(line)-len(t) > len(block[m[2]:m[3]]) {
			indent = line[:len(line)-len(t)]
		}
	}
	q, _ := json.Marshal("{{ inputs." + name + " }}")
	added := block[:at] + indent + name + ": " + string(q) + "\n" + block[at:]
	after := files.Clone()
	after["skill.yaml"] = text[:from] + added + text[to:]
	return Diff(files, after), fmt.Sprintf("the tool wants %q: pass the input of that name (default %s)", name, def), nil
}

func valueName(f *failure.Fault) string {
	if f.Value != "" {
		return f.Value
	}
	return "the value"
}
