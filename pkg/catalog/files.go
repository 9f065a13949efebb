package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/skill"
)

// DefaultFilesCache is how many bytes of skill files a Files keeps in memory when
// FilesConfig leaves it zero.
const DefaultFilesCache = 32 << 20

// ObjectStores opens an object store that exists: a *bus.Bus is one, and so is a
// jetstream.JetStream.
type ObjectStores interface {
	ObjectStore(ctx context.Context, bucket string) (jetstream.ObjectStore, error)
}

// FilesConfig configures a Files.
type FilesConfig struct {
	// Stores opens the object store (a *bus.Bus, or a jetstream.JetStream);
	// required.
	Stores ObjectStores
	// Bucket is the object store; default "skill-files" (see FilesBucket for
	// another prefix).
	Bucket string
	// CacheBytes bounds the in-memory cache of fetched files; default
	// DefaultFilesCache. A file larger than the whole cache is never cached.
	CacheBytes int64
}

// Files reads the bodies and resource files of catalog skills from the object store
// on demand (progressive disclosure), keeping recently read ones in a bounded cache.
// A version's files never change, so the cache is never stale. It is safe for
// concurrent use.
type Files struct {
	cfg   FilesConfig
	mu    sync.Mutex
	obs   jetstream.ObjectStore // opened on first use: the registry may create it later
	cache *lru[string, []byte]
}

// NewFiles returns a Files reading from cfg.Bucket.
func NewFiles(cfg FilesConfig) (*Files, error) {
	if cfg.Stores == nil {
		return nil, errors.New("catalog: FilesConfig.Stores is required")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = "skill-files"
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultFilesCache
	}
	return &Files{cfg: cfg, cache: newLRU[string, []byte](cfg.CacheBytes, func(b []byte) int64 { return int64(len(b)) + 64 })}, nil
}

func (f *Files) store(ctx context.Context) (jetstream.ObjectStore, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.obs != nil {
		return f.obs, nil
	}
	obs, err := f.cfg.Stores.ObjectStore(ctx, f.cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("catalog: object store %s: %w", f.cfg.Bucket, err)
	}
	f.obs = obs
	return obs, nil
}

// Body returns the instructions of s: its SKILL.md body. A skill without a SKILL.md
// has none (""). It fails with ErrVersionNotFound when the version's files are no
// longer kept.
func (f *Files) Body(ctx context.Context, s *skill.Skill) (string, error) {
	if s.Body != "" || s.BodyLine == 0 {
		return s.Body, nil
	}
	b, err := f.fetch(ctx, s, BodyFile)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("body of %s: %w", s.Ref(), ErrVersionNotFound)
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ReadFile returns one file of s, by its slash-separated path relative to the skill
// directory: a resource (scripts/lint.sh, references/guide.md, assets/logo.png) or
// the skill's own SKILL.md or skill.yaml (for a single-file skill, its file name).
// It fails with ErrFileNotFound for a path that is not a file of the skill, and
// ErrVersionNotFound when the version's files are no longer kept. Resource contents
// are checked against their sha256.
func (f *Files) ReadFile(ctx context.Context, s *skill.Skill, name string) ([]byte, error) {
	clean := path.Clean(name)
	if name == "" || clean != name || path.IsAbs(name) || !filepath.IsLocal(filepath.FromSlash(name)) || name[0] == '.' {
		return nil, fmt.Errorf("%s: %q: %w", s.Ref(), name, ErrFileNotFound)
	}
	var res *skill.Resource
	for i := range s.Resources {
		if s.Resources[i].Path == name {
			res = &s.Resources[i]
		}
	}
	listed := res != nil || name == mainFile(s.Source) || s.Workflow != nil && name == mainFile(s.Workflow.Source)
	b, err := f.fetch(ctx, s, name)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound) && listed:
		return nil, fmt.Errorf("%s: %s: %w", s.Ref(), name, ErrVersionNotFound)
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, fmt.Errorf("%s: %s: %w", s.Ref(), name, ErrFileNotFound)
	case err != nil:
		return nil, err
	}
	if res != nil && res.SHA256 != "" {
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != res.SHA256 {
			return nil, fmt.Errorf("catalog: %s: %s does not match its sha256 in the catalog", s.Ref(), name)
		}
	}
	return b, nil
}

func mainFile(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Base(p)
}

func (f *Files) fetch(ctx context.Context, s *skill.Skill, rel string) ([]byte, error) {
	if s.Digest == "" {
		return nil, fmt.Errorf("catalog: skill %s has no digest, so no stored files", s.Name)
	}
	key := ObjectName(s.Name, s.Digest, rel)
	if b, ok := f.cache.get(key); ok {
		return b, nil
	}
	obs, err := f.store(ctx)
	if err != nil {
		return nil, err
	}
	b, err := obs.GetBytes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("catalog: object %s: %w", key, err)
	}
	f.cache.put(key, b)
	return b, nil
}

// Cached reports how many files and bytes the cache holds.
func (f *Files) Cached() (files int, bytes int64) { return f.cache.size() }
