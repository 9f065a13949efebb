package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// selectorFlags are the routing knobs `route` and `route eval` share.
type selectorFlags struct {
	skills    []string
	threshold float64
	maxActive int
	generic   string
	weights   string
}

func (s *selectorFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&s.skills, "skills", nil, "a skills directory to route against, offline (repeatable)")
	f.Float64Var(&s.threshold, "threshold", selector.DefaultThreshold, "score a skill needs to be selected")
	f.IntVar(&s.maxActive, "max-active", 3, "most skills a plan selects (primary, parallel partners, fallbacks)")
	f.StringVar(&s.generic, "generic", "", "a skill appended to every fallback chain")
	f.StringVar(&s.weights, "weights", "", "score weights, e.g. intent=.4,trigger=.2,success=.15,context=.1,cost=.1,conflict=.05 (unnamed ones keep their default); or a file 'skillbus route fit' wrote")
}

func (s *selectorFlags) config() (selector.Config, error) {
	cfg := selector.Config{Threshold: s.threshold, MaxActive: s.maxActive, Generic: s.generic}
	if s.threshold <= 0 || s.threshold > 1 {
		return cfg, usage("--threshold %v: want a number in (0, 1]", s.threshold)
	}
	if s.maxActive < 1 {
		return cfg, usage("--max-active %d: want at least 1", s.maxActive)
	}
	if spec := strings.TrimSpace(s.weights); spec != "" && !strings.Contains(spec, "=") {
		f, err := os.Open(spec)
		if err != nil {
			return cfg, usage("--weights %s: %v (give name=number pairs, or a file 'skillbus route fit' wrote)", spec, unwrapPath(err))
		}
		defer f.Close()
		fitted, err := selector.ReadFitted(f, spec)
		if err != nil {
			return cfg, usage("--weights: %v", err)
		}
		return fitted.Apply(cfg), nil
	}
	w, err := parseWeights(s.weights)
	if err != nil {
		return cfg, usage("--weights: %v", err)
	}
	cfg.Weights = w
	return cfg, nil
}

// parseWeights reads "intent=.4,trigger=.2"; names not given keep their default.
func parseWeights(spec string) (selector.ScoreWeights, error) {
	w := selector.DefaultScoreWeights
	if strings.TrimSpace(spec) == "" {
		return w, nil
	}
	fields := map[string]*float64{"intent": &w.Intent, "trigger": &w.Trigger, "success": &w.Success, "context": &w.Context, "cost": &w.Cost, "conflict": &w.Conflict}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return w, fmt.Errorf("%q is not name=number", part)
		}
		p := fields[strings.TrimSpace(k)]
		if p == nil {
			return w, fmt.Errorf("unknown weight %q; the weights are intent, trigger, success, context, cost, conflict", k)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return w, fmt.Errorf("weight %s=%q: want a number in [0, 1]", k, v)
		}
		*p = f
	}
	return w, nil
}

// loadSelector loads the skill directories into a selector. An invalid skill is
// skipped with a warning on warn, as the registry skips it; the rest are routed.
func loadSelector(dirs []string, cfg selector.Config, warn io.Writer) (*selector.Selector, []*skill.Skill, error) {
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, nil, usage("--skills %s: %v", d, unwrapPath(err))
		}
	}
	cat, ds := skill.Discover(dirs...)
	bad := map[string]bool{}
	if ds.HasErrors() {
		for _, d := range ds {
			if d.Severity == skill.SeverityError {
				bad[d.File] = true
				fmt.Fprintf(warn, "warning: skipping an invalid skill: %s\n", d.String())
			}
		}
		fmt.Fprintf(warn, "warning: %d invalid skill file(s) skipped; routing over the %d valid skills ('skillbus skills validate' shows all)\n", len(bad), len(cat.Skills))
	}
	if len(cat.Skills) == 0 {
		return nil, nil, usage("no valid skills found in %s", strings.Join(dirs, ", "))
	}
	// Warnings say how a skill that is routed was read ("description holds ': '...
	// read as the text"): the first few in full, then how many more.
	const shown = 3
	n := 0
	for _, d := range ds {
		if d.Severity != skill.SeverityWarning || bad[d.File] {
			continue
		}
		if n++; n <= shown {
			fmt.Fprintln(warn, d.String())
		}
	}
	if n > shown {
		fmt.Fprintf(warn, "warning: %d more warnings ('skillbus skills validate' shows all)\n", n-shown)
	}
	sel := selector.New(cfg)
	sel.Sync(cat.Skills)
	return sel, cat.Skills, nil
}

func routeCommand(c *common, stdout io.Writer) *cobra.Command {
	var (
		sf            selectorFlags
		typ, data     string
		asJSON, expl  bool
		timeout       time.Duration
		textFieldList []string
	)
	cmd := &cobra.Command{
		Use:   "route [TEXT]",
		Short: "Show which skills a request would activate, and why",
		Long: `route decides the activation plan of a request with the router's own code: the
primary skill, its fallback chain, parallel groups, and every recalled candidate with
its source, score components and the reason it was or wasn't chosen.

With --skills it runs offline on skill directories (no success history, every pool
taken as served). Without --skills it asks the live router over NATS (--nats-url), which
adds its live success rates and worker availability.

The request is TEXT, or the text field of --data (query, text, message or prompt),
with an optional CloudEvent --type. TEXT alone is routed as a client sends it,
io.skillbus.request with data {"query": TEXT}: a skill whose inputs would refuse that
data is kept out, with the reason. Exit status: 0 with a plan, 3 when no skill passes
the threshold or the one that does is kept out, 2 on bad usage.`,
		Example: `  skillbus route --skills ./skills "summarize this pdf"
  skillbus route --skills ./skills --type com.github.push --data @push.json --json
  skillbus route --explain "deploy to staging"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.TrimSpace(strings.Join(args, " "))
			req := selector.Request{Type: typ, Text: text}
			// As a trigger's: data that is not an object is {"data": v} to the
			// selector and the skill, v to a filter.
			var raw json.RawMessage
			var fdata any
			if data != "" {
				var err error
				if raw, err = readData(data, cmd.InOrStdin()); err != nil {
					return err
				}
				if req.Data, fdata, err = router.RequestData(raw); err != nil {
					return usage("--data: %v", err)
				}
				if req.Text == "" {
					req.Text = selector.TextOf(raw, textFieldList)
				}
			}
			if req.Text == "" && req.Type == "" {
				return usage("give the request: TEXT, --data with a text field, or --type")
			}
			if data == "" && text != "" && (req.Type == "" || req.Type == selector.RequestType) && len(sf.skills) > 0 {
				// TEXT alone is the request a client sends as io.skillbus.request,
				// its text in the first text field: the skills it reaches get that
				// data. (The live router shapes it so itself.)
				fields := textFieldList
				if len(fields) == 0 {
					fields = selector.DefaultTextFields
				}
				req.Data = map[string]any{fields[0]: text}
				fdata = req.Data
			}
			var d *selector.Decision
			var err error
			if len(sf.skills) > 0 {
				cfg, cerr := sf.config()
				if cerr != nil {
					return cerr
				}
				sel, skills, lerr := loadSelector(sf.skills, cfg, cmd.ErrOrStderr())
				if lerr != nil {
					return lerr
				}
				// Filters read the request as a trigger of --type with --data.
				ev := &flow.Event{Type: req.Type, Source: "/skillbus/route", Data: fdata}
				d, err = sel.Select(req, selector.Env{Admit: router.Filters(skills, ev)})
			} else {
				d, err = routeRemote(cmd.Context(), c, req, raw, timeout)
			}
			var unknown *selector.UnknownSkillError
			if errors.As(err, &unknown) {
				return usage("%v", err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(stdout, d); err != nil {
					return err
				}
			} else {
				printDecision(stdout, d, expl)
			}
			if d.Primary == "" {
				// One word near a subcommand's name that no skill takes was
				// more likely a misspelt command than a request.
				if len(args) == 1 {
					if s := nearSubcommand(cmd, text); s != "" {
						fmt.Fprintf(cmd.ErrOrStderr(), "(%q was routed as a request; did you mean \"%s %s\"?)\n", text, cmd.CommandPath(), s)
					}
				}
				return &ExitError{Code: 3, Err: errors.New("no skill passes the threshold"), Quiet: true}
			}
			return nil
		},
	}
	// "route evl --skills S --cases C" fails on --cases, a flag of eval's: say
	// which command has it.
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		hint := ""
		if a := cmd.Flags().Args(); len(a) > 0 {
			if s := nearSubcommand(cmd, a[0]); s != "" {
				hint = fmt.Sprintf(" (did you mean \"%s %s\"?)", cmd.CommandPath(), s)
			}
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("%w%s\nRun '%s --help' for usage.", err, hint, cmd.CommandPath())}
	})
	sf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "the trigger's CloudEvent type")
	f.StringVar(&data, "data", "", "the trigger's data: JSON, or @file")
	f.BoolVar(&asJSON, "json", false, "print the decision as one JSON object")
	f.BoolVar(&expl, "explain", false, "print every candidate's score components and reason")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the live router")
	f.StringSliceVar(&textFieldList, "text-fields", nil, "data fields the text is taken from (default query,text,message,prompt)")
	cmd.AddCommand(routeEvalCommand(stdout), routeFitCommand(stdout))
	return cmd
}

// routeRemote asks the live router's skillbus-router service.
func routeRemote(ctx context.Context, c *common, req selector.Request, data json.RawMessage, timeout time.Duration) (*selector.Decision, error) {
	b, err := c.connect("skillbus route")
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rr := events.RouteRequest{Type: req.Type, Text: req.Text, Data: data}
	body, _ := json.Marshal(rr)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := b.Request(ctx, events.Subjects{Prefix: c.prefix}.Router(events.RouterEndpointRoute), body)
	if err != nil {
		return nil, fmt.Errorf("asking the router on %s: %w (is a router running? or route offline with --skills DIR)", c.natsURL, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		if code == "404" {
			return nil, &selector.UnknownSkillError{Name: strings.TrimPrefix(msg.Header.Get(micro.ErrorHeader), "skill ")}
		}
		return nil, fmt.Errorf("router: %s", msg.Header.Get(micro.ErrorHeader))
	}
	var d selector.Decision
	if err := json.Unmarshal(msg.Data, &d); err != nil {
		return nil, fmt.Errorf("router answered something that is not a decision: %w", err)
	}
	return &d, nil
}

// textFieldOf is the field a candidate's skill takes text in (selector.TextField),
// or "" when the decision does not carry the skill (a live router's answer).
func textFieldOf(c *selector.Candidate) string {
	if c.Skill == nil {
		return ""
	}
	return selector.TextField(c.Skill)
}

func printDecision(w io.Writer, d *selector.Decision, explain bool) {
	if d.Primary == "" {
		if c := d.KeptOut(); c != nil {
			fmt.Fprintf(w, "no plan: %s scores %.3f, above the threshold %.2f, but is kept out: %s\n", c.Name, c.Score, d.Threshold, c.Reason)
			if f := textFieldOf(c); f != "" && f != "query" && strings.Contains(c.Reason, "do not take the field query") {
				fmt.Fprintf(w, "  %s takes its text as %q: --data '{%q: \"...\"}' routes it as its clients send it\n", c.Name, f, f)
			}
		} else {
			fmt.Fprintf(w, "no skill passes the threshold %.2f\n", d.Threshold)
		}
	} else {
		c := d.Candidate(d.Primary)
		score := 0.0
		if c != nil {
			score = c.Score
		}
		fmt.Fprintf(w, "primary:   %s (%.3f)\n", d.Primary, score)
		if len(d.Fallback) > 0 {
			fmt.Fprintf(w, "fallback:  %s\n", strings.Join(d.Fallback, " -> "))
		}
		for _, g := range d.ParallelGroups {
			fmt.Fprintf(w, "parallel:  %s\n", strings.Join(g, " + "))
		}
		if len(d.Always) > 0 {
			fmt.Fprintf(w, "always:    %s\n", strings.Join(d.Always, ", "))
		}
		fmt.Fprintf(w, "cost:      %d\n", d.EstimatedCost)
	}
	n := len(d.Candidates)
	if !explain && n > 5 {
		n = 5
	}
	if n == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if explain {
		fmt.Fprintln(tw, "\nCANDIDATE\tSOURCE\tSCORE\tINTENT\tTRIGGER\tSUCCESS\tCONTEXT\tCOST\tCONFLICT\tSELECTED\tREASON")
	} else {
		fmt.Fprintln(tw, "\nCANDIDATE\tSOURCE\tSCORE\tSELECTED\tREASON")
	}
	for _, c := range d.Candidates[:n] {
		sel := "-"
		if c.Selected {
			sel = c.Role
		}
		if explain {
			k := c.Components
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\n", c.Name, strings.Join(c.Sources, "+"), c.Score,
				k.Intent, k.Trigger, k.Success, k.Context, k.Cost, k.Conflict, sel, c.Reason)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\t%s\n", c.Name, c.Source, c.Score, sel, c.Reason)
		}
	}
	_ = tw.Flush()
}

// nearSubcommand is the name of cmd's subcommand that word is a likely typo of
// (one edit in three letters, as skill names are suggested), or "".
func nearSubcommand(cmd *cobra.Command, word string) string {
	if len(word) < 3 || strings.ContainsAny(word, " \t") {
		return ""
	}
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	return skill.Closest(word, names)
}
