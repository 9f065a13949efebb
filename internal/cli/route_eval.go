package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

func routeEvalCommand(stdout io.Writer) *cobra.Command {
	var (
		sf          selectorFlags
		cases       []string
		minAccuracy float64
		asJSON      bool
		noExamples  bool
		textField   string
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure routing quality on labelled requests",
		Long: `eval routes labelled requests offline and prints top-1 accuracy, recall@3 and @5,
no-match precision (of the requests routed to no skill, the share that no skill
should take), the share of off-topic requests rejected, the most confused pairs and
every miss — beside standard Okapi BM25 over each skill's name and description (k1 1.2,
b 0.75, lower-cased words), with and without stemming, so a catalog shows what the
router adds. It also counts, request by request, those only the router gets right and
those only BM25+stemming does, with the sign test's p: whether the difference is more
than noise. Each request is routed as a client sends it: a --cases text as
{"query": TEXT} (or the field --text-field names), a skill's example in the field
that skill takes text in (query, text, message or prompt). A skill whose inputs
would refuse that data is kept out, as the live router keeps it out, and the miss
says why.

Cases come from every skill's examples (positive: that skill must be primary, each
routed with that example left out of the skill; negative: that skill must not be)
and from --cases files, JSONL of {"query": "...", "expect": "skill" | ["skill", ...] |
null} (a list: any of them is right).

With --min-accuracy, eval exits 1 when top-1 accuracy is below it, so a skill
repository can gate its CI on routing quality. --json prints one line per case and a
last line with the summary.`,
		Example: `  skillbus route eval --skills ./skills
  skillbus route eval --skills ./skills --cases routing.jsonl --min-accuracy 0.9
  skillbus route eval --skills ./skills --cases routing.jsonl --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sf.skills) == 0 {
				return usage("give --skills DIR: the skills to evaluate")
			}
			if minAccuracy < 0 || minAccuracy > 1 {
				return usage("--min-accuracy %v: want a number in [0, 1]", minAccuracy)
			}
			if !validField(textField) {
				return usage("--text-field %q: want a field name (letters, digits, _ and -)", textField)
			}
			cfg, err := sf.config()
			if err != nil {
				return err
			}
			sel, skills, err := loadSelector(sf.skills, cfg, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var all []selector.Case
			if !noExamples {
				all = selector.ExampleCases(skills)
			}
			cs, err := readCaseFiles(cases)
			if err != nil {
				return err
			}
			for i := range cs {
				cs[i].Field = textField
			}
			for _, c := range cs {
				for _, e := range append([]string{c.Expect}, c.Any...) {
					if _, ok := sel.Get(e); e != "" && !ok {
						return usage("%s: expect %q is not a skill of %v", c.Origin, e, sf.skills)
					}
				}
			}
			all = append(all, cs...)
			if len(all) == 0 {
				return usage("no cases: the skills have no examples and no --cases file was given")
			}
			start := time.Now()
			results, sum := selector.Evaluate(sel, all, selector.Env{})
			took := time.Since(start)
			if asJSON {
				enc := json.NewEncoder(stdout)
				for _, r := range results {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				if err := enc.Encode(map[string]any{"summary": sum}); err != nil {
					return err
				}
			} else {
				printEval(stdout, results, sum, len(skills), took)
			}
			if sum.Top1 < minAccuracy {
				return &ExitError{Code: 1, Err: fmt.Errorf("top-1 accuracy %.3f is below --min-accuracy %.3f", sum.Top1, minAccuracy)}
			}
			return nil
		},
	}
	sf.register(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&cases, "cases", nil, "a JSONL file of {\"query\": ..., \"expect\": name | null} (repeatable)")
	f.Float64Var(&minAccuracy, "min-accuracy", 0, "exit 1 when top-1 accuracy is below this")
	f.BoolVar(&asJSON, "json", false, "print one JSON line per case, then the summary")
	f.BoolVar(&noExamples, "no-examples", false, "evaluate only --cases, not the skills' own examples")
	f.StringVar(&textField, "text-field", "query", "the field of the request's data each --cases text is sent in, as your clients send it (a skill's own examples go in the field it takes)")
	return cmd
}

func printEval(w io.Writer, results []selector.Result, sum selector.Summary, skills int, took time.Duration) {
	fmt.Fprintf(w, "%d cases against %d skills in %s\n\n", sum.Cases, skills, took.Round(time.Millisecond))
	fmt.Fprintf(w, "                    router   BM25     BM25+stemming\n")
	fmt.Fprintf(w, "top-1 accuracy      %.3f    %.3f    %.3f\n", sum.Top1, sum.BaselineTop1, sum.BaselineStemTop1)
	fmt.Fprintf(w, "recall@3            %.3f\n", sum.Recall3)
	fmt.Fprintf(w, "recall@5            %.3f    %.3f    %.3f\n", sum.Recall5, sum.BaselineRecall5, sum.BaselineStemRecall5)
	fmt.Fprintf(w, "no-match precision  %.3f\n", sum.NoMatchPrecision)
	if sum.OffTopic == 0 {
		fmt.Fprintf(w, "off-topic rejected  -        (no request here expects no skill)\n")
	} else {
		fmt.Fprintf(w, "off-topic rejected  %.3f    (%d requests no skill should take)\n", sum.OffTopicRejected, sum.OffTopic)
	}
	fmt.Fprintf(w, "\nBM25: Okapi, k1 %.1f, b %.2f, %s; BM25+stemming: the same, words stemmed (Snowball English)\n",
		selector.BaselineK1, selector.BaselineB, selector.BaselineTokens)
	a := sum.AgainstStem
	fmt.Fprintf(w, "\nrequest by request  only router right  only BM25+stemming right  sign test\n")
	fmt.Fprintf(w, "top-1               %-17d  %-24d  %s\n", a.Top1.Better, a.Top1.Worse, pValue(a.Top1.P))
	fmt.Fprintf(w, "recall@5            %-17d  %-24d  %s\n", a.Recall5.Better, a.Recall5.Worse, pValue(a.Recall5.P))
	fmt.Fprintf(w, "(p: how often two equally good rankers differ by as much or more)\n")
	if len(sum.Confused) > 0 {
		fmt.Fprintln(w, "\nmost confused (expected -> got):")
		for i, c := range sum.Confused {
			if i == 10 {
				break
			}
			fmt.Fprintf(w, "  %3d  %s -> %s\n", c.Count, c.Expect, c.Got)
		}
	}
	misses := 0
	for _, r := range results {
		if r.OK {
			continue
		}
		if misses == 0 {
			fmt.Fprintln(w, "\nmisses:")
		}
		misses++
		exp, got := "(none)", "(none)"
		if r.Expect != nil {
			exp = *r.Expect
		}
		if r.Primary != nil {
			got = *r.Primary
		}
		fmt.Fprintf(w, "  %q\n      expected %s, got %s  [%s]\n", r.Query, exp, got, r.Origin)
		if r.Why != "" {
			fmt.Fprintf(w, "      %s was recalled but kept out: %s\n", exp, r.Why)
		}
	}
}

func pValue(p float64) string {
	if p < 0.001 {
		return "p < 0.001"
	}
	return fmt.Sprintf("p %.3f", p)
}

// routingWarnings are warnings for skill examples that route elsewhere, and for
// skills meant to be chosen by text whose inputs would refuse a text request.
func routingWarnings(skills []*skill.Skill) skill.Diagnostics {
	return append(selector.ExampleWarnings(skills), selector.TextInputWarnings(skills)...)
}

// readCaseFiles reads the routing cases of each --cases file, in order.
func readCaseFiles(paths []string) ([]selector.Case, error) {
	var all []selector.Case
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, usage("--cases %s: %v", p, unwrapPath(err))
		}
		cs, err := selector.ReadCases(f, p)
		f.Close()
		if err != nil {
			return nil, usage("%v", err)
		}
		all = append(all, cs...)
	}
	return all, nil
}

// validField reports whether f can name a field of a request's data, as
// --text-field gives it.
func validField(f string) bool {
	if f == "" || len(f) > 64 {
		return false
	}
	for _, r := range f {
		if !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}
