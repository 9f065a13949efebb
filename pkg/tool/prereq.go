package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Host is what CheckPrerequisites looks at: the worker about to run a skill.
type Host struct {
	// Tools are the tools the worker can call for the skill (prerequisite
	// "tool"). Nil: none.
	Tools *Set
	// Exec is the worker's exec configuration: a "command" prerequisite is found
	// in the PATH of its BaseEnv, where exec steps look for it.
	Exec ExecConfig
	// LookupEnv reads the worker's environment (prerequisite "env"). Nil:
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Stat looks at a file (prerequisite "file"). Nil: os.Stat.
	Stat func(string) (fs.FileInfo, error)
}

// ErrPrerequisites is wrapped by CheckPrerequisites' error.
var ErrPrerequisites = errors.New("prerequisites not met")

// CheckPrerequisites reports, as one Fatal error wrapping ErrPrerequisites,
// every prerequisite of s that does not hold on h, so that the plan falls back
// to its next skill:
//
//	env: NAME      the worker's environment has NAME, not empty
//	command: NAME  NAME is an executable in the exec tool's PATH (or, with a
//	               slash, at that absolute path)
//	tool: NAME     the worker has the tool NAME
//	file: PATH     PATH exists on the worker (absolute, or relative to its
//	               working directory)
//
// It reads nothing but h, and does not run anything.
func CheckPrerequisites(s *skill.Skill, h Host) error {
	if s == nil || len(s.Prerequisites) == 0 {
		return nil
	}
	lookup, stat := h.LookupEnv, h.Stat
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if stat == nil {
		stat = os.Stat
	}
	var unmet []string
	for _, p := range s.Prerequisites {
		var problem string
		switch p.Kind {
		case skill.PrerequisiteEnv:
			if v, ok := lookup(p.Name); !ok || v == "" {
				problem = "is not set on this worker"
			}
		case skill.PrerequisiteCommand:
			env := h.Exec.BaseEnv
			if env == nil {
				env = []string{"PATH=" + DefaultPath}
			}
			if strings.Contains(p.Name, "/") && !filepath.IsAbs(p.Name) {
				problem = "is a relative path; name a command or give an absolute path"
			} else if _, err := lookPath(p.Name, env); err != nil {
				problem = "is not found in the PATH exec steps get (" + pathOf(env) + ")"
			} else if strings.Contains(p.Name, "/") {
				if fi, err := stat(p.Name); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
					problem = "is not an executable file"
				}
			}
		case skill.PrerequisiteTool:
			if _, ok := h.Tools.Lookup(p.Name); !ok {
				problem = "is not a tool of this worker (it has: " + strings.Join(h.Tools.Names(), ", ") + ")"
			}
		case skill.PrerequisiteFile:
			if _, err := stat(p.Name); err != nil {
				problem = "is not there: " + pathErrCause(err).Error()
			}
		default:
			problem = "is of an unknown kind " + string(p.Kind)
		}
		if problem != "" {
			msg := fmt.Sprintf("%s %s %s", p.Kind, p.Name, problem)
			if p.Description != "" {
				msg += " (needed " + p.Description + ")"
			}
			unmet = append(unmet, msg)
		}
	}
	if len(unmet) == 0 {
		return nil
	}
	return failure.Wrap(failure.Fatal, fmt.Errorf("skill %s cannot run on this worker: %w: %s", s.Name, ErrPrerequisites, strings.Join(unmet, "; ")))
}

func pathOf(env []string) string {
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			return p
		}
	}
	return ""
}
