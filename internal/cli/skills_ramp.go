package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/control"
)

func skillsRampCommand(c *common, stdout io.Writer) *cobra.Command {
	var by string
	cmd := &cobra.Command{
		Use:   "ramp SKILL DIGEST PERCENT",
		Short: "Send a share of a skill's new runs to another of its versions",
		Long: `ramp sends PERCENT of SKILL's new runs to the version with DIGEST (a version
the registry keeps: 'skills show' lists them; at least 8 characters of its digest),
and the rest to the current version, until 'skills rollback' or another ramp.

Routers choose per activation, from a hash of its id, so a trigger delivered again
runs the version it ran the first time, and the share holds over many runs. A
plan says which version each run got and why (its primary's "ramp"), and the
registry keeps a ramped version for as long as it is ramped. PERCENT is from 0 to
100, with at most two decimals ("10", "0.5", "10%").`,
		Example: `  skillbus skills ramp send-report 1a2b3c4d5e6f 10
  skillbus skills rollback send-report`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := control.ParseRampPercent(args[2]); err != nil {
				return usage("%v", err)
			}
			ctx := cmd.Context()
			ctl, done, err := c.skillControl(ctx, args[0], &by)
			if err != nil {
				return err
			}
			defer done()
			rp, err := ctl.Ramp(ctx, args[0], args[1], args[2], control.Request{By: by, Source: "skillbus-cli"})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "ramped %s: %s of new runs to version %s (%s), the rest to the current version\n", rp.Skill, rp.Percent(), rp.Version, rp.Digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who ramps (default: $USER, else the login name, else user@host)")
	return cmd
}

func skillsRollbackCommand(c *common, stdout io.Writer) *cobra.Command {
	var by string
	cmd := &cobra.Command{
		Use:   "rollback SKILL",
		Short: "End a skill's version ramp: every new run goes to the current version",
		Long: `rollback removes SKILL's version ramp ('skills ramp'): from the moment the
routers see it (a moment after), every new run goes to the current version. Runs
already planned on the ramped version go on with it.`,
		Example: `  skillbus skills rollback send-report`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ctl, done, err := c.skillControl(ctx, args[0], &by)
			if err != nil {
				return err
			}
			defer done()
			rp, err := ctl.Rollback(ctx, args[0], control.Request{By: by, Source: "skillbus-cli"})
			if err != nil {
				return err
			}
			if rp == nil {
				fmt.Fprintf(stdout, "%s has no ramp; every new run goes to the current version\n", args[0])
				return nil
			}
			fmt.Fprintf(stdout, "rolled back %s: every new run goes to the current version (the ramp sent %s to %s)\n", args[0], rp.Percent(), rp.Version)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who rolls back (default: $USER, else the login name, else user@host)")
	return cmd
}
