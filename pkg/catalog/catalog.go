// Package catalog keeps an in-memory copy of the skill catalog (KV bucket "skills")
// current by watching the bucket, so routers and workers follow every change the
// registry publishes without a restart.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
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
}

// Watch loads the catalog and keeps following it until ctx ends or Stop. It returns
// once the current contents are loaded.
func Watch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) (*Catalog, error) {
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
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
		delete(c.byName, skill.NormalizeName(key))
	default:
		var s skill.Skill
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			c.log.Error("catalog: skipping an entry that does not decode", "key", key, "revision", e.Revision(), "err", err)
			return
		}
		c.byName[skill.NormalizeName(s.Name)] = &s
	}
	c.revision = e.Revision()
	c.reindex()
	close(c.notify)
	c.notify = make(chan struct{})
}

func (c *Catalog) reindex() {
	idx := make(map[string][]*skill.Skill, len(c.byTrigger))
	for _, s := range c.byName {
		for _, t := range s.Triggers {
			idx[t] = append(idx[t], s)
		}
	}
	for _, ss := range idx {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Name < ss[j].Name })
	}
	c.byTrigger = idx
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
	e, err := c.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("skill %q is not in the catalog", name)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: get %s: %w", name, err)
	}
	var s skill.Skill
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, fmt.Errorf("catalog: skill %s does not decode: %w", name, err)
	}
	return &s, nil
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

// Stop ends the watch. It is idempotent.
func (c *Catalog) Stop() {
	_ = c.watcher.Stop()
	<-c.done
}
