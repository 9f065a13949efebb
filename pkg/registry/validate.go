package registry

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Limits of a validate request, beyond the limits of package skill.
const (
	maxValidateFiles = 10000
	maxValidateBytes = 16 << 20
)

// BadRequestError is a request the service cannot act on; the message says why.
type BadRequestError struct{ Msg string }

func (e *BadRequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf(format, args...)}
}

// Validate checks skill files given by content (see ValidateRequest) with package
// skill's rules: it writes them to a temporary directory and discovers them there,
// then names files by the request's paths. opts are the loading knobs
// (req.KnownTools overrides opts.KnownTools). A malformed request is a
// *BadRequestError.
func Validate(req ValidateRequest, opts skill.LoadOptions) (*ValidateResponse, error) {
	n := len(req.Files) + len(req.Binary)
	if n == 0 {
		return nil, badRequest("validate: no files: send files (path → text) and/or binary (path → base64)")
	}
	if n > maxValidateFiles {
		return nil, badRequest("validate: %d files; at most %d per request", n, maxValidateFiles)
	}
	all := make(map[string][]byte, n)
	var total int
	add := func(p string, data []byte) error {
		clean := path.Clean(p)
		if p == "" || clean != p || path.IsAbs(p) || strings.Contains(p, `\`) || !filepath.IsLocal(filepath.FromSlash(p)) {
			return badRequest("validate: file %q: paths are relative, slash-separated and clean (no .., no leading /)", p)
		}
		if _, dup := all[p]; dup {
			return badRequest("validate: file %q is both in files and in binary", p)
		}
		total += len(data)
		if total > maxValidateBytes {
			return badRequest("validate: the files total more than %d MiB", maxValidateBytes>>20)
		}
		all[p] = data
		return nil
	}
	for p, text := range req.Files {
		if err := add(p, []byte(text)); err != nil {
			return nil, err
		}
	}
	for p, data := range req.Binary {
		if err := add(p, data); err != nil {
			return nil, err
		}
	}
	// A file that is also a directory of another cannot be written.
	for p := range all {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, clash := all[d]; clash {
				return nil, badRequest("validate: %q is a file and a directory of %q", d, p)
			}
		}
	}

	tmp, err := os.MkdirTemp("", "skillbus-validate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	base := tmp
	if dirMode(all) {
		dir := req.Dir
		if dir == "" {
			dir = guessName(all)
		}
		if dir == "" || strings.ContainsAny(dir, `/\`) || dir == "." || dir == ".." || strings.HasPrefix(dir, ".") {
			return nil, badRequest("validate: dir %q must be a plain directory name", dir)
		}
		base = filepath.Join(tmp, dir)
	}
	for p, data := range all {
		dst := filepath.Join(base, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return nil, err
		}
	}
	if req.KnownTools != nil {
		opts.KnownTools = req.KnownTools
	}
	cat, ds := opts.Discover(base)
	strip := func(s string) string {
		s = strings.ReplaceAll(s, base+string(filepath.Separator), "")
		return strings.ReplaceAll(s, base, ".")
	}
	resp := &ValidateResponse{Skills: []string{}, Diagnostics: skill.Diagnostics{}}
	for _, d := range ds {
		d.File = filepath.ToSlash(strip(d.File))
		d.Message, d.Hint = strip(d.Message), strip(d.Hint)
		resp.Diagnostics = append(resp.Diagnostics, d)
		if d.Severity == skill.SeverityError {
			resp.Errors++
		} else {
			resp.Warnings++
		}
	}
	if !ds.HasErrors() {
		for _, d := range append(selector.ExampleWarnings(cat.Skills), selector.TextInputWarnings(cat.Skills)...) {
			d.File = filepath.ToSlash(strip(d.File))
			resp.Diagnostics = append(resp.Diagnostics, d)
			resp.Warnings++
		}
	}
	for _, s := range cat.Skills {
		resp.Skills = append(resp.Skills, s.Name)
	}
	resp.Valid = resp.Errors == 0
	return resp, nil
}

// dirMode: the files are one skill directory.
func dirMode(files map[string][]byte) bool {
	for _, main := range []string{skill.SkillMDFile, skill.SkillYAMLFile, "skill.yml"} {
		if _, ok := files[main]; ok {
			return true
		}
	}
	return false
}

// guessName names the directory of a lone skill after the skill, so that the check
// that a skill's name matches its directory stays quiet.
func guessName(files map[string][]byte) string {
	for _, main := range []string{skill.SkillYAMLFile, "skill.yml", skill.SkillMDFile} {
		data, ok := files[main]
		if !ok {
			continue
		}
		var s *skill.Skill
		if main == skill.SkillMDFile {
			s, _ = skill.ParseSkillMD(main, data)
		} else {
			s, _ = skill.ParseWorkflow(main, data)
		}
		if s != nil && skill.ValidName(s.Name) {
			return s.Name
		}
		// Invalid, but its name is probably still readable.
		for _, line := range strings.SplitN(string(data), "\n", 64) {
			if v, ok := strings.CutPrefix(line, "name:"); ok {
				if v = strings.Trim(strings.TrimSpace(v), `"'`); skill.ValidName(v) {
					return v
				}
			}
		}
	}
	return "skill"
}
