package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/skill"
)

func skillsCommand(c *common, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Inspect the skill catalog",
		Example: `  skillbus skills list
  skillbus skills list --json`,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the skills in the catalog",
		Long:  "list prints every skill the registry has published: name, version, kind, pool, triggers and description.",
		Example: `  skillbus skills list
  skillbus skills list --json | jq '.[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := c.connect("skillbus-cli")
			if err != nil {
				return err
			}
			defer b.NC.Close()
			kv, err := b.JS.KeyValue(ctx, b.BucketSkills())
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return fmt.Errorf("no %q bucket on %s: is skillbus running there?", b.BucketSkills(), c.natsURL)
			}
			if err != nil {
				return err
			}
			lister, err := kv.ListKeys(ctx)
			if err != nil {
				return err
			}
			var skills []*skill.Skill
			for k := range lister.Keys() {
				e, err := kv.Get(ctx, k)
				if err != nil {
					continue // deleted meanwhile
				}
				var s skill.Skill
				if err := json.Unmarshal(e.Value(), &s); err != nil {
					return fmt.Errorf("catalog entry %s: %w", k, err)
				}
				skills = append(skills, &s)
			}
			sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
			if asJSON {
				if skills == nil {
					skills = []*skill.Skill{}
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(skills)
			}
			if len(skills) == 0 {
				fmt.Fprintln(stdout, "no skills in the catalog")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tPOOL\tTRIGGERS\tDESCRIPTION")
			for _, s := range skills {
				trig := strings.Join(s.Triggers, ",")
				if trig == "" {
					trig = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, orDash(s.Version), s.Kind, s.PoolName(), trig, truncate(s.Description, 60))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the skills as JSON")
	cmd.AddCommand(list)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
