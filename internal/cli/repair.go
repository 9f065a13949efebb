package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/repair/service"
)

func repairCommand(c *common, getenv Env, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Review and decide repairs of skills broken by a repairable fault",
		Long: `A worker running with --repair (skillbus dev does) parks executions that fail with a
repairable fault — a misspelt key, an unknown filter, a wrong path, a parameter a tool
refused — on one repair per skill version and fault, and the repair service
('skillbus repair serve'; skillbus dev runs one) proposes a patch. A proposed patch waits here for approval unless the skill says repair: auto.
Approved, the registry publishes it as a new version of the skill and every parked
execution runs again on it; rejected (or expired), they fail as they would have.`,
		Example: `  skillbus repair list
  skillbus repair show 3f2a           # an id or a unique prefix of one
  skillbus repair approve 3f2a --by ada
  skillbus repair reject 3f2a --reason "rename the field upstream instead"`,
	}
	cmd.AddCommand(repairServeCommand(c, getenv, stderr), repairListCommand(c, stdout), repairShowCommand(c, stdout), repairDecideCommand(c, stdout, true), repairDecideCommand(c, stdout, false))
	return cmd
}

func (c *common) repairActions() (service.Actions, func(), error) {
	b, err := c.connect("skillbus-cli")
	if err != nil {
		return service.Actions{}, nil, err
	}
	return service.Actions{Bus: b}, b.Close, nil
}

func repairListCommand(c *common, stdout io.Writer) *cobra.Command {
	var asJSON bool
	var status string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List repairs, newest first",
		Example: `  skillbus repair list
  skillbus repair list --status proposed --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, done, err := c.repairActions()
			if err != nil {
				return err
			}
			defer done()
			list, err := a.List(cmd.Context(), status)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, list)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSKILL\tSTATUS\tFAULT\tBY\tEXECUTIONS\tCREATED")
			for _, r := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%d\t%s\n", r.ID[:12], r.Skill, r.Status, r.Kind, r.Name, orDash(r.By), r.Executions, r.Created.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array (id, skill, status, diff, executions, ...)")
	cmd.Flags().StringVar(&status, "status", "", "only repairs with this status: requested, proposed, approved, rejected, expired, applied, failed")
	return cmd
}

func repairShowCommand(c *common, stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a repair: its fault, its diff and the executions waiting on it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := c.repairActions()
			if err != nil {
				return err
			}
			defer done()
			r, err := a.Show(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, r)
			}
			printRepair(stdout, r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func repairDecideCommand(c *common, stdout io.Writer, approve bool) *cobra.Command {
	var by, reason string
	var asJSON bool
	use, short := "approve ID", "Approve a proposed repair: publish it and run the waiting executions on it"
	if !approve {
		use, short = "reject ID", "Reject a proposed repair: the waiting executions fail as they would have without it"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := c.repairActions()
			if err != nil {
				return err
			}
			defer done()
			if by == "" {
				by = whoAmI()
			}
			var r *service.Summary
			if approve {
				r, err = a.Approve(cmd.Context(), args[0], by)
			} else {
				r, err = a.Reject(cmd.Context(), args[0], by, reason)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, r)
			}
			verb := "approved"
			if !approve {
				verb = "rejected"
			}
			fmt.Fprintf(stdout, "repair %s of %s %s by %s; %d executions wait on it\n", r.ID, r.Skill, verb, by, r.Executions)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who decides (default: the current user)")
	if !approve {
		cmd.Flags().StringVar(&reason, "reason", "", "why")
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printRepair(w io.Writer, r *service.Summary) {
	fmt.Fprintf(w, "repair      %s\nskill       %s (version %s)\nstatus      %s\n", r.ID, r.Skill, shortDigest(r.Digest), r.Status)
	fmt.Fprintf(w, "fault       %s %q in step %s\nerror       %s\n", r.Kind, r.Name, orDash(r.Step), firstLineOf(r.Error))
	if r.By != "" {
		fmt.Fprintf(w, "proposed by %s: %s\n", r.By, r.Summary)
	}
	if !r.ExpiresAt.IsZero() && r.Status == service.StatusProposed {
		fmt.Fprintf(w, "expires     %s\n", r.ExpiresAt.Local().Format("2006-01-02 15:04:05"))
	}
	if r.Decided != "" {
		fmt.Fprintf(w, "decided by  %s %s\n", r.Decided, r.Reason)
	} else if r.Reason != "" {
		fmt.Fprintf(w, "reason      %s\n", r.Reason)
	}
	if r.NewDigest != "" {
		fmt.Fprintf(w, "new version %s\n", shortDigest(r.NewDigest))
	}
	fmt.Fprintf(w, "waiting     %d executions\n", r.Executions)
	if r.Diff != "" {
		fmt.Fprintf(w, "\n%s", r.Diff)
	}
}

func shortDigest(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
