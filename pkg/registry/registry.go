// Package registry is the registry process: it loads skills from directories
// (package skill), publishes every valid one to the catalog, keeps previous versions
// for runs pinned to them, watches the directories so that every change reaches the
// fleet without a restart, and answers the skillbus-registry NATS micro service
// (list, get, search, validate).
//
// # Publishing
//
// Each valid skill goes to KV "skills" under its name, as the JSON of skill.Skill
// without its body; the body and every file of the skill go to the object store
// "skill-files" under <name>/<digest>/<path>, and the version is also kept under
// the key <name>.v.<digest> (package catalog names the layout). Files are written
// before keys, so a reader that sees a key finds its files. Routers and workers
// follow the current keys (catalog.Watch); a worker running a pinned version reads
// it with catalog.LookupVersion and its files with catalog.Files.
//
// # Invalid skills
//
// A skill whose files become invalid keeps its last good version serving: it stays
// in the catalog, and list and get report it with state "invalid" and its current
// diagnostics. Its current entry in the catalog is marked with their first error
// (skill.Skill.Invalid, see mark), for the router to say so in its decisions. A registry deletes only skills it published from its own roots, and
// never because a whole root reads as empty or unreadable (see apply). A skill whose
// files are gone is removed from the catalog (its kept
// versions stay for pinned runs until the retention collects them).
//
// # Watching
//
// Start syncs once, then watches every root recursively (fsnotify; new directories
// are added as they appear; roots that do not exist yet are picked up when they are
// created) and syncs again after Config.Debounce of quiet. A change inside one known
// skill that keeps its name and dependencies re-reads only that skill; anything else
// (a new or deleted skill, a rename, a dependency change, a file outside any skill)
// runs a full Discover, which catalog-wide rules need.
//
// # Retention
//
// See Retention. GC runs after Start's first sync and every Config.GCInterval.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Config configures a Registry.
type Config struct {
	// Bus is the connection; required.
	Bus *bus.Bus
	// Roots are the directories skills are discovered in, in order: the first
	// definition of a name wins. Required. Roots that do not exist yet are watched
	// for and loaded when they appear.
	Roots []string
	// Log receives the registry's logs, including every new diagnostic; default
	// slog.Default().
	Log *slog.Logger
	// Problems, when set, receives each new diagnostic instead of Log, as one line
	// the way a compiler prints it (file:line:col: severity: message (hint: ...)),
	// for a person at a terminal: a text log would quote and escape it.
	Problems io.Writer
	// Load holds the parsing knobs (known tools, size limits); the zero value is the
	// default of package skill.
	Load skill.LoadOptions
	// Debounce is how long the files must stay quiet after a change before the
	// registry syncs; default 100ms. A stream of changes syncs at least every
	// 10×Debounce.
	Debounce time.Duration
	// Retention says how long previous versions are kept; see Retention.
	Retention Retention
	// GCInterval is how often kept versions are collected while watching; default 1h.
	GCInterval time.Duration
	// PollInterval is how often the registry syncs everything when the roots cannot
	// be watched (inotify watches exhausted); default 10s.
	PollInterval time.Duration
	// Concurrency bounds the object store uploads in flight; default 16.
	Concurrency int
	// OnSync, if set, is called after every sync made by the watcher (not by Sync),
	// from the watching goroutine.
	OnSync func(*Report)
	// Now is the clock of the retention; default time.Now.
	Now func() time.Time
}

// Retention says which previous versions of a skill are kept. A version stops being
// current when the next one is published (or the skill is removed); runs pinned to
// it may still be running, retried or waiting for a confirmation, so it is kept:
//
//   - always while it is current, and while it is one of the Keep newest versions of a
//     skill still in the catalog;
//   - otherwise while it was superseded less than For ago;
//   - but never beyond the Max newest versions of a skill, so a skill saved every few
//     seconds by an editor does not pile up versions.
//
// Its files go with it. Objects that belong to no kept version (an upload that never
// got its key) are collected once older than an hour.
type Retention struct {
	// Keep is how many of the newest versions of a skill are always kept; default 3.
	Keep int
	// For is how long a superseded version is kept; default 7 days, the lifetime of
	// run records (KV runs), so every run that can still be resumed finds its version.
	For time.Duration
	// Max bounds the versions kept per skill; default 64.
	Max int
}

func (c *Config) setDefaults() error {
	if c.Bus == nil {
		return errors.New("registry: Bus is required")
	}
	if len(c.Roots) == 0 {
		return errors.New("registry: at least one skills directory is required")
	}
	roots := make([]string, len(c.Roots))
	for i, root := range c.Roots {
		roots[i] = filepath.Clean(root)
	}
	c.Roots = roots
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Debounce <= 0 {
		c.Debounce = 100 * time.Millisecond
	}
	if c.GCInterval <= 0 {
		c.GCInterval = time.Hour
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 10 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	r := &c.Retention
	if r.Keep <= 0 {
		r.Keep = 3
	}
	if r.For <= 0 {
		r.For = 7 * 24 * time.Hour
	}
	if r.Max <= 0 {
		r.Max = 64
	}
	if r.Max < r.Keep {
		return fmt.Errorf("registry: Retention.Max (%d) is less than Retention.Keep (%d)", r.Max, r.Keep)
	}
	return nil
}

// Registry publishes the skills found under its roots.
type Registry struct {
	cfg Config

	// mu serialises syncs and collections, and guards the state below.
	mu       sync.Mutex
	kv       jetstream.KeyValue
	obs      jetstream.ObjectStore
	pub      map[string]*published    // the catalog as published, by exact name
	names    []string                 // of pub, sorted
	byUnit   map[string]string        // skill directory (or single file) → name, of pub
	versions map[versionID]bool       // version keys known to exist: their files are uploaded
	skills   []*skill.Skill           // the valid skills of the last sync, in discovery order
	units    map[string]int           // skill directory (or single file) → index in skills
	repaired map[string]pendingRepair // skill name → the repair whose files are being written back
	diags    skill.Diagnostics        // of the last sync
	logged   map[string]bool          // diagnostics already logged
	syncs    int                      // syncs done
	last     *Report                  // of the last sync

	snap  atomic.Pointer[snapshot] // what the service answers from
	files *catalog.Files           // bodies of skills not loaded by this process

	// Watching.
	startMu sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
	fw      *fsnotify.Watcher
	svc     micro.Service
	wake    chan struct{} // a sync is wanted now (SIGHUP-like, tests)

	// gcHook, set by tests, runs in GC between its listing and its deletes.
	gcHook func()
	// gcPurgeHook, set by tests, runs in GC before it purges a version's key.
	gcPurgeHook func(name, digest string)
}

// published is one skill in the catalog.
type published struct {
	s       *skill.Skill // as loaded: with its body when loaded by this process
	invalid bool         // its files are invalid now; this is the last good version
	unit    string       // unit(s)
	info    SkillInfo    // infoOf(s)
}

// setPub records s as published, keeping the indexes of the snapshot in step.
func (r *Registry) setPub(s *skill.Skill) {
	if old := r.pub[s.Name]; old != nil {
		delete(r.byUnit, old.unit)
	} else {
		i, _ := slices.BinarySearch(r.names, s.Name)
		r.names = slices.Insert(r.names, i, s.Name)
	}
	p := &published{s: s, unit: unit(s), info: infoOf(s)}
	r.pub[s.Name] = p
	r.byUnit[p.unit] = s.Name
}

func (r *Registry) dropPub(name string) {
	if p := r.pub[name]; p != nil {
		delete(r.byUnit, p.unit)
		delete(r.pub, name)
		if i, ok := slices.BinarySearch(r.names, name); ok {
			r.names = slices.Delete(r.names, i, i+1)
		}
	}
}

type versionID struct{ name, digest string }

// New validates cfg and returns a Registry.
func New(cfg Config) (*Registry, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	files, err := catalog.NewFiles(catalog.FilesConfig{Stores: cfg.Bus, Bucket: catalog.FilesBucket(cfg.Bus)})
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, files: files, logged: map[string]bool{}, wake: make(chan struct{}, 1)}
	r.snap.Store(&snapshot{})
	return r, nil
}

// Report is the outcome of a Sync.
type Report struct {
	Loaded    []string // every skill serving, by name, invalid ones (last good version) included
	Published []string // skills new or changed in the catalog
	Removed   []string // skills deleted from the catalog
	// Invalid are skills whose files are invalid now; their last good version keeps
	// serving.
	Invalid []string
	// Retry are skills whose files changed while being published; the next sync
	// publishes them.
	Retry       []string
	Diagnostics skill.Diagnostics
	// Incremental is true when only the changed skills were re-read.
	Incremental bool
	Duration    time.Duration
}

// Sync loads every skill under the roots and makes the catalog match: new and changed
// skills are published with their files, skills gone from disk are deleted, skills
// made invalid keep their last good version. It fails only when NATS cannot be
// written; the problems of skill files are in the report.
func (r *Registry) Sync(ctx context.Context) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncFull(ctx)
}

func (r *Registry) syncFull(ctx context.Context) (*Report, error) {
	start := time.Now()
	if err := r.init(ctx); err != nil {
		return nil, err
	}
	cat, diags := r.cfg.Load.Discover(r.cfg.Roots...)
	rep, err := r.apply(ctx, cat.Skills, diags, false)
	if rep != nil {
		rep.Duration = time.Since(start)
	}
	return rep, err
}

// syncPaths syncs after changes to paths: only the skills they belong to when that
// is enough, else everything.
func (r *Registry) syncPaths(ctx context.Context, paths []string) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	if r.kv == nil || len(paths) == 0 {
		return r.syncFull(ctx)
	}
	units := map[string]bool{}
	for _, p := range paths {
		u, ok := r.unitOf(p)
		if !ok {
			return r.syncFull(ctx)
		}
		units[u] = true
	}
	skills := slices.Clone(r.skills)
	var fresh skill.Diagnostics
	for u := range units {
		i := r.units[u]
		old := r.skills[i]
		s, ds := r.cfg.Load.LoadPath(u)
		// Only a skill that stays valid under the same name with the same
		// dependencies leaves the catalog-wide checks (names, shadowing,
		// dependencies) as they were.
		if s == nil || s.Name != old.Name || !slices.Equal(s.Dependencies, old.Dependencies) {
			return r.syncFull(ctx)
		}
		skills[i] = s
		fresh = append(fresh, ds...)
	}
	diags := slices.DeleteFunc(slices.Clone(r.diags), func(d skill.Diagnostic) bool {
		for u := range units {
			if within(d.File, u) {
				return true
			}
		}
		return false
	})
	diags = append(diags, fresh...)
	diags.Sort()
	rep, err := r.apply(ctx, skills, diags, true)
	if rep != nil {
		rep.Incremental = true
		rep.Duration = time.Since(start)
	}
	return rep, err
}

// Last returns the report of the last sync, nil before the first: after Start, what
// the first sync found (for a banner), later what the watcher last did.
func (r *Registry) Last() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// unitOf finds the skill directory or single-file skill p belongs to, among the valid
// skills of the last sync.
func (r *Registry) unitOf(p string) (string, bool) {
	p = filepath.Clean(p)
	for {
		if _, ok := r.units[p]; ok {
			return p, true
		}
		if slices.Contains(r.cfg.Roots, p) {
			return "", false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", false
		}
		p = parent
	}
}

// rootOf returns the root of this registry that unit u is in, or "".
func (r *Registry) rootOf(u string) string {
	if u == "" || u == "." {
		return ""
	}
	au, err := filepath.Abs(u)
	if err != nil {
		return ""
	}
	for _, root := range r.cfg.Roots {
		if ar, err := filepath.Abs(root); err == nil && within(au, ar) {
			return root
		}
	}
	return ""
}

// emptyRoots are the roots in which skills (the valid skills just found) has none.
func (r *Registry) emptyRoots(skills []*skill.Skill) map[string]bool {
	empty := make(map[string]bool, len(r.cfg.Roots))
	for _, root := range r.cfg.Roots {
		empty[root] = true
	}
	for _, s := range skills {
		if root := r.rootOf(unit(s)); root != "" {
			empty[root] = false
		}
	}
	return empty
}

// unit is where a skill lives: its directory, or its file for a single-file skill.
func unit(s *skill.Skill) string {
	if s.Dir != "" {
		return filepath.Clean(s.Dir)
	}
	return filepath.Clean(s.Source)
}

// within reports whether file is u or inside it.
func within(file, u string) bool {
	file = filepath.Clean(file)
	return file == u || strings.HasPrefix(file, u+string(filepath.Separator))
}

// apply makes the catalog hold skills (the valid skills found on disk), given the
// diagnostics of the files.
func (r *Registry) apply(ctx context.Context, skills []*skill.Skill, diags skill.Diagnostics, incremental bool) (*Report, error) {
	rep := &Report{Diagnostics: diags}
	r.logNew(diags)

	found := make(map[string]bool, len(skills))
	var changed []*skill.Skill
	for _, s := range skills {
		found[s.Name] = true
		p := r.pub[s.Name]
		if p == nil || p.s.Digest != s.Digest || p.s.Source != s.Source || p.s.Dir != s.Dir {
			changed = append(changed, s)
		}
	}
	pubNames, retry, err := r.publish(ctx, changed)
	if err != nil {
		return nil, err
	}
	rep.Published, rep.Retry = pubNames, retry
	retrySet := map[string]bool{}
	for _, n := range retry {
		retrySet[n] = true
	}
	for _, s := range skills {
		p := r.pub[s.Name]
		if p != nil && p.invalid {
			// Its files load again: say so, as their errors were said.
			r.cfg.Log.Info("registry: skill is valid again", "skill", s.Name, "digest", short(s.Digest))
		}
		if p != nil && p.s.Invalid != "" && p.s.Digest == s.Digest {
			// Back to the very version serving: only the mark goes.
			if err := r.mark(ctx, p, ""); err != nil {
				return nil, err
			}
		}
		switch {
		case retrySet[s.Name]:
			if p != nil {
				p.invalid = false
			}
		case p == nil || p.s != s:
			r.setPub(s)
		default:
			p.invalid = false
		}
	}

	// Skills no longer found: removed, unless their files are still there with errors,
	// in which case the last good version keeps serving.
	var gone []string
	for name := range r.pub {
		if !found[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	empty := r.emptyRoots(skills)
	for _, name := range gone {
		p := r.pub[name]
		u := p.unit
		root := r.rootOf(u)
		if root == "" {
			// Published by another registry, from roots this one does not read:
			// not this registry's to delete.
			continue
		}
		// Its files are there, with errors: the skill is invalid (checked first:
		// a root whose one skill is invalid reads as empty too).
		if i := slices.IndexFunc(diags, func(d skill.Diagnostic) bool {
			return d.Severity == skill.SeverityError && within(d.File, u)
		}); i >= 0 && exists(u) {
			if !p.invalid {
				r.cfg.Log.Warn("registry: skill is invalid; its last good version keeps serving", "skill", name, "digest", short(p.s.Digest))
			}
			p.invalid = true
			rep.Invalid = append(rep.Invalid, name)
			if err := r.mark(ctx, p, diags[i].String()); err != nil {
				return nil, err
			}
			continue
		}
		if empty[root] {
			// A root that reads as empty or unreadable — an unmounted volume, a
			// ConfigMap mid-swap, a typo in --skills — never wipes the catalog.
			if !p.invalid {
				r.cfg.Log.Warn("registry: skills root is empty or unreadable; its skills keep serving", "root", root, "skill", name)
			}
			p.invalid = true
			rep.Invalid = append(rep.Invalid, name)
			// Its files are gone with the root, and the error of a mark with them.
			if err := r.mark(ctx, p, ""); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("registry: remove %s: %w", name, err)
		}
		r.dropPub(name)
		rep.Removed = append(rep.Removed, name)
	}

	if !incremental {
		// An incremental sync replaced skills in place: same units, same indexes.
		r.units = make(map[string]int, len(skills))
		for i, s := range skills {
			r.units[unit(s)] = i
		}
	}
	r.skills = skills
	r.diags = diags
	rep.Loaded = slices.Clone(r.names)
	sort.Strings(rep.Published)
	r.snap.Store(r.snapshot(diags))
	r.syncs++
	r.last = rep
	if len(rep.Published)+len(rep.Removed)+len(rep.Retry) > 0 || r.syncs == 1 {
		r.cfg.Log.Info("registry: catalog synced", "skills", len(rep.Loaded), "published", len(rep.Published),
			"removed", len(rep.Removed), "invalid", len(rep.Invalid), "problems", len(diags))
	}
	return rep, nil
}

// mark writes on p's current entry in the catalog that its files are invalid
// now, with why (their first error), or, with why "", that they are not, so that
// whoever reads the catalog — the router, which puts it in the decision's
// reasons, and so trigger --wait — knows whether the version serving is what the
// files say. Only the mark changes: the entry is read, and written back only if
// it still holds p's version (another registry may have published a newer one)
// and not yet this mark, at the revision read. A sync that finds the same error
// writes nothing.
func (r *Registry) mark(ctx context.Context, p *published, why string) error {
	if p.s.Invalid == why || p.s.Digest == "" {
		return nil
	}
	e, err := r.kv.Get(ctx, p.s.Name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil // removed meanwhile: nothing to mark
	}
	if err != nil {
		return fmt.Errorf("registry: read %s: %w", p.s.Name, err)
	}
	var cur skill.Skill
	if json.Unmarshal(e.Value(), &cur) == nil && cur.Digest == p.s.Digest && cur.Invalid != why {
		cur.Invalid = why
		value, err := json.Marshal(&cur)
		if err != nil {
			return fmt.Errorf("registry: skill %s: %w", cur.Name, err)
		}
		if _, err := r.kv.Update(ctx, cur.Name, value, e.Revision()); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil // written meanwhile: the next sync looks again
		} else if err != nil {
			return fmt.Errorf("registry: mark %s: %w", cur.Name, err)
		}
	}
	cp := *p.s
	cp.Invalid = why
	p.s = &cp
	return nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// logNew logs the diagnostics not logged before, so that a watching registry does
// not repeat every warning on every sync.
func (r *Registry) logNew(diags skill.Diagnostics) {
	now := make(map[string]bool, len(diags))
	for _, d := range diags {
		k := d.String()
		now[k] = true
		if r.logged[k] {
			continue
		}
		if r.cfg.Problems != nil {
			fmt.Fprintln(r.cfg.Problems, k)
			continue
		}
		if d.Severity == skill.SeverityError {
			r.cfg.Log.Error("registry: " + k)
		} else {
			r.cfg.Log.Warn("registry: " + k)
		}
	}
	r.logged = now
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
