package router

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/skillbus/skillbus/events/registryapi"
	"github.com/skillbus/skillbus/pkg/skill"
)

// invalidSkill asks the registry whether a skill invoked by name is missing from the
// catalog because its files are invalid (a skill that never validated is not
// published, so the catalog cannot tell). It returns the errors to report, or false
// when the registry does not know the name or does not answer in time; only the
// rejection path pays for the request.
func (r *Router) invalidSkill(ctx context.Context, name string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := r.cfg.Bus.Request(ctx, r.cfg.Bus.Subjects.Registry(registryapi.EndpointList), []byte("{}"))
	if err != nil {
		return "", false
	}
	var list registryapi.ListResponse
	if json.Unmarshal(m.Data, &list) != nil {
		return "", false
	}
	var errs []string
	for _, d := range list.Problems {
		if d.Severity != skill.SeverityError || !namesSkill(d.File, name) {
			continue
		}
		errs = append(errs, d.String())
	}
	if len(errs) == 0 {
		return "", false
	}
	const most = 5
	more := ""
	if len(errs) > most {
		more = fmt.Sprintf(" (and %d more)", len(errs)-most)
		errs = errs[:most]
	}
	return fmt.Sprintf("skill %q is not serving: its files are invalid: %s%s; fix them, then `skillbus skills validate` says when", name, strings.Join(errs, "; "), more), true
}

// namesSkill reports whether file belongs to a skill called name: a skill directory
// of that name, or a single-file skill with that base name.
func namesSkill(file, name string) bool {
	want := skill.NormalizeName(name)
	dir := filepath.Base(filepath.Dir(file))
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	return skill.NormalizeName(dir) == want || skill.NormalizeName(base) == want
}
