package repair

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// Diffs are written with go-udiff (gopls's Myers diff, with unified output) and
// read and applied with go-gitdiff, whose applier refuses a hunk whose context does
// not match the file exactly: a diff from a chat model is applied as written or not
// at all, never fuzzily.

// ErrMalformedDiff is a diff that cannot be read, or that does something a repair
// may not do: create, delete, rename or copy files, change binary files or modes,
// or touch a file the skill does not have.
var ErrMalformedDiff = errors.New("repair: malformed diff")

// MaxDiffBytes bounds a diff read by ParseDiff.
const MaxDiffBytes = 256 << 10

// Stats is the size of a patch, as the budget counts it.
type Stats struct {
	Files int `json:"files"`
	Hunks int `json:"hunks"`
}

// Diff returns the unified diff that turns before into after (only the files of
// before that after changes), with a/ and b/ prefixed paths as git writes them.
func Diff(before, after Files) string {
	var b strings.Builder
	for _, p := range before.Paths() {
		nv, ok := after[p]
		if !ok || nv == before[p] {
			continue
		}
		b.WriteString(udiff.Unified("a/"+p, "b/"+p, before[p], nv))
	}
	return b.String()
}

// ParseDiff reads a unified diff strictly: at least one file, each an existing
// text file of files changed in place by at least one hunk, and nothing but the
// diff (a ```diff fence around it is tolerated).
func ParseDiff(diff string, files Files) ([]*gitdiff.File, Stats, error) {
	if len(diff) > MaxDiffBytes {
		return nil, Stats{}, fmt.Errorf("%w: %d bytes; at most %d", ErrMalformedDiff, len(diff), MaxDiffBytes)
	}
	diff = unfence(diff)
	parsed, preamble, err := gitdiff.Parse(strings.NewReader(diff))
	if err != nil {
		return nil, Stats{}, fmt.Errorf("%w: %v", ErrMalformedDiff, err)
	}
	if strings.TrimSpace(preamble) != "" && !strings.HasPrefix(strings.TrimSpace(preamble), "diff ") {
		return nil, Stats{}, fmt.Errorf("%w: text before the diff: %q", ErrMalformedDiff, excerpt(preamble))
	}
	if len(parsed) == 0 {
		return nil, Stats{}, fmt.Errorf("%w: no file in it", ErrMalformedDiff)
	}
	var st Stats
	seen := map[string]bool{}
	for _, f := range parsed {
		// go-gitdiff strips a/ and b/ from git's headers, but from a plain ---/+++
		// pair it takes the +++ path as it is, for both names.
		f.OldName, f.NewName = unprefix(f.OldName, files), unprefix(f.NewName, files)
		switch {
		case f.IsNew || f.IsDelete || f.IsCopy || f.IsRename:
			return nil, Stats{}, fmt.Errorf("%w: %s: a repair changes files in place; it does not create, delete, copy or rename them", ErrMalformedDiff, name(f))
		case f.IsBinary || f.BinaryFragment != nil:
			return nil, Stats{}, fmt.Errorf("%w: %s: binary patches are not accepted", ErrMalformedDiff, name(f))
		case f.OldMode != f.NewMode:
			return nil, Stats{}, fmt.Errorf("%w: %s: file modes may not change", ErrMalformedDiff, name(f))
		case f.OldName != f.NewName:
			return nil, Stats{}, fmt.Errorf("%w: %s and %s: old and new path differ", ErrMalformedDiff, f.OldName, f.NewName)
		case len(f.TextFragments) == 0:
			return nil, Stats{}, fmt.Errorf("%w: %s: no hunk", ErrMalformedDiff, name(f))
		}
		if _, ok := files[f.OldName]; !ok {
			return nil, Stats{}, fmt.Errorf("%w: %s is not a file of the skill (it has %s)", ErrMalformedDiff, f.OldName, strings.Join(files.Paths(), ", "))
		}
		if seen[f.OldName] {
			return nil, Stats{}, fmt.Errorf("%w: %s is patched twice", ErrMalformedDiff, f.OldName)
		}
		seen[f.OldName] = true
		for i, fr := range f.TextFragments {
			if err := fr.Validate(); err != nil {
				return nil, Stats{}, fmt.Errorf("%w: %s hunk %d: %v", ErrMalformedDiff, f.OldName, i+1, err)
			}
		}
		st.Files++
		st.Hunks += len(f.TextFragments)
	}
	return parsed, st, nil
}

// Apply applies diff to a copy of files and returns the copy and the patch's size.
// A hunk whose context does not match exactly is an error.
func Apply(files Files, diff string) (Files, Stats, error) {
	parsed, st, err := ParseDiff(diff, files)
	if err != nil {
		return nil, Stats{}, err
	}
	out := files.Clone()
	for _, f := range parsed {
		var b bytes.Buffer
		if err := gitdiff.Apply(&b, strings.NewReader(files[f.OldName]), f); err != nil {
			return nil, Stats{}, fmt.Errorf("repair: %s does not apply: %w", f.OldName, err)
		}
		out[f.OldName] = b.String()
	}
	return out, st, nil
}

func name(f *gitdiff.File) string {
	if f.NewName != "" {
		return f.NewName
	}
	return f.OldName
}

// unfence removes a Markdown code fence around s. The diff it returns ends in a
// line break: a diff's last line without one would read as a change to a file that
// does not end in one (a model's answer often loses it), and not apply.
func unfence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return s
	}
	nl := strings.IndexByte(t, '\n')
	if nl < 0 {
		return s
	}
	t = strings.TrimSpace(t[nl+1:])
	t = strings.TrimSuffix(t, "```")
	return strings.TrimRight(t, " \t\n") + "\n"
}

func excerpt(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// unprefix removes the a/ or b/ of a diff header's path unless the skill has a file
// by the longer name.
func unprefix(p string, files Files) string {
	if _, ok := files[p]; ok {
		return p
	}
	for _, pre := range []string{"a/", "b/"} {
		if rest, ok := strings.CutPrefix(p, pre); ok {
			return rest
		}
	}
	return p
}
