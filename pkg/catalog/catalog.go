// Package catalog keeps an in-memory copy of the skill catalog (KV bucket "skills")
// current by watching the bucket, so routers and workers follow every change the
// registry publishes without a restart.
//
// The catalog holds metadata and compiled workflows only. A run pinned to an older
// version finds it with LookupVersion; bodies, scripts and references are fetched on
// demand from the object store with Files (progressive disclosure). layout.go names
// the keys and objects.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Catalog is a live view of the skills bucket. It is safe for concurrent use.
type Catalog struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	mu        sync.RWMutex
	byName    map[string]*skill.Skill // by normalised name
	byTrigger map[string][]*skill.Skill
	revision  uint64
	notify    chan struct{} // closed and replaced on every change

	watcher jetstream.KeyWatcher
	done    chan struct{}

	versions *lru[versionID, *skill.Skill] // old versions read by LookupVersion; immutable
}

type versionID struct{ name, digest string }

// versionCacheSize bounds how many old versions a catalog keeps decoded in memory.
const versionCacheSize = 256

// Watch loads the catalog and keeps following it until Stop. It returns once the
// current contents are loaded. Only the current version of each skill is followed
// (the one-token keys); kept versions are read on demand by LookupVersion.
func Watch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) (*Catalog, error) {
	if log == nil {
		log = slog.Default()
	}
	w, err := kv.Watch(context.WithoutCancel(ctx), CurrentKeys)
	if err != nil {
		return nil, fmt.Errorf("catalog: watch %s: %w", kv.Bucket(), err)
	}
	c := &Catalog{
		kv:        kv,
		log:       log,
		byName:    map[string]*skill.Skill{},
		byTrigger: map[string][]*skill.Skill{},
		notify:    make(chan struct{}),
		watcher:   w,
		done:      make(chan struct{}),
		versions:  newLRU[versionID, *skill.Skill](versionCacheSize, func(*skill.Skill) int64 { return 1 }),
	}
	ready := make(chan struct{})
	go c.run(ready)
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		c.Stop()
		return nil, ctx.Err()
	}
}

func (c *Catalog) run(ready chan struct{}) {
	defer close(c.done)
	initial := true
	for e := range c.watcher.Updates() {
		if e == nil { // end of the initial values
			if initial {
				initial = false
				close(ready)
			}
			continue
		}
		c.apply(e)
	}
	if initial {
		close(ready)
	}
}

func (c *Catalog) apply(e jetstream.KeyValueEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := e.Key()
	switch e.Operation() {
	case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
		n := skill.NormalizeName(key)
		c.unindex(c.byName[n])
		delete(c.byName, n)
	default:
		var s skill.Skill
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			c.log.Error("catalog: skipping an entry that does not decode", "key", key, "revision", e.Revision(), "err", err)
			return
		}
		n := skill.NormalizeName(s.Name)
		c.unindex(c.byName[n])
		c.byName[n] = &s
		c.index(&s)
	}
	c.revision = e.Revision()
	close(c.notify)
	c.notify = make(chan struct{})
}

// The trigger index is updated one skill at a time, copying only the lists that
// change (callers of ByTrigger may hold the old ones), so that a catalog of 10,000
// skills loads and follows edits in time linear in the changes.

func (c *Catalog) unindex(s *skill.Skill) {
	if s == nil {
		return
	}
	for _, t := range s.Triggers {
		old := c.byTrigger[t]
		ss := make([]*skill.Skill, 0, len(old))
		for _, x := range old {
			if x != s {
				ss = append(ss, x)
			}
		}
		if len(ss) == 0 {
			delete(c.byTrigger, t)
		} else {
			c.byTrigger[t] = ss
		}
	}
}

func (c *Catalog) index(s *skill.Skill) {
	for _, t := range s.Triggers {
		old := c.byTrigger[t]
		if slices.Contains(old, s) {
			continue // a trigger listed twice
		}
		i := sort.Search(len(old), func(i int) bool { return old[i].Name >= s.Name })
		ss := make([]*skill.Skill, 0, len(old)+1)
		ss = append(append(append(ss, old[:i]...), s), old[i:]...)
		c.byTrigger[t] = ss
	}
}

// Get returns the skill of that name (any case, '-' or '_').
func (c *Catalog) Get(name string) (*skill.Skill, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.byName[skill.NormalizeName(name)]
	return s, ok
}

// Lookup returns the skill of that name from memory, or, if this catalog has not
// seen it yet (it was published a moment ago), from the bucket.
func (c *Catalog) Lookup(ctx context.Context, name string) (*skill.Skill, error) {
	if s, ok := c.Get(name); ok {
		return s, nil
	}
	if !skill.ValidName(name) {
		return nil, fmt.Errorf("skill %q is not in the catalog: %w", name, ErrNotFound)
	}
	s, err := c.get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("skill %q is not in the catalog: %w", name, ErrNotFound)
	}
	return s, err
}

// LookupVersion returns the version of the skill with that digest: the version a
// run was pinned to when it was planned (events.SkillRef.Digest), even after the
// skill changed or was removed, for as long as the registry keeps it (see
// docs/registry.md). An empty digest means the current version. It fails with
// ErrVersionNotFound when the version is no longer kept, and with ErrNotFound when
// the skill never was in the catalog.
func (c *Catalog) LookupVersion(ctx context.Context, name, digest string) (*skill.Skill, error) {
	if digest == "" {
		return c.Lookup(ctx, name)
	}
	cur, curOK := c.Get(name)
	if curOK && cur.Digest == digest {
		return cur, nil
	}
	if !skill.ValidName(name) || strings.ContainsAny(digest, ".*> ") {
		return nil, fmt.Errorf("skill %q version %s: %w", name, short(digest), ErrVersionNotFound)
	}
	// Version keys use the name as published; the caller may spell it with the
	// other separator.
	exact := name
	if curOK {
		exact = cur.Name
	}
	id := versionID{exact, digest}
	if s, ok := c.versions.get(id); ok {
		return s, nil
	}
	s, err := c.get(ctx, VersionKey(exact, digest))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		// A skill published before versions were kept has its current key only.
		if cur, cerr := c.Lookup(ctx, name); cerr == nil && cur.Digest == digest {
			return cur, nil
		}
		return nil, fmt.Errorf("skill %q version %s: %w", name, short(digest), ErrVersionNotFound)
	case err != nil:
		return nil, err
	}
	// Kept in the cache: its strings may be slices of a message's data (a job
	// read in place), which they would keep alive.
	c.versions.put(versionID{strings.Clone(exact), strings.Clone(digest)}, s)
	return s, nil
}

func (c *Catalog) get(ctx context.Context, key string) (*skill.Skill, error) {
	e, err := c.kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("catalog: get %s: %w", key, err)
	}
	var s skill.Skill
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, fmt.Errorf("catalog: %s does not decode: %w", key, err)
	}
	return &s, nil
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// ByTrigger returns the skills whose triggers list the event type, by name.
func (c *Catalog) ByTrigger(typ string) []*skill.Skill {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byTrigger[typ]
}

// All returns every skill, by name.
func (c *Catalog) All() []*skill.Skill {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*skill.Skill, 0, len(c.byName))
	for _, s := range c.byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Revision is the bucket revision of the last change applied.
func (c *Catalog) Revision() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.revision
}

// Wait blocks until cond holds for the catalog or ctx ends.
func (c *Catalog) Wait(ctx context.Context, cond func(*Catalog) bool) error {
	for {
		c.mu.RLock()
		ch := c.notify
		c.mu.RUnlock()
		if cond(c) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed blocks until the catalog's revision is past after, or ctx ends.
func (c *Catalog) Changed(ctx context.Context, after uint64) error {
	return c.Wait(ctx, func(c *Catalog) bool { return c.Revision() > after })
}

// ErrNotWatching is what Ready reports once the catalog's watch has ended.
var ErrNotWatching = errors.New("catalog: no longer following the skills bucket")

// Ready reports whether the catalog is loaded and still follows its bucket: nil
// from the return of Watch (which waits for the initial load) until the watch ends
// (Stop, or the watcher closed). It is a readiness check for routers and workers.
func (c *Catalog) Ready(context.Context) error {
	select {
	case <-c.done:
		return ErrNotWatching
	default:
		return nil
	}
}

// Stop ends the watch. It is idempotent.
func (c *Catalog) Stop() {
	_ = c.watcher.Stop()
	<-c.done
}
