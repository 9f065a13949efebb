package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

func validateCommand(c *common, stdout io.Writer) *cobra.Command {
	var (
		asJSON, strict, remote bool
		tools                  []string
	)
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check skill files like a compiler, without a server",
		Long: `validate loads the skills under each PATH — a skills directory (any layout the
registry reads), one skill directory, or one skill file — with the registry's rules,
and prints every problem like a compiler. A SKILL.md or skill.yaml stands for its
directory: the two files make one skill, checked together.

  skills/triage/skill.yaml:12:9: error: unknown step get_isue (hint: did you mean get_issue?)

The PATHs are checked together as one catalog, in order: the first definition of a
name wins, and dependencies must be among them. It needs no NATS server, so it can
gate a repository's CI: the exit code is 1 when there is an error (or, with
--strict, a warning), 0 otherwise, and 2 for a usage error such as a PATH that does
not exist.

--remote sends the files to the skillbus-registry service instead, to check them
with the registry's own version and settings.`,
		Example: `  skillbus skills validate ./skills
  skillbus skills validate .claude/skills ~/.claude/skills --json
  skillbus skills validate ./skills --known-tools http,exec,echo --strict
  skillbus skills validate ./skills/triage --remote --nats-url nats://registry:4222`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage("give at least one PATH to validate: a skills directory, a skill directory or a skill file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
				if _, err := os.Stat(p); err != nil {
					return usage("%s: %v", p, unwrapPath(err))
				}
			}
			paths := skillDirs(args)
			var resp *registry.ValidateResponse
			var err error
			if remote {
				resp, err = validateRemote(cmd, c, paths, tools)
			} else {
				resp = validateLocal(paths, tools)
			}
			if err != nil {
				return err
			}
			failed := resp.Errors > 0 || strict && resp.Warnings > 0
			resp.Valid = !failed
			if asJSON {
				if err := writeJSON(stdout, resp); err != nil {
					return err
				}
			} else {
				for _, d := range resp.Diagnostics {
					fmt.Fprintln(stdout, d.String())
				}
				fmt.Fprintf(stdout, "%s valid in %s: %s, %s\n", plural(len(resp.Skills), "skill"), strings.Join(args, ", "),
					plural(resp.Errors, "error"), plural(resp.Warnings, "warning"))
			}
			if failed {
				return &ExitError{Code: 1, Err: errors.New("skills are invalid"), Quiet: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the verdict as JSON: valid, skills, errors, warnings, diagnostics")
	f.BoolVar(&strict, "strict", false, "fail (exit 1) on warnings too")
	f.StringSliceVar(&tools, "known-tools", nil, "the tools skills may name (comma-separated); unknown ones are errors. Default: not checked")
	f.BoolVar(&remote, "remote", false, "validate with the skillbus-registry service instead of locally")
	return cmd
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// skillDirs replaces a SKILL.md or skill.yaml among the paths with its directory:
// alone, a skill.yaml lacks the name and description its SKILL.md holds, and a
// SKILL.md the workflow beside it.
func skillDirs(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		switch filepath.Base(p) {
		case skill.SkillMDFile, skill.SkillYAMLFile, "skill.yml":
			if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
				out[i] = filepath.Dir(p)
			}
		}
	}
	return out
}

// validateLocal checks the paths with package skill, as the registry would.
func validateLocal(paths, tools []string) *registry.ValidateResponse {
	// Without --known-tools, a step's tool a typo away from a built-in is a
	// warning: `tool: htp` is almost surely `http`.
	cat, ds := skill.LoadOptions{KnownTools: tools, LikelyTools: builtinTools}.Discover(paths...)
	resp := &registry.ValidateResponse{Skills: []string{}, Diagnostics: skill.Diagnostics{}}
	for _, s := range cat.Skills {
		resp.Skills = append(resp.Skills, s.Name)
	}
	resp.Diagnostics = append(resp.Diagnostics, ds...)
	if !ds.HasErrors() {
		resp.Diagnostics = append(resp.Diagnostics, routingWarnings(cat.Skills)...)
	}
	if len(cat.Skills) == 0 && !ds.HasErrors() {
		// An empty directory gates nothing: most likely the wrong PATH.
		resp.Diagnostics = append(resp.Diagnostics, skill.Diagnostic{File: strings.Join(paths, ", "), Severity: skill.SeverityError,
			Message: "no skills found", Hint: "a skill is a directory with SKILL.md or skill.yaml, or a <name>.md / <name>.yaml file"})
	}
	for _, d := range resp.Diagnostics {
		if d.Severity == skill.SeverityError {
			resp.Errors++
		} else {
			resp.Warnings++
		}
	}
	return resp
}

// validateRemote sends the files under the paths to the registry service, named
// relative to each path's parent directory.
func validateRemote(cmd *cobra.Command, c *common, paths, tools []string) (*registry.ValidateResponse, error) {
	req := registry.ValidateRequest{Files: map[string]string{}, Binary: map[string][]byte{}, KnownTools: tools}
	for _, p := range paths {
		base := filepath.Dir(filepath.Clean(p))
		err := walkFiles(p, func(path string) error {
			rel, err := filepath.Rel(base, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if _, dup := req.Files[rel]; dup {
				return fmt.Errorf("%s is given twice", rel)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if utf8.Valid(data) {
				req.Files[rel] = string(data)
			} else {
				req.Binary[rel] = data
			}
			return nil
		})
		if err != nil {
			return nil, usage("%s: %v", p, err)
		}
	}
	cs, err := c.catalogSource()
	if err != nil {
		return nil, err
	}
	defer cs.close()
	resp, err := cs.client.Validate(cmd.Context(), req)
	var se *registry.ServiceError
	if errors.As(err, &se) && se.Code == "400" {
		return nil, usage("%s", se.Description)
	}
	return resp, err
}

// walkFiles calls fn with every regular file under root, following symbolic links
// (as the registry does: a Kubernetes ConfigMap volume is all links into a hidden
// ..data directory) but each directory once, and skipping hidden names below root.
func walkFiles(root string, fn func(path string) error) error {
	seen := map[string]bool{}
	var walk func(p string, top bool) error
	walk = func(p string, top bool) error {
		if !top && strings.HasPrefix(filepath.Base(p), ".") {
			return nil
		}
		info, err := os.Stat(p) // follows links
		if err != nil {
			return err
		}
		if !info.IsDir() {
			if info.Mode().IsRegular() {
				return fn(p)
			}
			return nil
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if seen[real] {
			return nil
		}
		seen[real] = true
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := walk(filepath.Join(p, e.Name()), false); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, true)
}

// builtinTools are the tools every worker has without configuration; llm, with a
// chat model.
var builtinTools = []string{"http", "exec", "echo", "noop", "skill", "llm"}
