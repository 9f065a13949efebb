// Package registry is the registry process: it loads skills from directories
// (package skill), publishes every valid one to the catalog (KV bucket "skills"), and
// removes from the catalog what is no longer on disk. Invalid files are reported with
// file and line; the other skills still load. Routers and workers follow the bucket
// (package catalog), so a sync reaches the whole fleet without a restart.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Config configures a Registry.
type Config struct {
	// Bus is the connection; required.
	Bus *bus.Bus
	// Roots are the directories skills are discovered in, in order: the first
	// definition of a name wins. Required.
	Roots []string
	// Log receives the registry's logs, including every diagnostic; default
	// slog.Default().
	Log *slog.Logger
}

// Registry publishes the skills found under its roots.
type Registry struct {
	cfg Config
	kv  jetstream.KeyValue
}

// New validates cfg and returns a Registry.
func New(cfg Config) (*Registry, error) {
	if cfg.Bus == nil {
		return nil, errors.New("registry: Bus is required")
	}
	if len(cfg.Roots) == 0 {
		return nil, errors.New("registry: at least one skills directory is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Registry{cfg: cfg}, nil
}

// Report is the outcome of a Sync.
type Report struct {
	Loaded      []string // every valid skill, by name
	Published   []string // skills new or changed in the catalog
	Removed     []string // skills deleted from the catalog
	Diagnostics skill.Diagnostics
}

// Sync loads every skill under the roots and makes the catalog match: new and changed
// skills are published, skills gone from disk (or now invalid with no valid
// definition) are deleted. It fails only when the bucket cannot be written.
func (r *Registry) Sync(ctx context.Context) (*Report, error) {
	if r.kv == nil {
		kv, err := r.cfg.Bus.KV(ctx, r.cfg.Bus.BucketSkills())
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		r.kv = kv
	}
	cat, diags := skill.Discover(r.cfg.Roots...)
	rep := &Report{Diagnostics: diags}
	for _, d := range diags {
		if d.Severity == skill.SeverityError {
			r.cfg.Log.Error("registry: " + d.String())
		} else {
			r.cfg.Log.Warn("registry: " + d.String())
		}
	}
	current, err := r.current(ctx)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, s := range cat.Skills {
		keep[s.Name] = true
		rep.Loaded = append(rep.Loaded, s.Name)
		if current[s.Name] == s.Digest {
			continue
		}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("registry: skill %s: %w", s.Name, err)
		}
		if _, err := r.kv.Put(ctx, s.Name, b); err != nil {
			return nil, fmt.Errorf("registry: publish %s: %w", s.Name, err)
		}
		rep.Published = append(rep.Published, s.Name)
	}
	for name := range current {
		if keep[name] {
			continue
		}
		if err := r.kv.Delete(ctx, name); err != nil {
			return nil, fmt.Errorf("registry: remove %s: %w", name, err)
		}
		rep.Removed = append(rep.Removed, name)
	}
	sort.Strings(rep.Loaded)
	sort.Strings(rep.Published)
	sort.Strings(rep.Removed)
	r.cfg.Log.Info("registry: catalog synced", "skills", len(rep.Loaded), "published", len(rep.Published), "removed", len(rep.Removed), "problems", len(diags))
	return rep, nil
}

// current returns the digest of every skill in the catalog.
func (r *Registry) current(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	lister, err := r.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: list catalog: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		e, err := r.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("registry: read %s: %w", k, err)
		}
		var s struct {
			Digest string `json:"digest"`
		}
		_ = json.Unmarshal(e.Value(), &s)
		out[k] = s.Digest
	}
	return out, nil
}
