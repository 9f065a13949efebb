package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Repairs: an approved repair's patched files are written back to the skill's
// directory, where the registry loads them like any edit, and the version they make
// names the repair in its repaired_by. A registry that loads from a read-only
// directory cannot publish repairs; the repair then fails and its executions fail
// as they would have without it.

type pendingRepair struct{ id, base string }

// ErrSkillChanged: the skill's current version is not the one the repair patched.
var ErrSkillChanged = errors.New("registry: the skill changed since the repair was made")

// PublishRepair writes files (a repaired copy of the version base of skill name)
// back to the skill's directory and publishes them as its new version, whose
// provenance names repairID. It returns the new version's digest and version.
// Publishing the same repair again returns the version it made.
func (r *Registry) PublishRepair(ctx context.Context, name, base string, files repair.Files, repairID string) (digest, version string, err error) {
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
