package router

import (
	"context"
	"errors"
	"fmt"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// VersionLookup is the optional part of a SkillSource that finds a version of a
// skill by its digest, kept after the skill changed or was deleted;
// *catalog.Catalog implements it.
type VersionLookup interface {
	LookupVersion(ctx context.Context, name, digest string) (*skill.Skill, error)
}

// burstOfDeleted plans the run of a debounced burst or a batch whose skill was
// deleted after it took the run's triggers: the senders were told it runs later,
// so it runs, on the version the last of them was taken for, as a deleted
// skill's sleeping and waiting runs finish on their version. Without that
// version (a burst folded by an older router, or a version the registry no
// longer keeps) the run is rejected, so dead-lettered with its triggers' data
// and a reason that says what happened.
func (r *Router) burstOfDeleted(ctx context.Context, t *trigger) (outcome, error) {
	what := "debounced burst"
	if t.e != nil && t.e.Source == DebounceSource(t.burstOf) && len(t.e.ID) > 6 && t.e.ID[:6] == "batch-" {
		what = "batch"
	}
	lost := func(why string) (outcome, error) {
		return rejected{events.UnmatchedUnknownSkill, fmt.Sprintf(
			"skill %q was deleted while a %s of its triggers was pending, and %s: the run's triggers are kept in the dead letters",
			t.burstOf, what, why)}, nil
	}
	vl, ok := r.cfg.Catalog.(VersionLookup)
	if !ok || t.burstDigest == "" {
		return lost("the version it was taken for is not recorded")
	}
	s, err := vl.LookupVersion(ctx, t.burstOf, t.burstDigest)
	if err != nil {
		if !errors.Is(err, catalog.ErrVersionNotFound) && !errors.Is(err, catalog.ErrNotFound) {
			return nil, err // a failed read: the run is tried again
		}
		return lost(fmt.Sprintf("its version %s is no longer kept", shortDigest(&skill.Skill{Digest: t.burstDigest})))
	}
	r.cfg.Log.Info("router: running a burst or batch of a deleted skill on the version it was taken for",
		"skill", s.Name, "digest", shortDigest(s), "activation", t.actID)
	d := &selector.Decision{Primary: s.Name, Candidates: []selector.Candidate{{
		Name: s.Name, Version: s.Version, Skill: s, Source: selector.StrategyExplicit, Sources: []string{selector.StrategyExplicit},
		Score: 1, Selected: true, Role: "primary", Reason: what + " of a deleted skill, run on the version it was taken for",
	}}}
	// The burst's delegation depth, as any routed trigger's: its last trigger
	// may come from a skill's skill tool.
	depth, err := r.depthOf(ctx, t.e)
	if errors.Is(err, errBadParent) {
		return rejected{events.UnmatchedInvalid, err.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	t.depth = depth
	t.ramps = nil
	return plan(d, t, r.cfg.Bus.Subjects, func(string) (*skill.Skill, bool) { return nil, false }), nil
}
