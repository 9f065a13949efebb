package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version describes this build: the module version, the VCS commit it was built
// from (and whether the tree had changes), and the Go version.
func version() string {
	v, commit, when, dirty := "(unknown)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	var parts []string
	if commit != "" {
		c := "commit " + commit[:min(12, len(commit))]
		if dirty {
			c += "+changes"
		}
		parts = append(parts, c)
	}
	if when != "" {
		parts = append(parts, when)
	}
	parts = append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("%s (%s)", v, strings.Join(parts, ", "))
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, the commit it was built from, and the Go version",
		Example: "  skillbus version\n  skillbus --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(stdout, "%s %s\n", cmd.Root().Name(), version())
			return err
		},
	}
}
