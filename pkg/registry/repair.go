package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Repairs: an approved repair's patched files are written back to the skill's
// directory, where the registry loads them like any edit, and the version they make
// names the repair in its repaired_by. A registry that loads from a read-only
// directory cannot publish repairs; the repair then fails and its executions fail
// as they would have without it.
//
// The registry trusts no caller with the files: it writes only what the repair's
// record in KV repairs approved. The record must be approved (by a person, or
// automatically for a skill with repair: auto), be of the skill and the version
// asked for, and its patch, applied again to that version's stored files, must give
// exactly the files of the request; the result must pass the registry's validation.

type pendingRepair struct{ id, base string }

// ErrSkillChanged: the skill's current version is not the one the repair patched.
var ErrSkillChanged = errors.New("registry: the skill changed since the repair was made")

// ErrRepairRefused: a request to publish a repair that its record in KV repairs
// does not approve as asked (not approved, another skill or version, other files).
var ErrRepairRefused = errors.New("registry: repair refused")

// PublishRepair writes files (a repaired copy of the version base of skill name)
// back to the skill's directory and publishes them as its new version, whose
// provenance names repairID. It returns the new version's digest and version.
// Publishing the same repair again returns the version it made.
//
// The repair's record in KV repairs must approve exactly this: status approved,
// skill name, base digest, and a patch that gives files when applied to the
// version base; otherwise it fails with ErrRepairRefused and writes nothing.
func (r *Registry) PublishRepair(ctx context.Context, name, base string, files repair.Files, repairID string) (digest, version string, err error) {
	rec, err := r.repairRecord(ctx, name, base, repairID)
	if err != nil {
		return "", "", err
	}
	r.mu.Lock()
	if err := r.init(ctx); err != nil {
		r.mu.Unlock()
		return "", "", err
	}
	p := r.pub[name]
	switch {
	case p == nil:
		r.mu.Unlock()
		return "", "", fmt.Errorf("registry: no skill %s", name)
	case p.s.RepairedBy == repairID:
		r.mu.Unlock()
		return p.s.Digest, p.s.Version, nil
	case p.s.Digest != base:
		r.mu.Unlock()
		return "", "", fmt.Errorf("%w: %s is at %s, the repair patched %s", ErrSkillChanged, name, short(p.s.Digest), short(base))
	}
	cur := p.s
	r.mu.Unlock()

	if rec.Status != service.StatusApproved {
		return "", "", fmt.Errorf("%w: repair %s of %s is %s, not approved", ErrRepairRefused, repairID, name, rec.Status)
	}
	files, err = r.approvedFiles(ctx, cur, rec, files)
	if err != nil {
		return "", "", err
	}

	r.mu.Lock()
	if p := r.pub[name]; p == nil || p.s.Digest != base {
		r.mu.Unlock()
		return "", "", fmt.Errorf("%w: %s changed while the repair was checked", ErrSkillChanged, name)
	}
	if r.repaired == nil {
		r.repaired = map[string]pendingRepair{}
	}
	r.repaired[name] = pendingRepair{id: repairID, base: base}
	r.mu.Unlock()

	var paths []string
	for rel, text := range files {
		path := filepath.Join(cur.Dir, filepath.FromSlash(rel))
		if cur.Dir == "" {
			if rel != filepath.Base(cur.Source) {
				return "", "", fmt.Errorf("registry: %s is a single-file skill; the repair names %s", name, rel)
			}
			path = cur.Source
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return "", "", fmt.Errorf("registry: repair file %q leaves the skill directory", rel)
		}
		old, err := os.ReadFile(path)
		if err != nil {
			return "", "", fmt.Errorf("registry: write back %s: %w", rel, err)
		}
		if string(old) == text {
			continue
		}
		if err := writeFile(path, []byte(text)); err != nil {
			return "", "", fmt.Errorf("registry: write back %s (the registry's skills directory must be writable to publish repairs): %w", rel, err)
		}
		paths = append(paths, path)
	}
	if len(paths) == 0 {
		paths = append(paths, cur.Source)
	}
	if _, err := r.syncPaths(ctx, paths); err != nil {
		return "", "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p = r.pub[name]
	if p == nil || p.s.Digest == base || p.invalid {
		return "", "", fmt.Errorf("registry: the repaired %s did not load as a new version", name)
	}
	return p.s.Digest, p.s.Version, nil
}

// repairRecord loads repair id's record from KV repairs and checks that it is a
// repair of version base of skill name with a patch.
func (r *Registry) repairRecord(ctx context.Context, name, base, id string) (*service.Record, error) {
	b := r.cfg.Bus
	kv, err := b.KV(ctx, b.BucketRepairs())
	if err != nil {
		return nil, fmt.Errorf("registry: repair %s: %w", id, err)
	}
	rec, _, err := service.Load(ctx, kv, id)
	// The repair worker approves the record just before it asks: a replica that
	// answers reads may lag a moment behind.
	for deadline := time.Now().Add(2 * time.Second); err == nil && rec.Status == service.StatusProposed && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		rec, _, err = service.Load(ctx, kv, id)
	}
	switch {
	case errors.Is(err, service.ErrNotFound):
		return nil, fmt.Errorf("%w: no repair %s in KV %s", ErrRepairRefused, id, b.BucketRepairs())
	case err != nil:
		return nil, fmt.Errorf("registry: repair %s: %w", id, err)
	case rec.Skill != name:
		return nil, fmt.Errorf("%w: repair %s is of skill %q, not %q", ErrRepairRefused, id, rec.Skill, name)
	case rec.Diagnosis.Digest != base:
		return nil, fmt.Errorf("%w: repair %s patched version %s of %s, not %s", ErrRepairRefused, id, short(rec.Diagnosis.Digest), name, short(base))
	case rec.Patch == nil || rec.Patch.Diff == "":
		return nil, fmt.Errorf("%w: repair %s has no patch", ErrRepairRefused, id)
	}
	return rec, nil
}

// approvedFiles applies rec's patch to the stored files of version cur and
// returns them when they are the files sent, path by path and byte for byte (sent
// may leave out files the patch does not change), and when they validate.
func (r *Registry) approvedFiles(ctx context.Context, cur *skill.Skill, rec *service.Record, sent repair.Files) (repair.Files, error) {
	before, err := r.versionFiles(ctx, cur)
	if err != nil {
		return nil, fmt.Errorf("registry: repair %s: the files of %s: %w", rec.ID, cur.Ref(), err)
	}
	after, _, err := repair.Apply(before, rec.Patch.Diff)
	if err != nil {
		return nil, fmt.Errorf("%w: repair %s: its patch does not apply to %s: %v", ErrRepairRefused, rec.ID, cur.Ref(), err)
	}
	for _, path := range sent.Paths() {
		want, ok := after[path]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: repair %s: %s is not a file of %s", ErrRepairRefused, rec.ID, path, cur.Ref())
		case sent[path] != want:
			return nil, fmt.Errorf("%w: repair %s: %s differs from the approved patch's", ErrRepairRefused, rec.ID, path)
		}
	}
	changed := repair.Files{}
	for _, path := range after.Paths() {
		if after[path] == before[path] {
			continue
		}
		if _, ok := sent[path]; !ok {
			return nil, fmt.Errorf("%w: repair %s: the approved patch changes %s, which the request leaves out", ErrRepairRefused, rec.ID, path)
		}
		changed[path] = after[path]
	}
	if err := RepairValidator(r.cfg.Load)(ctx, cur.Name, after); err != nil {
		return nil, fmt.Errorf("%w: repair %s: the repaired %s does not validate: %v", ErrRepairRefused, rec.ID, cur.Name, err)
	}
	return changed, nil
}

// versionFiles reads the text files of version s that a repair may patch, from
// the object store: its SKILL.md (or single file), workflow file and resources.
func (r *Registry) versionFiles(ctx context.Context, s *skill.Skill) (repair.Files, error) {
	var names []string
	if s.Source != "" {
		names = append(names, filepath.Base(s.Source))
	}
	if s.Workflow != nil && s.Workflow.Source != "" && filepath.Base(s.Workflow.Source) != filepath.Base(s.Source) {
		names = append(names, filepath.Base(s.Workflow.Source))
	}
	for _, res := range s.Resources {
		names = append(names, res.Path)
	}
	out := repair.Files{}
	for _, n := range names {
		b, err := r.files.ReadFile(ctx, s, n)
		if err != nil {
			return nil, err
		}
		if utf8.Valid(b) {
			out[n] = string(b)
		}
	}
	return out, nil
}

// nameRepairs sets the provenance of skills whose new version a repair wrote.
func (r *Registry) nameRepairs(skills []*skill.Skill) {
	for _, s := range skills {
		if pr, ok := r.repaired[s.Name]; ok && s.Digest != pr.base {
			s.RepairedBy = pr.id
			delete(r.repaired, s.Name)
		}
	}
}

// writeFile replaces path's content atomically, keeping its mode.
func writeFile(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".repair-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// RepairValidator checks a repaired skill with the registry's full validation
// (Validate), as a directory of its own.
func RepairValidator(opts skill.LoadOptions) repair.Validator {
	return func(_ context.Context, name string, files repair.Files) error {
		resp, err := Validate(ValidateRequest{Files: files, Dir: name}, opts)
		if err != nil {
			return err
		}
		if !resp.Valid {
			var msgs []string
			for _, d := range resp.Diagnostics.Errors() {
				msgs = append(msgs, d.String())
			}
			return fmt.Errorf("%s", strings.Join(msgs, "; "))
		}
		return nil
	}
}

func (r *Registry) handleRepair(ctx context.Context, data []byte) (any, error) {
	var req RepairRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if req.Name == "" || req.Base == "" || req.RepairID == "" || len(req.Files) == 0 {
		return nil, badRequest("repair: name, base, repair_id and files are required")
	}
	digest, version, err := r.PublishRepair(ctx, req.Name, req.Base, req.Files, req.RepairID)
	if err != nil {
		if errors.Is(err, ErrRepairRefused) {
			r.cfg.Log.Warn("registry: repair refused", "skill", req.Name, "repair", req.RepairID, "err", err)
			return nil, badRequest("%v", err)
		}
		return nil, err
	}
	return &RepairResponse{Digest: digest, Version: version}, nil
}

// PublishRepair asks the registry to publish an approved repair (see
// Registry.PublishRepair); *Client is a repair service's Publisher.
func (c *Client) PublishRepair(ctx context.Context, name, base string, files repair.Files, repairID string) (string, string, error) {
	var out RepairResponse
	if err := c.call(ctx, EndpointRepair, RepairRequest{Name: name, Base: base, Files: files, RepairID: repairID}, &out); err != nil {
		return "", "", err
	}
	return out.Digest, out.Version, nil
}
