// Package route decides which skills handle a trigger: recall, then order, then the
// activation plan. It is pure: the router process feeds it a catalog snapshot and
// publishes what it returns.
//
// Recall has two sources today: explicit invocation (the trigger subject
// skillbus.trigger.skill.<name>, or a "skill" extension attribute on the event) and
// rules (a skill whose triggers list the event's type exactly). An explicit invocation
// of a skill the catalog does not hold is an error, not a silent miss.
//
// Order: explicit first; then by priority (high, medium, low), cost hint (low first)
// and name, so a plan is deterministic. The first skill is the primary; the others,
// in order, are its fallback chain.
package route

import (
	"errors"
	"fmt"
	"sort"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Recall sources.
const (
	SourceForced = "forced"
	SourceRule   = "rule"
)

// Scores by recall source (seed 001's trigger_match component).
const (
	scoreForced = 1.0
	scoreRule   = 0.9
)

// ErrNoMatch means no skill's triggers name the event type.
var ErrNoMatch = errors.New("no skill matches")

// UnknownSkillError is an explicit invocation of a skill the catalog does not hold.
type UnknownSkillError struct{ Name string }

func (e *UnknownSkillError) Error() string {
	return fmt.Sprintf("skill %q is not in the catalog", e.Name)
}

// Catalog is what routing reads; *catalog.Catalog implements it.
type Catalog interface {
	Get(name string) (*skill.Skill, bool)
	ByTrigger(typ string) []*skill.Skill
}

// Trigger is what routing needs to know about a trigger.
type Trigger struct {
	Type  string // the CloudEvent type
	Skill string // explicitly invoked skill, if any
}

// Candidate is a recalled skill with its score.
type Candidate struct {
	Skill  *skill.Skill
	Source string
	Score  float64
}

// Route returns the candidates for t, best first. It returns ErrNoMatch or an
// *UnknownSkillError when there are none.
func Route(cat Catalog, t Trigger) ([]Candidate, error) {
	if t.Skill != "" {
		s, ok := cat.Get(t.Skill)
		if !ok {
			return nil, &UnknownSkillError{Name: t.Skill}
		}
		return []Candidate{{Skill: s, Source: SourceForced, Score: scoreForced}}, nil
	}
	matched := cat.ByTrigger(t.Type)
	if len(matched) == 0 {
		return nil, fmt.Errorf("%w event type %q", ErrNoMatch, t.Type)
	}
	out := make([]Candidate, len(matched))
	for i, s := range matched {
		out[i] = Candidate{Skill: s, Source: SourceRule, Score: scoreRule}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Skill, out[j].Skill
		if pa, pb := rank(a.Priority), rank(b.Priority); pa != pb {
			return pa < pb
		}
		if ca, cb := costRank(a.CostHint), costRank(b.CostHint); ca != cb {
			return ca < cb
		}
		return a.Name < b.Name
	})
	return out, nil
}

func rank(priority string) int {
	switch priority {
	case "high":
		return 0
	case "low":
		return 2
	default:
		return 1
	}
}

func costRank(cost string) int {
	switch cost {
	case "low":
		return 0
	case "high":
		return 2
	default:
		return 1
	}
}
