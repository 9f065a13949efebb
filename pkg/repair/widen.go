package repair

import (
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Guarded returns what a patch that turns before into after changes of skill name
// besides what its workflow does — its inputs, its outputs and its steps'
// arguments, templates and code — sorted: which steps run (StepsShape), the
// fields of the skill's definition (permissions, environment allow list,
// allowed_tools, disallowed_tools, required_tools, prerequisites, execution policy,
// confirmations, repair mode, triggers, schedule, description, ...), and the files
// of its subagents. Such a patch may widen what the skill may do, or when it runs,
// or how it is repaired: an automatic repair never applies it by itself.
//
// Definitions that do not load (before or after) count as changed; the rest of the
// skill's files (scripts, references) do not: what they do is bounded by the
// fields above.
func Guarded(name string, before, after Files) []string {
	var changed []string
	defs := false
	for _, p := range after.Paths() {
		if before[p] == after[p] {
			continue
		}
		switch {
		case strings.HasPrefix(p, "subagents/"):
			changed = append(changed, "subagent "+p)
		case isDefinition(p, before):
			defs = true
		}
	}
	if defs {
		changed = append(changed, definitionFields(name, before, after)...)
	}
	slices.Sort(changed)
	return slices.Compact(changed)
}

// isDefinition says whether p is where a skill of files is defined: SKILL.md,
// skill.yaml, or the single file of a single-file skill.
func isDefinition(p string, files Files) bool {
	switch p {
	case "SKILL.md", "skill.yaml", "skill.yml":
		return true
	}
	return len(files) == 1 && !strings.Contains(p, "/")
}

// definitionFields returns the top-level fields of the skill's definition (JSON
// names) that differ between before and after, with workflow.<field> for the
// workflow's, leaving out the workflow's inputs, steps and outputs and what only
// says where things are (source, lines, digests).
func definitionFields(name string, before, after Files) []string {
	sa, errA := load(name, before)
	sb, errB := load(name, after)
	if errA != nil || errB != nil {
		return []string{"the skill's definition (it does not load)"}
	}
	// Arguments count as what decides which steps run wherever either version
	// has confirmations (see shapeOf).
	confirmed := sa.Workflow != nil && len(sa.Workflow.Confirmations) > 0 || sb.Workflow != nil && len(sb.Workflow.Confirmations) > 0
	a, errA := guardedView(sa, confirmed)
	b, errB := guardedView(sb, confirmed)
	if errA != nil || errB != nil {
		return []string{"the skill's definition (it does not load)"}
	}
	var out []string
	for k := range union(a, b) {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

// guardedView returns the skill's definition as JSON fields, without the parts a
// repair may change by itself (confirmed: see shapeOf).
func guardedView(s *skill.Skill, confirmed bool) (map[string]any, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"source", "dir", "digest", "body_line", "resources", "repaired_by", "workflow"} {
		delete(m, k)
	}
	if s.Workflow != nil {
		raw, _ := json.Marshal(s.Workflow)
		var w map[string]any
		_ = json.Unmarshal(raw, &w)
		for k, v := range w {
			switch k {
			case "source", "inputs", "outputs":
			case "steps":
				m[StepsShape] = shapeOf(v, confirmed)
			default:
				m["workflow."+k] = v
			}
		}
	}
	return m, nil
}

// StepsShape names, in a hold's reason, what of the steps an automatic patch may
// not change.
const StepsShape = "which steps run, in what order, with what tool, condition, loop, dependencies, waits or error policy"

// shapeOf is the steps without what an automatic patch may change in them: their
// arguments and templates, compute code, output name, description, timeout and
// cache. What is left decides which steps run and when: a patch that adds or
// drops a step, swaps its tool, or gives a confirmed step a condition that is
// never true (and adds an unconfirmed step doing its work) is a person's to apply.
// In a workflow with confirmations (confirmed) the arguments stay too: an
// unconfirmed step's arguments rewritten to do a confirmed step's work (an http GET
// made the confirmed POST) would get round the confirmation as surely.
func shapeOf(steps any, confirmed bool) any {
	list, _ := steps.([]any)
	out := make([]any, 0, len(list))
	for _, st := range list {
		m, ok := st.(map[string]any)
		if !ok {
			out = append(out, st)
			continue
		}
		kept := map[string]any{}
		for k, v := range m {
			switch k {
			case "args":
				if confirmed {
					kept[k] = v
				}
			case "compute", "compute_line", "output", "description", "line", "timeout", "cache", "loop_var":
			default:
				kept[k] = v
			}
		}
		out = append(out, kept)
	}
	return out
}

// load loads the skill of files from a temporary directory, as the registry would.
func load(name string, files Files) (*skill.Skill, error) {
	tmp, err := os.MkdirTemp("", "skillbus-repair-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dirMode := false
	for p := range files {
		if p == "SKILL.md" || p == "skill.yaml" || p == "skill.yml" || strings.Contains(p, "/") {
			dirMode = true
		}
	}
	base := tmp
	if dirMode {
		if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
			name = "skill"
		}
		base = filepath.Join(tmp, name)
	}
	var single string
	for p, text := range files {
		if !filepath.IsLocal(filepath.FromSlash(p)) || path.Clean(p) != p {
			return nil, os.ErrInvalid
		}
		dst := filepath.Join(base, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		single = dst
	}
	target := base
	if !dirMode {
		target = single
	}
	s, ds := skill.LoadPath(target)
	if s == nil {
		if err := ds.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("repair: the skill does not load")
	}
	return s, nil
}

func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
