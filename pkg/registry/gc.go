package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	current, err := r.publishedDigests(ctx)
	if err != nil {
		return nil, err
	}
	now := r.cfg.Now()
	entries, err := readEntries(ctx, r.kv, catalog.VersionKeys, true)
	if err != nil {
		return nil, fmt.Errorf("registry: gc: %w", err)
	}
	p := gcPlan{live: map[versionID]bool{}}
	byName := versionsByName(entries)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		r.judge(ctx, &p, name, byName[name], current, now)
	}
	if err := r.keepRamped(ctx, &p); err != nil {
		return nil, fmt.Errorf("registry: gc: ramps: %w", err)
	}
	objs, err := r.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, fmt.Errorf("registry: gc: list files: %w", err)
	}
	if r.gcHook != nil {
		r.gcHook()
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &GCReport{}
	dead, err := r.purgeVersions(ctx, &p, rep)
	if err != nil {
		return nil, err
	}
	// Versions published since the listing are live too.
	for id := range r.versions {
		p.live[id] = true
	}
	for name, pub := range r.pub {
		p.live[versionID{name, pub.s.Digest}] = true
	}
	if err := r.deleteFiles(ctx, objs, p.live, dead, now, rep); err != nil {
		return nil, err
	}
	if len(rep.Versions)+rep.Objects > 0 {
		r.cfg.Log.Info("registry: collected old versions", "versions", len(rep.Versions), "files", rep.Objects)
	}
	return rep, nil
}

// publishedDigests returns the digest of every skill's published version.
func (r *Registry) publishedDigests(ctx context.Context) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.init(ctx)
	current := make(map[string]string, len(r.pub))
	for name, p := range r.pub {
		current[name] = p.s.Digest
	}
	return current, err
}

// versionsByName groups the version keys' entries by skill, newest first.
func versionsByName(entries []jetstream.KeyValueEntry) map[string][]jetstream.KeyValueEntry {
	byName := map[string][]jetstream.KeyValueEntry{}
	for _, e := range entries {
		if name, _, ok := catalog.ParseVersionKey(e.Key()); ok {
			byName[name] = append(byName[name], e)
		}
	}
	for _, vs := range byName {
		sort.Slice(vs, func(i, j int) bool { return vs[i].Revision() > vs[j].Revision() })
	}
	return byName
}

// gcPlan is what a collection decided from the listing: the versions to
// collect and those that stay.
type gcPlan struct {
	collect []gcCandidate
	live    map[versionID]bool
}

type gcCandidate struct {
	id  versionID
	key string
}

// judge decides for each version of skill name, vs newest first, whether the
// Retention keeps it; current holds the published digests.
func (r *Registry) judge(ctx context.Context, p *gcPlan, name string, vs []jetstream.KeyValueEntry, current map[string]string, now time.Time) {
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
		if r.cfg.Retention.keeps(i, published, published && cur == digest, now.Sub(superseded)) {
			p.live[id] = true
		} else {
			p.collect = append(p.collect, gcCandidate{id, e.Key()})
		}
	}
}

// keeps reports whether the Retention keeps the i-th newest version of a skill
// (published: the skill is in the catalog; current: this is its published
// version), superseded for age.
func (ret Retention) keeps(i int, published, current bool, age time.Duration) bool {
	switch {
	case current:
		return true
	case i >= ret.Max:
		return false
	case published && i < ret.Keep:
		return true
	case published && i == 0:
		return true // newest, yet not current: a publish in progress elsewhere
	}
	return age < ret.For
}

// purgeVersions purges the version keys of collect, unless a version was
// published again or ramped meanwhile, and returns those purged; p.live gets
// the ramped ones.
func (r *Registry) purgeVersions(ctx context.Context, p *gcPlan, rep *GCReport) (map[versionID]bool, error) {
	dead := map[versionID]bool{}
	ramps, err := r.rampsNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: gc: ramps: %w", err)
	}
	for _, c := range p.collect {
		if pub := r.pub[c.id.name]; pub != nil && pub.s.Digest == c.id.digest {
			continue // published again meanwhile
		}
		// Ramped since the listing: a ramp checks that its version exists
		// before it is written, maybe before this collection listed ramps.
		if ramped, err := ramps.ramped(ctx, c.id); err != nil {
			return nil, fmt.Errorf("registry: gc: ramps: %w", err)
		} else if ramped {
			p.live[c.id] = true
			continue
		}
		e, err := r.kv.Get(ctx, c.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // collected by another registry
		}
		if err != nil {
			return nil, fmt.Errorf("registry: gc %s: %w", c.key, err)
		}
		if r.gcPurgeHook != nil {
			r.gcPurgeHook(c.id.name, c.id.digest)
		}
		if err := r.kv.Purge(ctx, c.key); err != nil {
			return nil, fmt.Errorf("registry: gc %s: %w", c.key, err)
		}
		// A ramp written between the read above and the purge found the
		// version there (a ramp reads its version again after it is
		// written): read the ramps once more, and put the version back if
		// one names it now. One of the two sees the other's write.
		if ramped, err := ramps.ramped(ctx, c.id); err != nil {
			return nil, fmt.Errorf("registry: gc: ramps: %w", err)
		} else if ramped {
			if _, err := r.kv.Create(ctx, c.key, e.Value()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return nil, fmt.Errorf("registry: gc: put back %s, ramped as it was collected: %w", c.key, err)
			}
			p.live[c.id] = true
			continue
		}
		delete(r.versions, c.id)
		dead[c.id] = true
		rep.Versions = append(rep.Versions, c.id.name+"@"+short(c.id.digest))
	}
	return dead, nil
}

// deleteFiles deletes the files of collected versions, and those of no live
// version once they are older than orphanGrace.
func (r *Registry) deleteFiles(ctx context.Context, objs []*jetstream.ObjectInfo, live, dead map[versionID]bool, now time.Time, rep *GCReport) error {
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
			return fmt.Errorf("registry: gc: delete %s: %w", o.Name, err)
		}
		rep.Objects++
	}
	return nil
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
