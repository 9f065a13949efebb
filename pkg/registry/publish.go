package registry

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/skillbus/skillbus/pkg/bus"

	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/skill"
)

// init opens the bucket and the object store (creating the store, which bus.Ensure
// does not know), and reads what the catalog holds, once.
func (r *Registry) init(ctx context.Context) error {
	if r.kv != nil {
		return nil
	}
	b := r.cfg.Bus
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	c := b.Config()
	obs, err := b.EnsureObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      catalog.FilesBucket(b),
		Description: "skillbus skill files: bodies, scripts, references and assets of every kept version",
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("registry: object store %s: %w", catalog.FilesBucket(b), err)
	}
	current, err := readEntries(ctx, kv, catalog.CurrentKeys, false)
	if err != nil {
		return fmt.Errorf("registry: read the catalog: %w", err)
	}
	r.pub, r.byUnit, r.names = map[string]*published{}, map[string]string{}, nil
	for _, e := range current {
		var s skill.Skill
		if err := json.Unmarshal(e.Value(), &s); err != nil || s.Name != e.Key() {
			// Not ours to interpret; the next sync replaces or deletes it.
			s = skill.Skill{Name: e.Key()}
		}
		r.setPub(&s)
	}
	vers, err := readEntries(ctx, kv, catalog.VersionKeys, true)
	if err != nil {
		return fmt.Errorf("registry: read the catalog's versions: %w", err)
	}
	versions := make(map[versionID]bool, len(vers))
	for _, e := range vers {
		if name, digest, ok := catalog.ParseVersionKey(e.Key()); ok {
			versions[versionID{name, digest}] = true
		}
	}
	r.kv, r.obs, r.versions = kv, obs, versions
	return nil
}

// readEntries reads the entries of the bucket matching filter, deletes left out.
func readEntries(ctx context.Context, kv jetstream.KeyValue, filter string, metaOnly bool) ([]jetstream.KeyValueEntry, error) {
	opts := []jetstream.WatchOpt{jetstream.IgnoreDeletes()}
	if metaOnly {
		opts = append(opts, jetstream.MetaOnly())
	}
	w, err := kv.WatchFiltered(ctx, []string{filter}, opts...)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watcher closed")
			}
			if e == nil {
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// file is one file of a skill, read for upload.
type file struct {
	rel  string // slash-separated, relative to the skill directory
	data []byte
}

// errChanged: a skill's files changed between loading and publishing.
var errChanged = errors.New("the skill's files changed while it was being published")

// readFiles reads the files of s from disk and checks them against its digest, so
// that what is uploaded is exactly what was validated.
func readFiles(s *skill.Skill) ([]file, error) {
	var files []file
	if s.Dir == "" {
		data, err := os.ReadFile(s.Source)
		if err != nil {
			return nil, err
		}
		files = append(files, file{rel: filepath.Base(s.Source), data: data})
	} else {
		for _, main := range []string{skill.SkillMDFile, skill.SkillYAMLFile, "skill.yml"} {
			data, err := os.ReadFile(filepath.Join(s.Dir, main))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			files = append(files, file{rel: main, data: data})
		}
		for _, res := range s.Resources {
			data, err := os.ReadFile(filepath.Join(s.Dir, filepath.FromSlash(res.Path)))
			if err != nil {
				return nil, err
			}
			files = append(files, file{rel: res.Path, data: data})
		}
	}
	if digestOf(files) != s.Digest {
		return nil, errChanged
	}
	return files, nil
}

// digestOf is a skill's content digest as package skill computes it: the sha256 of
// a manifest in the format of sha256sum, one "<sha256>  <path>" line per file,
// sorted by path.
func digestOf(files []file) string {
	lines := make([]string, len(files))
	for i, f := range files {
		sum := sha256.Sum256(f.data)
		lines[i] = hex.EncodeToString(sum[:]) + "  " + f.rel + "\n"
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	return hex.EncodeToString(sum[:])
}

// publish writes the skills to the catalog: for each version not stored yet, its
// files to the object store; then its version key and its current key. It returns
// the names published and those whose files changed meanwhile (left for the next
// sync).
func (r *Registry) publish(ctx context.Context, skills []*skill.Skill) (published, retry []string, err error) {
	if len(skills) == 0 {
		return nil, nil, nil
	}
	r.nameRepairs(skills)
	// Read and check the files of the new versions, in parallel: disk and sha256.
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, r.cfg.Concurrency)
		skip     = map[string]bool{}
		uploads  = make([][]file, len(skills))
	)
	for i, s := range skills {
		if r.versions[versionID{s.Name, s.Digest}] {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			files, err := readFiles(s)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errChanged) || errors.Is(err, os.ErrNotExist):
				skip[s.Name] = true
			case err != nil && firstErr == nil:
				firstErr = fmt.Errorf("registry: read %s: %w", s.Ref(), err)
			}
			if s.BodyLine > 0 {
				files = append(files, file{rel: catalog.BodyFile, data: []byte(s.Body)})
			}
			uploads[i] = files
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, nil, firstErr
	}

	// Files first, all acknowledged before any key names them.
	up := &uploader{r: r, batch: r.cfg.Bus.Batch(), bucket: catalog.FilesBucket(r.cfg.Bus)}
	for i, s := range skills {
		if skip[s.Name] {
			continue
		}
		for _, f := range uploads[i] {
			if err := up.put(ctx, catalog.ObjectName(s.Name, s.Digest, f.rel), f.data); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := up.batch.Wait(ctx); err != nil {
		return nil, nil, fmt.Errorf("registry: upload: %w", err)
	}

	bucket := r.kv.Bucket()
	batch := r.cfg.Bus.Batch()
	for _, s := range skills {
		if skip[s.Name] {
			retry = append(retry, s.Name)
			continue
		}
		value, err := json.Marshal(catalog.Strip(s))
		if err != nil {
			return nil, nil, fmt.Errorf("registry: skill %s: %w", s.Name, err)
		}
		// The version first: whoever sees the current key can read the version.
		batch.Put(bucket, catalog.VersionKey(s.Name, s.Digest), value)
		batch.Put(bucket, s.Name, value)
		published = append(published, s.Name)
		// Stay well inside the connection's limit of pending asynchronous publishes.
		if batch.Len() >= maxPending {
			if err := batch.Wait(ctx); err != nil {
				return nil, nil, fmt.Errorf("registry: publish: %w", err)
			}
		}
	}
	if err := batch.Wait(ctx); err != nil {
		return nil, nil, fmt.Errorf("registry: publish: %w", err)
	}
	for _, s := range skills {
		if !skip[s.Name] {
			r.versions[versionID{s.Name, s.Digest}] = true
		}
	}
	sort.Strings(retry)
	if len(retry) > 0 {
		r.cfg.Log.Info("registry: skills changed while being published; they are published on the next sync", "skills", retry)
	}
	return published, retry, nil
}

// Bounds of the asynchronous publishes in flight.
const (
	maxPending      = 4096
	maxPendingBytes = 16 << 20
	chunkSize       = 128 << 10 // the object store's default chunk size
)

// uploader writes objects in the object store's format (NATS ADR-20: chunks on
// $O.<bucket>.C.<nuid>, then the object's info on $O.<bucket>.M.<base64url(name)>
// with a subject rollup), as pipelined publishes on a Batch instead of
// jetstream.ObjectStore.Put's one round trip after another. Every name is new: a
// version's files are written once, under its digest.
type uploader struct {
	r       *Registry
	batch   *bus.Batch
	bucket  string
	pending int
	bytes   int
}

func (u *uploader) put(ctx context.Context, name string, data []byte) error {
	id := nuid.Next()
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     u.bucket,
		NUID:       id,
		Size:       uint64(len(data)),
	}
	for off := 0; off < len(data); off += chunkSize {
		if err := u.publish(ctx, &nats.Msg{Subject: "$O." + u.bucket + ".C." + id, Data: data[off:min(off+chunkSize, len(data))]}); err != nil {
			return err
		}
		info.Chunks++
	}
	sum := sha256.Sum256(data)
	info.Digest = "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	meta, err := json.Marshal(info)
	if err != nil {
		return err
	}
	m := &nats.Msg{Subject: "$O." + u.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)), Header: nats.Header{}, Data: meta}
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	return u.publish(ctx, m)
}

func (u *uploader) publish(ctx context.Context, m *nats.Msg) error {
	b := u.batch
	b.Publish(m)
	u.pending++
	u.bytes += len(m.Data)
	if u.pending >= maxPending || u.bytes >= maxPendingBytes {
		u.pending, u.bytes = 0, 0
		if err := b.Wait(ctx); err != nil {
			return fmt.Errorf("registry: upload: %w", err)
		}
	}
	return nil
}
