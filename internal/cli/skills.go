package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

func skillsCommand(c *common, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Inspect, search and validate skills",
		Long: `skills inspects the catalog the registry publishes (list, show, search) and checks
skill files before they are published (validate, which needs no NATS server).

list, show and search ask the skillbus-registry service; when no registry answers
they read the catalog (KV bucket "skills") directly. ramp sends a share of a
skill's new runs to another kept version; rollback ends the ramp.`,
		Example: `  skillbus skills list
  skillbus skills show hello --body
  skillbus skills search "order stock"
  skillbus skills validate ./skills
  skillbus skills ramp hello 1a2b3c4d5e6f 10
  skillbus skills rollback hello`,
	}
	cmd.AddCommand(skillsList(c, stdout), skillsShow(c, stdout), skillsSearch(c, stdout), validateCommand(c, stdout),
		skillsRampCommand(c, stdout), skillsRollbackCommand(c, stdout))
	return cmd
}

// catalogSource answers from the registry service, or from the bucket when no
// registry answers.
type catalogSource struct {
	b      *bus.Bus
	client *registry.Client
}

func (c *common) catalogSource() (*catalogSource, error) {
	b, err := c.connect("skillbus-cli")
	if err != nil {
		return nil, err
	}
	return &catalogSource{b: b, client: registry.NewClient(b.Conn(), c.prefix)}, nil
}

func (cs *catalogSource) close() { cs.b.Close() }

// noService reports whether err means that no registry answers, so the bucket is the
// source.
func noService(err error) bool { return errors.Is(err, registry.ErrNoService) }

func (cs *catalogSource) kv(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := cs.b.KV(ctx, cs.b.BucketSkills())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("no registry answers and there is no %q bucket: is skillbus running there?", cs.b.BucketSkills())
	}
	return kv, err
}

// skills reads every current skill from the bucket.
func (cs *catalogSource) skills(ctx context.Context) ([]*skill.Skill, error) {
	kv, err := cs.kv(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, catalog.CurrentKeys)
	if err != nil {
		return nil, err
	}
	var skills []*skill.Skill
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		var s skill.Skill
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			return nil, fmt.Errorf("catalog entry %s: %w", k, err)
		}
		skills = append(skills, &s)
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	return skills, nil
}

func (cs *catalogSource) list(ctx context.Context) (*registry.ListResponse, error) {
	resp, err := cs.client.List(ctx)
	if !noService(err) {
		return resp, err
	}
	skills, err := cs.skills(ctx)
	if err != nil {
		return nil, err
	}
	out := &registry.ListResponse{Skills: []registry.SkillInfo{}}
	for _, s := range skills {
		out.Skills = append(out.Skills, registry.SkillInfo{
			Name: s.Name, Description: s.Description, Version: s.Version, Kind: s.Kind, Pool: s.PoolName(),
			Digest: s.Digest, Triggers: s.Triggers, TriggerPhrases: s.TriggerPhrases, Schedule: s.Schedule.Brief(), Tags: s.Tags, Source: s.Source, State: registry.StateOK,
		})
	}
	return out, nil
}

func (cs *catalogSource) get(ctx context.Context, req registry.GetRequest) (*registry.GetResponse, error) {
	resp, err := cs.client.Get(ctx, req)
	if !noService(err) {
		var se *registry.ServiceError
		if errors.As(err, &se) && se.NotFound() {
			return nil, &ExitError{Code: 1, Err: errors.New(se.Description)}
		}
		return resp, err
	}
	kv, err := cs.kv(ctx)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Watch(ctx, kv, nil)
	if err != nil {
		return nil, err
	}
	defer cat.Stop()
	s, err := cat.LookupVersion(ctx, req.Name, req.Digest)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	out := *s
	if req.Body {
		files, err := catalog.NewFiles(catalog.FilesConfig{Stores: cs.b, Bucket: catalog.FilesBucket(cs.b)})
		if err != nil {
			return nil, err
		}
		if out.Body, err = files.Body(ctx, s); err != nil {
			return nil, err
		}
	}
	resp = &registry.GetResponse{Skill: &out, Info: registry.SkillInfo{
		Name: s.Name, Description: s.Description, Version: s.Version, Kind: s.Kind, Pool: s.PoolName(),
		Digest: s.Digest, Triggers: s.Triggers, TriggerPhrases: s.TriggerPhrases, Tags: s.Tags, Source: s.Source, State: registry.StateOK,
	}}
	lister, err := kv.ListKeysFiltered(ctx, catalog.VersionKey(s.Name, "*"))
	if err != nil {
		return nil, err
	}
	cur, _ := cat.Get(s.Name)
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		_, digest, _ := catalog.ParseVersionKey(k)
		var v struct {
			Version string `json:"version"`
		}
		_ = json.Unmarshal(e.Value(), &v)
		resp.Versions = append(resp.Versions, registry.VersionInfo{Digest: digest, Version: v.Version, Published: e.Created(), Current: cur != nil && cur.Digest == digest})
	}
	sort.Slice(resp.Versions, func(i, j int) bool { return resp.Versions[i].Published.After(resp.Versions[j].Published) })
	return resp, nil
}

func (cs *catalogSource) search(ctx context.Context, req registry.SearchRequest) (*registry.SearchResponse, error) {
	resp, err := cs.client.Search(ctx, req)
	if !noService(err) {
		var se *registry.ServiceError
		if errors.As(err, &se) && se.Code == "400" {
			return nil, usage("%s", se.Description)
		}
		return resp, err
	}
	skills, err := cs.skills(ctx)
	if err != nil {
		return nil, err
	}
	res, err := registry.Search(skills, req)
	if err != nil {
		return nil, usage("%v", err)
	}
	return &registry.SearchResponse{Results: res}, nil
}

func skillsList(c *common, stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the skills in the catalog",
		Long: `list prints every skill the registry serves: name, version, kind, pool, state, triggers
and description. TRIGGERS shows a scheduled skill's schedule ("schedule @every 5s"),
the event types, then the triggers that are words or phrases, quoted ("packing
list"), which are matched in the request text only. A skill paused with 'runs pause' says so in its state, with how
many of its runs are held. A skill whose files are invalid now keeps serving its last good
version; its state is "invalid" and its problems are printed below the table, with
those of files that are no skill of the catalog.

--json prints an array of skills, each with its state and diagnostics; the phrases
are in trigger_phrases.`,
		Example: `  skillbus skills list
  skillbus skills list --json | jq '.[].name'
  skillbus skills list --json | jq '.[] | select(.state == "invalid")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := c.catalogSource()
			if err != nil {
				return err
			}
			defer cs.close()
			resp, err := cs.list(cmd.Context())
			if err != nil {
				return err
			}
			// Paused skills (runs pause) are the workers' business, not the
			// registry's: read from KV runs, when there is one.
			var paused map[string]control.PausedSkill
			if ctl, err := control.New(cmd.Context(), cs.b); err == nil {
				paused, _ = ctl.Paused(cmd.Context())
			}
			if asJSON {
				type skillState struct {
					registry.SkillInfo
					Paused *control.PausedSkill `json:"paused,omitempty"`
				}
				out := make([]skillState, 0, len(resp.Skills))
				for _, s := range resp.Skills {
					st := skillState{SkillInfo: s}
					if p, ok := paused[s.Name]; ok {
						st.Paused = &p
					}
					out = append(out, st)
				}
				return writeJSON(stdout, out)
			}
			if len(resp.Skills) == 0 {
				fmt.Fprintln(stdout, "no skills in the catalog")
			} else {
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tPOOL\tSTATE\tTRIGGERS\tDESCRIPTION")
				for _, s := range resp.Skills {
					trig := triggerColumn(s.Triggers, s.TriggerPhrases)
					if s.Schedule != "" {
						// It runs on its ticks, besides (or without) any trigger.
						trig = strings.TrimSuffix("schedule "+s.Schedule+","+trig, ",-")
					}
					state := s.State
					if p, ok := paused[s.Name]; ok {
						state += ", " + pausedNote(p)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, orDash(s.Version), s.Kind, s.Pool, state, trig, truncate(s.Description, 60))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			var problems skill.Diagnostics
			for _, s := range resp.Skills {
				problems = append(problems, s.Diagnostics...)
			}
			problems = append(problems, resp.Problems...)
			if len(problems) > 0 {
				problems.Sort()
				fmt.Fprintln(stdout, "\nproblems:")
				for _, d := range problems {
					fmt.Fprintln(stdout, "  "+d.String())
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the skills as JSON")
	return cmd
}

func skillsShow(c *common, stdout io.Writer) *cobra.Command {
	var (
		asJSON, body bool
		digest       string
	)
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one skill: metadata, triggers, steps, files and versions",
		Long: `show prints one skill as the catalog holds it: its metadata, triggers, workflow
inputs, steps and outputs, its files, the versions the registry keeps, and the
problems of its files. --body adds its instructions (the SKILL.md body), fetched
from the object store. --version shows a kept older version by its digest.`,
		Example: `  skillbus skills show hello
  skillbus skills show triage-issue --body
  skillbus skills show hello --version 3f2a9c... --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !skill.ValidName(name) {
				return usage("%q is not a skill name: lowercase letters, digits, '-' and '_'", name)
			}
			cs, err := c.catalogSource()
			if err != nil {
				return err
			}
			defer cs.close()
			resp, err := cs.get(cmd.Context(), registry.GetRequest{Name: name, Digest: digest, Body: body})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, resp)
			}
			printSkill(stdout, resp, body)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the skill, its state and versions as JSON")
	f.BoolVar(&body, "body", false, "include the instructions (SKILL.md body)")
	f.StringVar(&digest, "version", "", "digest of a kept version to show instead of the current one")
	return cmd
}

func printSkill(w io.Writer, resp *registry.GetResponse, withBody bool) {
	s, info := resp.Skill, resp.Info
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-14s %s\n", k+":", v)
		}
	}
	list := func(k string, vs []string) { line(k, strings.Join(vs, ", ")) }
	line("name", s.Name)
	line("description", s.Description)
	line("version", s.Version)
	line("kind", string(s.Kind))
	line("state", info.State)
	line("pool", s.PoolName())
	line("digest", s.Digest)
	line("source", s.Source)
	list("triggers", s.Triggers)
	line("text triggers", quoted(s.TriggerPhrases))
	list("tags", s.Tags)
	list("dependencies", s.Dependencies)
	list("allowed tools", s.AllowedTools)
	list("required", s.RequiredTools)
	line("priority", s.Priority)
	line("cost", s.CostHint)
	line("timeout", s.ExecTimeout().String())
	line("max retries", fmt.Sprint(s.Retries()))
	list("examples", s.Examples.Positive)
	// When it runs besides its triggers: flow control, decided before a run starts.
	if sc := s.Schedule; sc != nil {
		v := sc.Cron
		if sc.Timezone != "" {
			v += " (" + sc.Timezone + ")"
		}
		if sc.CatchUp != "" {
			v += ", catch_up " + sc.CatchUp
		}
		line("schedule", v)
		if tab, err := sc.Compile(); err == nil {
			// @every counts from the previous tick, which only the scheduler knows.
			if next := tab.Next(time.Now()); !next.IsZero() && !strings.HasPrefix(sc.Cron, "@every") {
				line("next tick", next.Local().Format(time.RFC3339))
			}
		}
	}
	line("filter", s.Filter)
	if s.RateLimit != nil {
		line("rate limit", s.RateLimit.String())
	}
	if s.Debounce != nil {
		line("debounce", s.Debounce.String())
	}
	if s.Batch != nil {
		line("batch", s.Batch.String())
	}
	for _, c := range s.Concurrency {
		v := fmt.Sprintf("%d at once", c.Limit)
		if c.Key != "" {
			v += " per " + c.Key
		}
		line("concurrency", v)
	}
	if s.Throttle != nil {
		line("throttle", s.Throttle.String())
	}
	for _, c := range s.CancelOn {
		line("cancel on", c.String())
	}
	line("queue priority", s.QueuePriority)
	if wf := s.Workflow; wf != nil {
		if len(wf.Inputs) > 0 {
			fmt.Fprintln(w, "\ninputs:")
			for _, in := range wf.Inputs {
				typ := in.Type
				if typ == "" {
					typ = "string"
				}
				var rules []string
				if in.Required {
					rules = append(rules, "required")
				}
				if in.Default != nil {
					d, _ := json.Marshal(in.Default)
					rules = append(rules, "default "+string(d))
				}
				if len(in.Enum) > 0 {
					e, _ := json.Marshal(in.Enum)
					rules = append(rules, "one of "+string(e))
				}
				if in.Pattern != "" {
					rules = append(rules, "matching "+strconv.Quote(in.Pattern))
				}
				if in.MaxLength > 0 {
					rules = append(rules, fmt.Sprintf("at most %d characters", in.MaxLength))
				}
				req := ""
				if len(rules) > 0 {
					req = " (" + strings.Join(rules, ", ") + ")"
				}
				if in.Description != "" {
					req += ": " + truncate(in.Description, 80)
				}
				fmt.Fprintf(w, "  %s %s%s\n", in.Name, typ, req)
			}
		}
		fmt.Fprintln(w, "\nsteps:")
		for i, st := range wf.Steps {
			what := "tool " + st.Tool
			if st.Compute != "" {
				what = "compute"
			}
			extra := ""
			if st.Condition != "" {
				extra += " if " + st.Condition
			}
			if st.Loop != "" {
				extra += " for " + st.LoopVar + " in " + st.Loop
			}
			if st.OnError != "" {
				extra += " on_error " + st.OnError
			}
			fmt.Fprintf(w, "  %d. %s (%s)%s\n", i+1, st.ID, what, extra)
		}
		if len(wf.Outputs) > 0 {
			fmt.Fprintln(w, "\noutputs:")
			for _, o := range wf.Outputs {
				fmt.Fprintf(w, "  %s: %v\n", o.Name, o.Value)
			}
		}
	}
	if len(s.Entrypoints) > 0 {
		fmt.Fprintln(w, "\nentrypoints:")
		for _, ep := range s.Entrypoints {
			fmt.Fprintf(w, "  %s: %s\n", ep.Name, strings.Join(ep.Command, " "))
		}
	}
	if len(s.Resources) > 0 {
		fmt.Fprintln(w, "\nfiles:")
		for _, r := range s.Resources {
			bin := ""
			if r.Binary {
				bin = ", binary"
			}
			fmt.Fprintf(w, "  %s (%s, %d bytes%s)\n", r.Path, r.Kind, r.Size, bin)
		}
	}
	if len(resp.Versions) > 0 {
		fmt.Fprintln(w, "\nversions:")
		for _, v := range resp.Versions {
			cur := ""
			if v.Current {
				cur = "  (current)"
			}
			d := v.Digest
			if len(d) > 12 {
				d = d[:12]
			}
			fmt.Fprintf(w, "  %s  %-10s %s%s\n", d, orDash(v.Version), v.Published.Local().Format(time.DateTime), cur)
		}
	}
	if len(info.Diagnostics) > 0 {
		fmt.Fprintln(w, "\nproblems:")
		for _, d := range info.Diagnostics {
			fmt.Fprintln(w, "  "+d.String())
		}
	}
	if withBody {
		fmt.Fprintln(w, "\n---")
		fmt.Fprint(w, strings.TrimLeft(s.Body, "\n"))
		if !strings.HasSuffix(s.Body, "\n") {
			fmt.Fprintln(w)
		}
	}
}

func skillsSearch(c *common, stdout io.Writer) *cobra.Command {
	var (
		asJSON  bool
		trigger string
		limit   int
	)
	cmd := &cobra.Command{
		Use:   "search [QUERY]",
		Short: "Search skills by text and/or trigger type",
		Long: `search finds skills whose name, tags, triggers, description, positive examples or
capabilities contain every word of QUERY (whole words, or prefixes of three letters
or more), best first. --trigger keeps the skills listening for a CloudEvent type;
NATS wildcards work on its tokens (com.github.*, com.github.>).`,
		Example: `  skillbus skills search "triage github issues"
  skillbus skills search --trigger com.example.order.created
  skillbus skills search deploy --trigger 'com.github.>' --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := registry.SearchRequest{Trigger: trigger, Limit: limit}
			if len(args) == 1 {
				req.Query = args[0]
			}
			if strings.TrimSpace(req.Query) == "" && req.Trigger == "" {
				return usage("give a QUERY, --trigger TYPE, or both")
			}
			if limit < 0 {
				return usage("--limit must be positive")
			}
			cs, err := c.catalogSource()
			if err != nil {
				return err
			}
			defer cs.close()
			resp, err := cs.search(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, resp.Results)
			}
			if len(resp.Results) == 0 {
				fmt.Fprintln(stdout, "no skill matches")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCORE\tMATCHED\tTRIGGERS\tDESCRIPTION")
			for _, r := range resp.Results {
				fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\n", r.Name, r.Score, strings.Join(r.Matched, ","), triggerColumn(r.Triggers, r.TriggerPhrases), truncate(r.Description, 60))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.StringVar(&trigger, "trigger", "", "only skills listening for this CloudEvent type (wildcards * and > allowed)")
	f.IntVar(&limit, "limit", 20, "at most this many results")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// triggerColumn is the TRIGGERS column of a table: the event types, then the
// words and phrases quoted, as many as fit in triggerWidth runes with a count of
// the others; "-" for none. The types are shown whole, as they always were.
func triggerColumn(types, phrases []string) string {
	col := strings.Join(types, ",")
	for i, p := range phrases {
		q := strconv.Quote(p)
		if col == "" {
			col = truncate(q, triggerWidth) // the first always shows, cut if it is long
			continue
		}
		if utf8.RuneCountInString(col)+1+utf8.RuneCountInString(q) > triggerWidth {
			col += fmt.Sprintf(",+%d more", len(phrases)-i)
			break
		}
		col += "," + q
	}
	return orDash(col)
}

// triggerWidth is how wide the TRIGGERS column grows with phrases.
const triggerWidth = 48

// quoted is the phrases quoted and separated by commas.
func quoted(phrases []string) string {
	q := make([]string, len(phrases))
	for i, p := range phrases {
		q[i] = strconv.Quote(p)
	}
	return strings.Join(q, ", ")
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
