package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/schedule"
)

func runsDelayedCommand(c *common, stdout io.Writer) *cobra.Command {
	var skillName string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delayed [--skill SKILL]",
		Short: "List the delayed triggers waiting to be published (trigger --at/--in), soonest first",
		Long: `delayed lists the triggers stored to be published later ('skillbus trigger --at' or
'--in', schedule.At in Go) that no router has published yet, soonest first: when
each is due, the activation it will set off, the skill it invokes or its type, and
its source and id. 'skillbus runs cancel ACTIVATION' cancels one before it is due;
'runs cancel --skill SKILL' cancels those that invoke SKILL with the rest of its runs.`,
		Example: `  skillbus runs delayed
  skillbus runs delayed --skill send-report --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if skillName != "" {
				if err := events.CheckToken("skill", skillName); err != nil {
					return usage("--skill: %v", err)
				}
			}
			ctx := cmd.Context()
			b, err := c.connect("skillbus-cli")
			if err != nil {
				return err
			}
			defer b.Close()
			list, err := delayedOf(ctx, b, skillName)
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []schedule.Pending{}
				}
				return json.NewEncoder(stdout).Encode(list)
			}
			if len(list) == 0 {
				if skillName != "" {
					fmt.Fprintf(stdout, "no delayed trigger invokes %s\n", skillName)
				} else {
					fmt.Fprintln(stdout, "no delayed triggers wait")
				}
				return nil
			}
			now := time.Now()
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DUE\tIN\tACTIVATION\tSKILL OR TYPE\tSOURCE\tID")
			for _, p := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.At.Local().Format(time.RFC3339), dueIn(p.At, now), p.ActivationID,
					delayedTarget(p), orDash(p.Source), truncate(orDash(p.ID), 40))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&skillName, "skill", "", "only the delayed triggers that invoke this skill by name")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// delayedOf lists the delayed triggers waiting, those invoking skill by name
// when it is set. A bus without the bucket (no router or registry has created it)
// has none.
func delayedOf(ctx context.Context, b *bus.Bus, skill string) ([]schedule.Pending, error) {
	all, err := schedule.List(ctx, b)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if skill == "" {
		return all, nil
	}
	var out []schedule.Pending
	for _, p := range all {
		if p.Skill == skill {
			out = append(out, p)
		}
	}
	return out, nil
}

// delayedTarget is what a delayed trigger sets off: the skill it invokes, or the
// type it is routed by.
func delayedTarget(p schedule.Pending) string {
	switch {
	case p.Skill != "":
		return p.Skill
	case p.Type != "":
		return p.Type
	}
	return "-"
}

// dueIn says how long until t: "in 1h5m", or "overdue 3s" for a trigger no router
// has published yet (none runs, or one is publishing it).
func dueIn(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d < 0 {
		return "overdue " + (-d).String()
	}
	return "in " + d.String()
}

// dueMargin is how close to its due time a cancelled delayed trigger may already
// be published: a router reads it when due by its own clock, which may be ahead.
const dueMargin = 5 * time.Second

// delayedCancelled says what cancelling p did, for runs cancel.
func delayedCancelled(p schedule.Pending, now time.Time) string {
	s := fmt.Sprintf("%s cancelled: the delayed trigger for %s (source %s, id %s), due at %s (%s), will not be published",
		p.ActivationID, delayedTarget(p), orDash(p.Source), orDash(p.ID), p.At.Local().Format(time.RFC3339), dueIn(p.At, now))
	if !p.At.After(now.Add(dueMargin)) {
		s += "; it was due or about to be, so a router (whose clock may be ahead) may have published it already (see 'runs list')"
	}
	return s
}
