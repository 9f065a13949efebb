package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/catalog"
)

// orphanGrace is how old an object that belongs to no kept version must be before it
// is collected: younger ones may be the upload of another registry about to write
// its keys.
const orphanGrace = time.Hour

// GCReport says what a collection removed.
type GCReport struct {
	Versions []string // name@digest (12 characters) of every version collected
	Objects  int      // files deleted from the object store
}

// GC collects the versions the Retention no longer keeps, with their files, and
// files that belong to no version. It is safe to run at any time, beside syncs: it
// reads the bucket and the object store without holding up syncs, and decides under
// the registry's lock, against what is published then.
func (r *Registry) GC(ctx context.Context) (*GCReport, error) {
	r.mu.Lock()
	err := r.init(ctx)
	current := make(map[string]string, len(r.pub))
	for name, p := range r.pub {
		current[name] = p.s.Digest
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	now := r.cfg.Now()
	ret := r.cfg.Retention
	entries, err := readEntries(ctx, r.kv, catalog.VersionKeys, true)
	if err != nil {
		return nil, fmt.Errorf("registry: gc: %w", err)
	}
	byName := map[string][]jetstream.KeyValueEntry{}
	for _, e := range entries {
		if name, _, ok := catalog.ParseVersionKey(e.Key()); ok {
			byName[name] = append(byName[name], e)
		}
	}
	type candidate struct {
		id  versionID
		key string
	}
	var collect []candidate
	live := map[versionID]bool{}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vs := byName[name]
		sort.Slice(vs, func(i, j int) bool { return vs[i].Revision() > vs[j].Revision() })
		cur, published := current[name]
		var deletedAt time.Time
		if !published {
			deletedAt = r.deletedAt(ctx, name, vs[0].Created())
		}
		for i, e := range vs {
			_, digest, _ := catalog.ParseVersionKey(e.Key())
			id := versionID{name, digest}
			// A version stops being current when the next one is published, or
			// when the skill is removed.
			superseded := deletedAt
			if i > 0 {
				superseded = vs[i-1].Created()
			}
			var keep bool
			switch {
			case published && cur == digest:
				keep = true
			case i >= ret.Max:
			case published && i < ret.Keep:
				keep = true
			case published && i == 0:
				keep = true // newest, yet not current: a publish in progress elsewhere
			default:
				keep = now.Sub(superseded) < ret.For
			}
			if keep {
				live[id] = true
			} else {
				collect = append(collect, candidate{id, e.Key()})
			}
		}
	}
	objs, err := r.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, fmt.Errorf("registry: gc: list files: %w", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &GCReport{}
	dead := map[versionID]bool{}
	for _, c := range collect {
		if p := r.pub[c.id.name]; p != nil && p.s.Digest == c.id.digest {
			continue // published again meanwhile
		}
		if err := r.kv.Purge(ctx, c.key); err != nil {
			return nil, fmt.Errorf("registry: gc %s: %w", c.key, err)
		}
		delete(r.versions, c.id)
		dead[c.id] = true
		rep.Versions = append(rep.Versions, c.id.name+"@"+short(c.id.digest))
	}
	// Versions published since the listing are live too.
	for id := range r.versions {
		live[id] = true
	}
	for name, p := range r.pub {
		live[versionID{name, p.s.Digest}] = true
	}
	for _, o := range objs {
		name, rest, ok := strings.Cut(o.Name, "/")
		if !ok {
			continue
		}
		digest, _, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		id := versionID{name, digest}
		if live[id] || !dead[id] && now.Sub(o.ModTime) < orphanGrace {
			continue
		}
		if err := r.obs.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("registry: gc: delete %s: %w", o.Name, err)
		}
		rep.Objects++
	}
	if len(rep.Versions)+rep.Objects > 0 {
		r.cfg.Log.Info("registry: collected old versions", "versions", len(rep.Versions), "files", rep.Objects)
	}
	return rep, nil
}

// deletedAt is when the skill was removed from the catalog: the time of the delete
// marker on its key, or else fallback.
func (r *Registry) deletedAt(ctx context.Context, name string, fallback time.Time) time.Time {
	h, err := r.kv.History(ctx, name)
	if err != nil || len(h) == 0 {
		return fallback
	}
	last := h[len(h)-1]
	if op := last.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		return last.Created()
	}
	return fallback
}
