package cli

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/selector"
)

func routeFitCommand(stdout io.Writer) *cobra.Command {
	var (
		skills []string
		cases  []string
		out    string
	)
	cmd := &cobra.Command{
		Use:   "fit",
		Short: "Choose the keyword index's weights and the threshold on labelled requests",
		Long: `fit routes labelled requests (--cases, JSONL as for eval) with each setting of a
small grid — the name's weight against the description's (3, 1, 5), adjacent word
pairs' weight (0.5, or 0: off), BM25's b (0.75, 0.5), pseudo-relevance feedback
(on long requests only, or on every request at 0.3) and the threshold (0.55 to 0.7) —
and writes the setting with the best top-1 accuracy, then recall@5 (of equals, the
one nearest the defaults), to --out as YAML. 'skillbus route eval --weights FILE' and
'route --weights FILE' use it.

Give it requests no skill should take too ("expect": null, counted right when
rejected): without them nothing holds the threshold up, and fit warns. Fit on a
tuning half of your requests and measure on a held-out half: the figures fit
prints are on the requests it was fitted on, and overstate it.`,
		Example: `  skillbus route fit --skills ./skills --cases tune.jsonl --cases offtopic.jsonl --out weights.yaml
  skillbus route eval --skills ./skills --cases heldout.jsonl --no-examples --weights weights.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(skills) == 0 || len(cases) == 0 || out == "" {
				return usage("give --skills DIR, --cases FILE and --out FILE")
			}
			_, ss, err := loadSelector(skills, selector.Config{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			all, err := readCaseFiles(cases)
			if err != nil {
				return err
			}
			if len(all) == 0 {
				return usage("no cases in %v", cases)
			}
			if !slices.ContainsFunc(all, func(c selector.Case) bool { return c.Expect == "" }) {
				fmt.Fprintln(cmd.ErrOrStderr(), `warning: no case expects no skill ("expect": null), so nothing holds the threshold up: on requests that all expect a skill a lower one is never worse; add requests the catalog should not take`)
			}
			fitted := selector.Fit(ss, all, selector.Config{}, selector.DefaultFitGrid)
			f, err := os.Create(out)
			if err != nil {
				return usage("--out %s: %v", out, unwrapPath(err))
			}
			if err := fitted.WriteYAML(f); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "fitted on %d cases: %s\nwrote %s\n", len(all), fitted, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&skills, "skills", nil, "a skills directory (repeatable)")
	f.StringArrayVar(&cases, "cases", nil, "a JSONL file of {\"query\": ..., \"expect\": name | [names] | null} (repeatable)")
	f.StringVar(&out, "out", "", "the YAML file to write")
	return cmd
}
