package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Errors of ramps.
var (
	// ErrRampPercent: a ramp's share is not a number from 0 to 100.
	ErrRampPercent = errors.New("a ramp's percent is a number from 0 to 100, with at most two decimals")
	// ErrRampVersion: the digest names no version of the skill the registry keeps.
	ErrRampVersion = errors.New("no such version of the skill")
)

// minDigestPrefix is the shortest digest prefix a ramp accepts.
const minDigestPrefix = 8

// ParseRampPercent reads a ramp's share as people write it ("10", "10%",
// "0.5") into hundredths of a percent.
func ParseRampPercent(s string) (int, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
		return 0, fmt.Errorf("percent %q: %w", s, ErrRampPercent)
	}
	basis := math.Round(f * 100)
	if math.Abs(basis-f*100) > 1e-6 {
		return 0, fmt.Errorf("percent %q: %w", s, ErrRampPercent)
	}
	return int(basis), nil
}

// Ramp sends percent (ParseRampPercent) of the skill's new runs to the version
// with that digest (or unique digest prefix, at least 8 characters), the rest to
// the current version, until Rollback or another Ramp. Routers choose per
// activation, so every delivery of a trigger runs the same version. It returns
// the ramp written.
//
// The ramp is kept in KV runs exempt from its expiry (PutKept); the registry
// keeps a ramped version for as long as it is ramped.
func (c *Controller) Ramp(ctx context.Context, skillName, digest, percent string, r Request) (*run.Ramp, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return nil, err
	}
	basis, err := ParseRampPercent(percent)
	if err != nil {
		return nil, err
	}
	skills, err := c.b.KV(ctx, c.b.BucketSkills())
	if err != nil {
		return nil, err
	}
	cur, err := skillAt(ctx, skills, skillName)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("ramp %s: %w", skillName, catalog.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ramp %s: %w", skillName, err)
	}
	v, err := rampVersion(ctx, skills, cur, digest)
	if err != nil {
		return nil, err
	}
	if h := rampCheckedHook.Load(); h != nil {
		(*h)()
	}
	rec := run.Ramp{Skill: cur.Name, Digest: v.Digest, Version: v.Version, Basis: basis, By: r.By, At: time.Now().UTC()}
	raw, _ := json.Marshal(rec)
	key := events.SkillRampKey(cur.Name)
	rev, err := PutKept(ctx, c.b, key, raw)
	if err != nil {
		return nil, fmt.Errorf("ramp %s: %w", skillName, err)
	}
	// A collection reads the ramps just before it removes a version; one that
	// read them before this write may have removed the version since the check
	// above. Read it again, now that the ramp is there for any later reader.
	_, err = skills.Get(ctx, catalog.VersionKey(cur.Name, v.Digest))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		derr := c.runs.Delete(ctx, key, jetstream.LastRevision(rev))
		switch {
		case isWrongLastSequence(derr):
			return nil, fmt.Errorf("%s version %s: %w: the registry collected it as the ramp was written, and another command has changed the ramp since", cur.Name, short(v.Digest), ErrRampVersion)
		case derr != nil:
			return nil, fmt.Errorf("ramp %s: version %s was collected as the ramp was written, and the ramp could not be removed (roll it back: skillbus skills rollback %s): %w", cur.Name, short(v.Digest), cur.Name, derr)
		}
		return nil, fmt.Errorf("%s version %s: %w: the registry collected it as the ramp was written; the ramp was removed", cur.Name, short(v.Digest), ErrRampVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("ramp %s: read the version again: %w", skillName, err)
	}
	return &rec, nil
}

// rampCheckedHook, when set (by tests), is called by Ramp between its check that
// the version exists and its write of the ramp.
var rampCheckedHook atomic.Pointer[func()]

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// Rollback ends a skill's ramp: every new run goes to the current version. It
// returns the ramp ended, nil when there was none.
func (c *Controller) Rollback(ctx context.Context, skillName string, r Request) (*run.Ramp, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return nil, err
	}
	rp, rev, err := c.LoadRamp(ctx, skillName)
	if err != nil || rp == nil {
		return nil, err
	}
	if err := c.runs.Delete(ctx, events.SkillRampKey(skillName), jetstream.LastRevision(rev)); err != nil {
		return nil, fmt.Errorf("rollback %s: %w", skillName, err)
	}
	return rp, nil
}

// LoadRamp returns a skill's ramp and its revision, or nil.
func (c *Controller) LoadRamp(ctx context.Context, skillName string) (*run.Ramp, uint64, error) {
	e, err := c.runs.Get(ctx, events.SkillRampKey(skillName))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var rp run.Ramp
	if err := json.Unmarshal(e.Value(), &rp); err != nil {
		return nil, 0, fmt.Errorf("ramp of %s: %w", skillName, err)
	}
	return &rp, e.Revision(), nil
}

func skillAt(ctx context.Context, kv jetstream.KeyValue, key string) (*skill.Skill, error) {
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var s skill.Skill
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, fmt.Errorf("%s does not decode: %w", key, err)
	}
	return &s, nil
}

// rampVersion finds the kept version of cur a digest (or prefix) names, other
// than the current one.
func rampVersion(ctx context.Context, skills jetstream.KeyValue, cur *skill.Skill, digest string) (*skill.Skill, error) {
	digest = strings.ToLower(strings.TrimSpace(digest))
	if len(digest) < minDigestPrefix || strings.Trim(digest, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("digest %q: write the version's digest (hex, at least %d characters; skillbus skills show %s lists them): %w", digest, minDigestPrefix, cur.Name, ErrRampVersion)
	}
	if strings.HasPrefix(cur.Digest, digest) {
		return nil, fmt.Errorf("digest %s is %s's current version: ramp to another one, or roll back", digest, cur.Name)
	}
	keys, err := skills.ListKeysFiltered(ctx, catalog.VersionKey(cur.Name, "*"))
	if err != nil {
		return nil, err
	}
	var found []string
	for k := range keys.Keys() {
		if _, d, ok := catalog.ParseVersionKey(k); ok && strings.HasPrefix(d, digest) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s version %s: %w (the registry keeps the versions listed by skillbus skills show %s)", cur.Name, digest, ErrRampVersion, cur.Name)
	case 1:
		return skillAt(ctx, skills, found[0])
	}
	return nil, fmt.Errorf("digest %s names %d versions of %s: write more of it", digest, len(found), cur.Name)
}

// isWrongLastSequence says a write conditioned on a key's revision found
// another one: someone wrote the key meanwhile.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
