package skill

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// DefaultRoots are the usual agent-skills discovery paths, in the order they win:
// <workspace>/skills, <workspace>/.agents/skills, <workspace>/.claude/skills,
// <home>/.agents/skills, <home>/.claude/skills and /etc/agent/skills. An empty
// workspace or home leaves its paths out.
func DefaultRoots(workspace, home string) []string {
	var roots []string
	if workspace != "" {
		roots = append(roots,
			filepath.Join(workspace, "skills"),
			filepath.Join(workspace, ".agents", "skills"),
			filepath.Join(workspace, ".claude", "skills"))
	}
	if home != "" {
		roots = append(roots,
			filepath.Join(home, ".agents", "skills"),
			filepath.Join(home, ".claude", "skills"))
	}
	return append(roots, filepath.Join(string(filepath.Separator), "etc", "agent", "skills"))
}

// Set is what Discover found: the valid skills and subagents under some roots,
// looked up by name. The registry publishes its skills to the fleet's catalog.
type Set struct {
	Skills    []*Skill    // in discovery order: by root, then by path
	Subagents []*Subagent // in discovery order
	Roots     []string    // the roots that exist, in order, duplicates removed

	byName    map[string]*Skill
	byAgent   map[string]*Subagent
	indexOnce sync.Once
}

// Get returns the skill with the name, matched as NormalizeName does, or nil.
func (c *Set) Get(name string) *Skill {
	c.index()
	return c.byName[NormalizeName(name)]
}

// Subagent returns the subagent with the name, matched as NormalizeName does, or nil.
func (c *Set) Subagent(name string) *Subagent {
	c.index()
	return c.byAgent[NormalizeName(name)]
}

func (c *Set) index() {
	c.indexOnce.Do(func() {
		c.byName = make(map[string]*Skill, len(c.Skills))
		for _, s := range c.Skills {
			if _, dup := c.byName[NormalizeName(s.Name)]; !dup {
				c.byName[NormalizeName(s.Name)] = s
			}
		}
		c.byAgent = make(map[string]*Subagent, len(c.Subagents))
		for _, a := range c.Subagents {
			if _, dup := c.byAgent[NormalizeName(a.Name)]; !dup {
				c.byAgent[NormalizeName(a.Name)] = a
			}
		}
	})
}

// Discover loads every skill under the roots with the zero LoadOptions. See
// LoadOptions.Discover.
func Discover(roots ...string) (*Set, Diagnostics) {
	return LoadOptions{}.Discover(roots...)
}

// Discover walks the roots in order and loads every skill and subagent in them,
// then checks the catalog as a whole: a name defined again in a later root is
// shadowed (warning) and the first definition wins; names equal but for '-' and '_'
// conflict (error); dependencies must exist and must not form cycles. Invalid
// skills are absent from the catalog and present in the diagnostics. Roots that do
// not exist are skipped.
//
// A root holds skill directories (a directory with SKILL.md or skill.yaml),
// single-file skills (<name>.md, <name>.yaml), category directories holding more of
// either, and subagents/*.md. A root that is itself a skill directory or a skill file
// is loaded as one skill. Hidden entries and README.md-like files are skipped.
//
// Directories are read and skills parsed concurrently (LoadOptions.Concurrency);
// the result and the diagnostics do not depend on the order work finishes in.
func (o LoadOptions) Discover(roots ...string) (*Set, Diagnostics) {
	sc := &scan{opts: o.withDefaults(), seen: map[string]bool{}, visited: map[string]bool{}}
	sc.sem = make(chan struct{}, sc.opts.Concurrency)
	cat := &Set{}
	seenRoots := map[string]bool{}
	for i, root := range roots {
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			if !os.IsNotExist(err) {
				sc.diag(Diagnostic{File: root, Severity: SeverityError, Message: fmt.Sprintf("cannot read skill root: %v", unwrapPathError(err))})
			}
			continue
		}
		if seenRoots[real] {
			continue
		}
		seenRoots[real] = true
		cat.Roots = append(cat.Roots, root)
		sc.root(i, root)
	}
	sc.wg.Wait()
	slices.SortFunc(sc.results, func(a, b result) int {
		if a.root != b.root {
			return a.root - b.root
		}
		return comparePaths(a.path, b.path)
	})
	ds := sc.ds
	for _, r := range sc.results {
		ds = append(ds, r.ds...)
	}
	cat.Skills = resolve(sc.results, &ds)
	cat.Subagents = resolveSubagents(sc.results, &ds)
	ds.Sort()
	return cat, ds
}

// comparePaths orders paths as a depth-first walk of sorted directories meets them.
func comparePaths(a, b string) int {
	for {
		ah, at, aok := strings.Cut(a, string(filepath.Separator))
		bh, bt, bok := strings.Cut(b, string(filepath.Separator))
		if c := strings.Compare(ah, bh); c != 0 || !aok || !bok {
			if c == 0 {
				switch {
				case aok:
					return 1
				case bok:
					return -1
				}
			}
			return c
		}
		a, b = at, bt
	}
}

type jobKind int

const (
	jobDir jobKind = iota
	jobMD
	jobYAML
	jobSubagent
)

// result is one skill or subagent loaded, or not.
type result struct {
	root  int
	path  string
	l     *loaded
	agent *Subagent
	pos   map[string]at // of the subagent
	ds    Diagnostics
	// invalid is the name of a skill rejected for errors, when it has one, so that
	// skills depending on it can say why it is missing.
	invalid string
}

// scan walks roots and loads what it finds, each directory read and each skill
// loaded in a goroutine of its own, at most Concurrency at a time.
type scan struct {
	opts    *LoadOptions
	sem     chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []result
	ds      Diagnostics
	seen    map[string]bool // skills and subagents started, by absolute path
	visited map[string]bool // symlinked directories entered, by real path
}

func (sc *scan) diag(d Diagnostic) {
	sc.mu.Lock()
	sc.ds = append(sc.ds, d)
	sc.mu.Unlock()
}

// goLimited runs f in a goroutine once a slot is free. f never waits for other
// work, so the pool cannot deadlock.
func (sc *scan) goLimited(f func()) {
	sc.wg.Go(func() {
		sc.sem <- struct{}{}
		defer func() { <-sc.sem }()
		f()
	})
}

// ignoredFiles are markdown files in skill roots that document rather than define.
var ignoredFiles = []string{"readme.md", "changelog.md", "license.md", "contributing.md", "agents.md", "claude.md"}

func (sc *scan) root(rootIdx int, root string) {
	info, err := os.Stat(root)
	if err != nil {
		return
	}
	if !info.IsDir() {
		base := strings.ToLower(filepath.Base(root))
		switch {
		case strings.HasSuffix(base, ".md"):
			sc.load(rootIdx, root, jobMD, nil)
		case strings.HasSuffix(base, ".yaml"), strings.HasSuffix(base, ".yml"):
			sc.load(rootIdx, root, jobYAML, nil)
		}
		return
	}
	bound, err := filepath.EvalSymlinks(root)
	if err != nil {
		bound = root
	}
	sc.dir(rootIdx, root, bound, 0, true)
	// Subagents are kept beside the skills: .claude/skills and .claude/subagents.
	if filepath.Base(filepath.Clean(root)) == "skills" {
		sib := filepath.Join(filepath.Dir(filepath.Clean(root)), "subagents")
		if info, err := os.Stat(sib); err == nil && info.IsDir() {
			sc.goLimited(func() { sc.subagents(rootIdx, sib) })
		}
	}
}

const maxCategoryDepth = 8

// FollowLink reports whether discovery follows a symlink, found under a root whose
// real path is bound, to the directory whose real path is target: when the target
// is inside the root, or is itself a skill directory (a skill developed elsewhere
// and linked in). Any other directory outside the root — a category, or "/" — is
// not walked: a link must not make discovery read the whole host.
func FollowLink(bound, target string) bool {
	if inside(target, bound) {
		return true
	}
	entries, err := os.ReadDir(target)
	return err == nil && isSkillDir(entries)
}

// inside reports whether p is dir or below it.
func inside(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// dir reads a directory of a root: a skill directory, or a category whose entries
// are skills, categories and subagents. bound is the real path of the root, or of
// the skill directory a link outside it led to: links are followed only inside it.
func (sc *scan) dir(rootIdx int, dir, bound string, depth int, isRoot bool) {
	sc.goLimited(func() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			msg := "cannot read: %v"
			if isRoot {
				msg = "cannot read skill root: %v"
			}
			sc.diag(Diagnostic{File: dir, Severity: SeverityError, Message: fmt.Sprintf(msg, unwrapPathError(err))})
			return
		}
		if isSkillDir(entries) {
			sc.loadNow(rootIdx, dir, jobDir, entries)
			return
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p := filepath.Join(dir, name)
			mode := e.Type()
			if mode&fs.ModeSymlink != 0 {
				info, err := os.Stat(p)
				if err != nil {
					sc.diag(Diagnostic{File: p, Severity: SeverityWarning, Message: fmt.Sprintf("skipped broken symlink: %v", unwrapPathError(err))})
					continue
				}
				mode = info.Mode().Type()
				if info.IsDir() {
					real, err := filepath.EvalSymlinks(p)
					if err == nil && !FollowLink(bound, real) {
						sc.diag(Diagnostic{File: p, Severity: SeverityWarning, Message: fmt.Sprintf(
							"skipped: a symlink to %s, a directory outside the skills root that is not a skill; discovery does not walk outside a root (make it a root of its own to load the skills in it)", real)})
						continue
					}
					sc.mu.Lock()
					again := err != nil || sc.visited[real]
					sc.visited[real] = true
					sc.mu.Unlock()
					if again {
						continue
					}
				}
			}
			switch {
			case mode.IsDir() && name == "subagents":
				sc.goLimited(func() { sc.subagents(rootIdx, p) })
			case mode.IsDir() && depth < maxCategoryDepth:
				b := bound
				if mode != e.Type() { // a link: what it leads to may be a skill outside the root
					if real, err := filepath.EvalSymlinks(p); err == nil && !inside(real, bound) {
						b = real
					}
				}
				sc.dir(rootIdx, p, b, depth+1, false)
			case mode.IsRegular():
				lower := strings.ToLower(name)
				switch {
				case slices.Contains(ignoredFiles, lower):
				case strings.HasSuffix(lower, ".md"):
					sc.load(rootIdx, p, jobMD, nil)
				case strings.HasSuffix(lower, ".yaml"), strings.HasSuffix(lower, ".yml"):
					sc.load(rootIdx, p, jobYAML, nil)
				}
			}
		}
	})
}

func isSkillDir(entries []os.DirEntry) bool {
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.Name() == SkillMDFile || isWorkflowFile(e.Name())
	})
}

func (sc *scan) subagents(rootIdx int, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		sc.diag(Diagnostic{File: dir, Severity: SeverityError, Message: fmt.Sprintf("cannot read: %v", unwrapPathError(err))})
		return
	}
	for _, e := range entries {
		name := e.Name()
		lower := strings.ToLower(name)
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(lower, ".md") || slices.Contains(ignoredFiles, lower) {
			continue
		}
		sc.load(rootIdx, filepath.Join(dir, name), jobSubagent, nil)
	}
}

// load loads a skill or subagent in a goroutine of its own.
func (sc *scan) load(rootIdx int, p string, kind jobKind, entries []os.DirEntry) {
	sc.goLimited(func() { sc.loadNow(rootIdx, p, kind, entries) })
}

// loadNow loads a skill or subagent, unless it was found before (a root inside
// another).
func (sc *scan) loadNow(rootIdx int, p string, kind jobKind, entries []os.DirEntry) {
	key, err := filepath.Abs(p)
	if err != nil {
		key = p
	}
	sc.mu.Lock()
	dup := sc.seen[key]
	sc.seen[key] = true
	sc.mu.Unlock()
	if dup {
		return
	}
	r := result{root: rootIdx, path: p}
	o := sc.opts
	switch kind {
	case jobDir:
		r.l = o.loadDir(p, entries, &r.ds)
	case jobMD:
		r.l = o.loadFile(p, true, &r.ds)
	case jobYAML:
		r.l = o.loadFile(p, false, &r.ds)
	case jobSubagent:
		r.agent, r.pos = o.loadSubagent(p, &r.ds)
	}
	if r.ds.HasErrors() {
		if r.l != nil && ValidName(r.l.skill.Name) {
			r.invalid = r.l.skill.Name
		}
		r.l, r.agent = nil, nil
	}
	sc.mu.Lock()
	sc.results = append(sc.results, r)
	sc.mu.Unlock()
}
