package registry

import (
	"path/filepath"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
)

// snapshot is the catalog as of the last sync, immutable, for the service to answer
// from without waiting for a sync in progress.
type snapshot struct {
	skills   []*skill.Skill // serving, by name
	infos    []SkillInfo    // parallel to skills
	byName   map[string]int // NormalizeName → index
	problems skill.Diagnostics
	syncedAt time.Time
}

// snapshot builds the snapshot; r.mu is held. It costs a copy of the catalog's
// infos, nothing more: the sorted names, the units and the infos are kept up to date
// as skills are published.
func (r *Registry) snapshot(diags skill.Diagnostics) *snapshot {
	// Attribute each diagnostic to the skill whose directory or file holds it.
	own := map[string]skill.Diagnostics{}
	var problems skill.Diagnostics
	for _, d := range diags {
		if name, ok := owner(r.byUnit, d.File); ok {
			own[name] = append(own[name], d)
		} else {
			problems = append(problems, d)
		}
	}
	sn := &snapshot{
		skills:   make([]*skill.Skill, len(r.names)),
		infos:    make([]SkillInfo, len(r.names)),
		byName:   make(map[string]int, len(r.names)),
		problems: problems,
		syncedAt: time.Now(),
	}
	for i, name := range r.names {
		p := r.pub[name]
		info := p.info
		if p.invalid {
			info.State = StateInvalid
		}
		if ds := own[name]; len(ds) > 0 {
			info.Diagnostics = ds
			for _, d := range ds {
				if d.Severity == skill.SeverityError {
					info.Errors++
				} else {
					info.Warnings++
				}
			}
		}
		sn.skills[i] = p.s
		sn.infos[i] = info
		sn.byName[skill.NormalizeName(name)] = i
	}
	return sn
}

func owner(byUnit map[string]string, file string) (string, bool) {
	p := filepath.Clean(file)
	for {
		if name, ok := byUnit[p]; ok {
			return name, true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", false
		}
		p = parent
	}
}

func infoOf(s *skill.Skill) SkillInfo {
	return SkillInfo{
		Name: s.Name, Description: s.Description, Version: s.Version, Kind: s.Kind, Pool: s.PoolName(),
		Digest: s.Digest, Triggers: s.Triggers, TriggerPhrases: s.TriggerPhrases, Schedule: s.Schedule.Brief(), Tags: s.Tags, Source: s.Source, State: StateOK,
	}
}

// List is the catalog as of the last sync, with the state and diagnostics of every
// skill: what the service's list endpoint answers.
func (r *Registry) List() *ListResponse {
	sn := r.snap.Load()
	out := &ListResponse{Skills: append([]SkillInfo{}, sn.infos...), Problems: sn.problems, SyncedAt: sn.syncedAt}
	return out
}
