package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Limits applied when LoadOptions leaves them zero.
const (
	DefaultMaxFileSize  = 100 << 10 // per text file
	DefaultMaxSkillSize = 10 << 20  // all files of one skill together
	DefaultMaxFiles     = 1000      // files in one skill directory
)

// LoadOptions are the knobs of parsing and loading. The zero value is ready to use.
type LoadOptions struct {
	// KnownTools are the tools skills may name in required_tools, allowed-tools and
	// workflow steps; a name not among them is an error with a suggestion (a name in
	// disallowed_tools, a warning). nil: tool names are not checked.
	KnownTools []string
	// LikelyTools, when KnownTools is nil, are tools every fleet has (the
	// built-ins): a workflow step's tool a typo away from one of them, and not one
	// of them, is a warning with a suggestion (`tool: htp`), at its line. Other
	// names are not checked (tools served on the bus or by MCP servers are not
	// known offline).
	LikelyTools []string

	// MaxFileSize bounds each text file of a skill, SKILL.md and skill.yaml included:
	// a larger SKILL.md or skill.yaml is an error; a larger text resource is listed
	// but not Inline (warning). 0: DefaultMaxFileSize. Negative: no limit.
	MaxFileSize int64

	// MaxSkillSize bounds all files of one skill together; a larger skill is
	// rejected. 0: DefaultMaxSkillSize. Negative: no limit.
	MaxSkillSize int64

	// MaxFiles bounds the number of files in one skill directory. 0:
	// DefaultMaxFiles. Negative: no limit.
	MaxFiles int

	// Concurrency is how many skills Discover loads at once. 0: twice GOMAXPROCS.
	Concurrency int
}

func (o *LoadOptions) withDefaults() *LoadOptions {
	c := *o
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.MaxSkillSize == 0 {
		c.MaxSkillSize = DefaultMaxSkillSize
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	return &c
}

// Names of the files that make a directory a skill directory.
const (
	SkillMDFile   = "SKILL.md"
	SkillYAMLFile = "skill.yaml"
)

func isWorkflowFile(name string) bool { return name == SkillYAMLFile || name == "skill.yml" }

// LoadPath loads one skill: a skill directory (SKILL.md and/or skill.yaml, with
// scripts/, references/, assets/), a SKILL.md or skill.yaml (meaning its directory),
// or a single-file skill <name>.md or <name>.yaml. The skill is nil when there are
// errors. It uses the zero LoadOptions.
func LoadPath(p string) (*Skill, Diagnostics) {
	return LoadOptions{}.LoadPath(p)
}

// LoadPath is the package's LoadPath with these options.
func (o LoadOptions) LoadPath(p string) (*Skill, Diagnostics) {
	var ds Diagnostics
	l := o.withDefaults().loadPath(p, &ds)
	ds.Sort()
	if l == nil || ds.HasErrors() {
		return nil, ds
	}
	return l.skill, ds
}

// loaded is a parsed skill with the positions catalog checks report at.
type loaded struct {
	skill *Skill
	pos   map[string]at
}

func (o *LoadOptions) loadPath(p string, ds *Diagnostics) *loaded {
	r := report{file: p, ds: ds}
	info, err := os.Stat(p)
	if err != nil {
		r.add(SeverityError, 0, 0, "", "", "cannot read skill: %v", unwrapPathError(err))
		return nil
	}
	base := filepath.Base(p)
	switch {
	case info.IsDir():
		return o.loadDir(p, nil, ds)
	case base == SkillMDFile || isWorkflowFile(base):
		return o.loadDir(filepath.Dir(p), nil, ds)
	case strings.HasSuffix(base, ".md"):
		return o.loadFile(p, true, ds)
	case strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"):
		return o.loadFile(p, false, ds)
	}
	r.add(SeverityError, 0, 0, "", "name a skill directory, a .md or a .yaml file", "not a skill")
	return nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// loadFile loads a single-file skill.
func (o *LoadOptions) loadFile(p string, isMD bool, ds *Diagnostics) *loaded {
	r := report{file: p, ds: ds}
	f, ok := o.readText(r, p)
	if !ok {
		return nil
	}
	var b *builder
	if isMD {
		b = o.parse(ds, f, nil, "", metaFields)
	} else {
		b = o.parse(ds, nil, f, "", metaFields)
	}
	if b == nil {
		return nil
	}
	b.s.Digest = digest([]fileData{*f})
	checkNameMatches(r, b, strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(f.rel, ".md"), ".yaml"), ".yml"), "file")
	for _, ep := range b.s.Entrypoints {
		r.add(SeverityError, b.pos["entrypoints."+ep.Name].line, b.pos["entrypoints."+ep.Name].col, "entrypoints",
			"put the skill in a directory <name>/SKILL.md with its scripts beside it",
			"entrypoint %s runs a file, but a single-file skill has no directory to hold it", ep.Name)
		break
	}
	return &loaded{skill: b.s, pos: b.pos}
}

// readText reads a main file, within the text file size limit.
func (o *LoadOptions) readText(r report, p string) (*fileData, bool) {
	info, err := os.Stat(p)
	if err != nil {
		r.add(SeverityError, 0, 0, "", "", "cannot read: %v", unwrapPathError(err))
		return nil, false
	}
	if !info.Mode().IsRegular() {
		r.add(SeverityError, 0, 0, "", "", "not a regular file")
		return nil, false
	}
	if o.MaxFileSize > 0 && info.Size() > o.MaxFileSize {
		r.add(SeverityError, 0, 0, "", "split it: move detail into references/",
			"%s is %s; the limit for a text file is %s", filepath.Base(p), size(info.Size()), size(o.MaxFileSize))
		return nil, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		r.add(SeverityError, 0, 0, "", "", "cannot read: %v", unwrapPathError(err))
		return nil, false
	}
	return &fileData{path: p, rel: filepath.Base(p), data: data}, true
}

// dirFile is a file found in a skill directory.
type dirFile struct {
	path string // as reported
	rel  string // slash-separated, relative to the skill directory
}

var (
	errFileTooLarge  = errors.New("file too large")
	errSkillTooLarge = errors.New("skill too large")
)

// readFile reads a regular file whose size must not exceed limit, nor budget (the
// room left under the skill's limit); a negative limit is none. The size is
// checked before reading, so an oversized file is never read. n is the file's
// size.
func readFile(p string, limit, budget int64) (data []byte, n int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	n = info.Size()
	switch {
	case !info.Mode().IsRegular():
		return nil, n, fmt.Errorf("not a regular file")
	case limit >= 0 && n > limit:
		return nil, n, errFileTooLarge
	case budget >= 0 && n > budget:
		return nil, n, errSkillTooLarge
	}
	// Read up to one byte past the size, so that a file growing meanwhile is caught.
	want := n + 1
	if budget >= 0 {
		want = min(want, budget+1)
	}
	data = make([]byte, 0, want)
	for int64(len(data)) < want {
		m, err := f.Read(data[len(data):want])
		data = data[:len(data)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, n, err
		}
	}
	grew := int64(len(data)) > n
	n = int64(len(data))
	switch {
	case limit >= 0 && n > limit:
		return nil, n, errFileTooLarge
	case budget >= 0 && n > budget:
		return nil, n, errSkillTooLarge
	case grew:
		return nil, n, errors.New("the file changed while being read")
	}
	return data, n, nil
}

// loadDir loads a skill directory. entries, when known, are its entries.
func (o *LoadOptions) loadDir(dir string, entries []os.DirEntry, ds *Diagnostics) *loaded {
	r := report{file: dir, ds: ds}
	files, ok := o.listDir(r, dir, entries)
	if !ok {
		return nil
	}
	var mdF, wfF *dirFile
	for i := range files {
		switch f := &files[i]; {
		case f.rel == SkillMDFile:
			mdF = f
		case isWorkflowFile(f.rel):
			if wfF != nil {
				r.add(SeverityError, 0, 0, "", "keep one of them", "%s and %s are both present", wfF.rel, f.rel)
				return nil
			}
			wfF = f
		}
	}
	if mdF == nil && wfF == nil {
		r.add(SeverityError, 0, 0, "", "add a SKILL.md (instructions) or a skill.yaml (workflow)", "not a skill directory: no %s or %s", SkillMDFile, SkillYAMLFile)
		return nil
	}
	var total int64
	all := make([]fileData, 0, len(files))
	var md, wf *fileData
	var resources []Resource
	for _, f := range files {
		fr := report{file: f.path, ds: ds}
		isMain := f.rel == SkillMDFile || isWorkflowFile(f.rel)
		limit := int64(-1)
		if isMain {
			limit = o.MaxFileSize
		}
		data, n, err := readFile(f.path, limit, o.MaxSkillSize-total)
		total += n
		switch {
		case errors.Is(err, errFileTooLarge):
			fr.add(SeverityError, 0, 0, "", "split it: move detail into references/",
				"%s is %s; the limit for a text file is %s", f.rel, size(n), size(o.MaxFileSize))
			return nil
		case errors.Is(err, errSkillTooLarge):
			r.add(SeverityError, 0, 0, "", "move large assets elsewhere",
				"the skill's files total more than %s, the limit", size(o.MaxSkillSize))
			return nil
		case err != nil:
			fr.add(SeverityError, 0, 0, "", "", "cannot read: %v", unwrapPathError(err))
			return nil
		}
		fd := fileData{path: f.path, rel: f.rel, data: data, sum: sha256Hex(data)}
		all = append(all, fd)
		switch {
		case f.rel == SkillMDFile:
			md = &all[len(all)-1]
		case isWorkflowFile(f.rel):
			wf = &all[len(all)-1]
		default:
			res := Resource{Path: f.rel, Kind: resourceKind(f.rel), Size: int64(len(data)), Binary: isBinary(data), SHA256: fd.sum}
			res.Inline = !res.Binary && (o.MaxFileSize <= 0 || res.Size <= o.MaxFileSize)
			if !res.Binary && !res.Inline {
				fr.add(SeverityWarning, 0, 0, "", "split it, or accept that it is listed but never shown to a model",
					"%s is %s, more than the %s text file limit; it will not be inlined", f.rel, size(res.Size), size(o.MaxFileSize))
			}
			resources = append(resources, res)
		}
	}
	b := o.parse(ds, md, wf, dir, metaFields)
	if b == nil {
		return nil
	}
	s := b.s
	s.Resources = resources
	s.Digest = digest(all)
	checkNameMatches(r, b, filepath.Base(dir), "directory")
	// Links in the instructions name files of the skill.
	if md != nil {
		for _, l := range localLinks(s.Body, s.BodyLine) {
			target := path.Clean(l.target)
			switch {
			case path.IsAbs(l.target) || !filepath.IsLocal(filepath.FromSlash(target)):
				*ds = append(*ds, at{file: md.path, line: l.line, col: l.col}.diag(SeverityWarning, "body",
					"a skill is moved and published as a unit; link only to its own files",
					"link to %s leaves the skill directory", l.target))
			case !slices.ContainsFunc(files, func(f dirFile) bool { return f.rel == target || strings.HasPrefix(f.rel, target+"/") }):
				*ds = append(*ds, at{file: md.path, line: l.line, col: l.col}.diag(SeverityWarning, "body",
					"paths are relative to the skill directory", "link to %s names no file of the skill", l.target))
			}
		}
	}
	// Entrypoints run files of the skill.
	for _, ep := range s.Entrypoints {
		script := path.Clean(strings.TrimPrefix(filepath.ToSlash(entrypointScript(ep.Command)), "./"))
		if !slices.ContainsFunc(files, func(f dirFile) bool { return f.rel == script }) {
			p := b.pos["entrypoints."+ep.Name]
			*ds = append(*ds, p.diag(SeverityError, "entrypoints", "paths are relative to the skill directory",
				"entrypoint %s runs %s, which is not a file of the skill", ep.Name, script))
		}
	}
	return &loaded{skill: s, pos: b.pos}
}

// checkNameMatches warns when a skill's name differs from its directory or file name
// (Agent Skills requires them to match; finding a skill by its path relies on it).
func checkNameMatches(r report, b *builder, base, what string) {
	name := b.s.Name
	if name == "" || !ValidName(name) || NormalizeName(base) == NormalizeName(name) {
		return
	}
	p, ok := b.pos["name"]
	if !ok {
		p = at{file: b.s.Source, line: 1, col: 1}
	}
	*r.ds = append(*r.ds, p.diag(SeverityWarning, "name", fmt.Sprintf("rename the %s to %s, or the skill to %s", what, name, suggestName(base)),
		"name %s differs from its %s name %s", name, what, base))
}

// listDir lists the files of a skill directory, recursively, skipping hidden entries.
// Symlinks must stay inside the directory; anything but regular files and
// directories is an error.
func (o *LoadOptions) listDir(r report, dir string, entries []os.DirEntry) ([]dirFile, bool) {
	var files []dirFile
	var realDir string // resolved lazily: only symlinks need it
	ok := true
	visited := map[string]bool{}
	var walk func(abs, rel string, entries []os.DirEntry, depth int)
	walk = func(abs, rel string, entries []os.DirEntry, depth int) {
		if entries == nil {
			var err error
			entries, err = os.ReadDir(abs)
			if err != nil {
				r.add(SeverityError, 0, 0, "", "", "cannot read %s: %v", relOrDot(rel), unwrapPathError(err))
				ok = false
				return
			}
		}
		for _, e := range entries {
			if !ok {
				return
			}
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p := filepath.Join(abs, name)
			rp := path.Join(rel, name)
			fr := report{file: p, ds: r.ds}
			mode := e.Type()
			if mode&fs.ModeSymlink != 0 {
				if realDir == "" {
					var err error
					if realDir, err = filepath.EvalSymlinks(dir); err != nil {
						r.add(SeverityError, 0, 0, "", "", "cannot resolve the skill directory: %v", unwrapPathError(err))
						ok = false
						return
					}
				}
				target, err := filepath.EvalSymlinks(p)
				if err != nil {
					fr.add(SeverityError, 0, 0, "", "remove the link or restore its target", "broken symlink: %v", unwrapPathError(err))
					ok = false
					return
				}
				within, err := filepath.Rel(realDir, target)
				if err != nil || !filepath.IsLocal(within) {
					fr.add(SeverityError, 0, 0, "", "copy the file into the skill directory instead of linking to it",
						"symlink points outside the skill directory (to %s)", target)
					ok = false
					return
				}
				info, err := os.Stat(target)
				if err != nil {
					fr.add(SeverityError, 0, 0, "", "", "cannot read: %v", unwrapPathError(err))
					ok = false
					return
				}
				mode = info.Mode().Type()
				if info.IsDir() {
					if visited[target] {
						continue
					}
					visited[target] = true
				}
			}
			switch {
			case mode.IsDir():
				if depth >= 16 {
					fr.add(SeverityError, 0, 0, "", "flatten the directory tree", "directories nest more than 16 deep")
					ok = false
					return
				}
				walk(p, rp, nil, depth+1)
			case mode.IsRegular():
				files = append(files, dirFile{path: p, rel: rp})
				if o.MaxFiles > 0 && len(files) > o.MaxFiles {
					r.add(SeverityError, 0, 0, "", "remove files the skill does not need", "the skill has more than %d files", o.MaxFiles)
					ok = false
					return
				}
			default:
				fr.add(SeverityError, 0, 0, "", "remove it", "not a regular file (%s)", mode)
				ok = false
				return
			}
		}
	}
	walk(dir, "", entries, 0)
	return files, ok
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

func resourceKind(rel string) ResourceKind {
	top, _, _ := strings.Cut(rel, "/")
	if !strings.Contains(rel, "/") {
		return ResourceOther
	}
	switch top {
	case "scripts":
		return ResourceScript
	case "references":
		return ResourceReference
	case "assets":
		return ResourceAsset
	}
	return ResourceOther
}

func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// digest is the sha256 of a manifest of the skill's files in the format of
// sha256sum (one "<sha256>  <path>" line per file, sorted by path), so that it
// depends on the files' contents and relative paths only.
func digest(files []fileData) string {
	lines := make([]string, len(files))
	for i, f := range files {
		sum := f.sum
		if sum == "" {
			sum = sha256Hex(f.data)
		}
		lines[i] = sum + "  " + f.rel + "\n"
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return sha256Hex([]byte(strings.Join(lines, "")))
}
