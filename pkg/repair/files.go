package repair

import (
	"slices"
	"strings"
)

// Files are a skill's text files by slash-separated path relative to the skill
// directory (SKILL.md, skill.yaml, scripts/run.sh, ...).
type Files map[string]string

// Clone returns a copy of f that can be changed without changing f.
func (f Files) Clone() Files {
	out := make(Files, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// Paths returns the paths of f, sorted.
func (f Files) Paths() []string {
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// definitions returns the paths a workflow or instruction lives in, the files
// deterministic repairers edit: skill.yaml first, then SKILL.md, then the rest.
func (f Files) definitions() []string {
	var out []string
	for _, p := range []string{"skill.yaml", "skill.yml", "SKILL.md"} {
		if _, ok := f[p]; ok {
			out = append(out, p)
		}
	}
	for _, p := range f.Paths() {
		if !slices.Contains(out, p) && (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			out = append(out, p)
		}
	}
	return out
}
