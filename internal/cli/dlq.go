package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/dlq"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func dlqCommand(c *common, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect the dead-letter queue and replay its entries",
		Long: `dlq reads the dead-letter queue: jobs whose skill failed for good (retries and
fallbacks exhausted, or a fatal error), triggers the router rejected, and job messages
no worker could read. Entries are kept 30 days by default.

An entry is named by its id (the dead execution's id, or trigger.<seq>), by any
6 or more leading characters of it, or by its sequence number (SEQ in 'dlq list').

replay publishes entries again as new executions — of the skill's current version
in the catalog, so a skill fixed since runs fixed, unless --pin — and records each
replay (io.skillbus.dlq.replayed). Replaying is idempotent: an entry replayed before
is not replayed again unless --again is given.`,
		Example: `  skillbus dlq list
  skillbus dlq list --skill check-url --since 2h --json
  skillbus dlq show 3f2a9c1d
  skillbus dlq replay 3f2a9c1d
  skillbus dlq replay --skill check-url --since 1d     # every entry of the skill from the last day`,
	}
	cmd.AddCommand(dlqListCommand(c, stdout), dlqShowCommand(c, stdout), dlqReplayCommand(c, stdout))
	return cmd
}

// dlqFilter holds the selection flags list and replay share.
type dlqFilter struct {
	skill, since, id string
}

func (f *dlqFilter) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.skill, "skill", "", "only entries of this skill (_trigger: rejected triggers, _job: unreadable jobs)")
	fl.StringVar(&f.since, "since", "", "only entries written since: a duration back from now (90m, 2h, 7d) or a time (2026-11-23, 2026-11-23T10:00:00Z)")
	fl.StringVar(&f.id, "id", "", "only the entry with this id, id prefix (6 characters or more) or sequence number")
}

func (f *dlqFilter) filter() (dlq.Filter, error) {
	out := dlq.Filter{Skill: f.skill, ID: strings.TrimSpace(f.id)}
	if f.since != "" {
		t, err := dlq.ParseSince(f.since, time.Now())
		if err != nil {
			return out, usage("%v", err)
		}
		out.Since = t
	}
	if f.skill != "" {
		if err := checkDLQSkill(f.skill); err != nil {
			return out, err
		}
	}
	return out, nil
}

func checkDLQSkill(s string) error {
	if err := events.CheckToken("--skill", s); err != nil {
		return usage("%v", err)
	}
	return nil
}

// queue connects and opens the DLQ.
func (c *common) queue() (*dlq.Queue, func(), error) {
	b, err := c.connect("skillbus-cli")
	if err != nil {
		return nil, nil, err
	}
	q, err := dlq.New(dlq.Config{Bus: b, Source: "/skillbus/cli"})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return q, b.Close, nil
}

// dlqError gives the queue's errors their exit codes: an entry that is not there
// or cannot be replayed is a failed operation (1).
func dlqError(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: 1, Err: err}
}

func dlqListCommand(c *common, stdout io.Writer) *cobra.Command {
	var sel dlqFilter
	var limit int
	var after uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-letter entries, oldest first: what died, when, why, with which data",
		Example: `  skillbus dlq list
  skillbus dlq list --skill check-url --since 2h
  skillbus dlq list --json | jq '.[] | select(.class == "repairable") | .id'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usage("--limit must be at least 1")
			}
			f, err := sel.filter()
			if err != nil {
				return err
			}
			f.Limit, f.After = limit, after
			q, done, err := c.queue()
			if err != nil {
				return err
			}
			defer done()
			page, err := q.List(cmd.Context(), f)
			if err != nil {
				return dlqError(err)
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(page.Entries)
			}
			if len(page.Entries) == 0 {
				fmt.Fprintln(stdout, "no dead letters")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tID\tSKILL\tDIED\tCLASS\tSTATUS\tREASON\tDATA")
			for _, e := range page.Entries {
				skill := e.Skill
				if e.Kind != dlq.KindJob {
					skill = "(" + e.Kind + ")"
				}
				data := e.Inputs
				if len(data) == 0 {
					data = e.Data
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.ShortID(), skill, e.DiedAt.Local().Format("2006-01-02 15:04:05"),
					e.Class, status(e), truncate(e.Reason, 60), truncate(string(data), 40))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Next != 0 {
				fmt.Fprintf(stdout, "more entries: --after %d\n", page.Next)
			}
			return nil
		},
	}
	sel.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", dlq.DefaultLimit, "list at most this many entries")
	cmd.Flags().Uint64Var(&after, "after", 0, "list entries after this sequence number (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of entries")
	return cmd
}

// status is an entry's status for a table: dead, or replayed with its last replay.
func status(e *dlq.Entry) string {
	if len(e.Replays) == 0 {
		return e.Status
	}
	r := e.Replays[len(e.Replays)-1]
	s := "replayed"
	if len(e.Replays) > 1 {
		s += fmt.Sprintf(" ×%d", len(e.Replays))
	}
	return s + " (" + r.Outcome + ")"
}

func dlqShowCommand(c *common, stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a dead-letter entry whole: trigger, inputs, error, attempts, history, replays",
		Example: `  skillbus dlq show 3f2a9c1d
  skillbus dlq show 42 --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, done, err := c.queue()
			if err != nil {
				return err
			}
			defer done()
			e, err := q.Show(cmd.Context(), args[0])
			if err != nil {
				return dlqError(err)
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(e)
			}
			return printEntry(stdout, e)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the entry as JSON")
	return cmd
}

func printEntry(w io.Writer, e *dlq.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("id", "%s", e.ID)
	row("seq", "%d", e.Seq)
	row("kind", "%s", e.Kind)
	row("status", "%s", status(e))
	if e.Skill != "" {
		v := e.Version
		if e.Digest != "" {
			v += " (digest " + e.Digest[:min(12, len(e.Digest))] + ")"
		}
		row("skill", "%s %s", e.Skill, v)
	}
	row("died", "%s", e.DiedAt.Local().Format(time.RFC3339))
	if e.Class != "" {
		row("class", "%s", e.Class)
	}
	row("reason", "%s", e.Reason)
	if e.StepID != "" {
		row("step", "%s", e.StepID)
	}
	if e.Deliveries > 0 {
		unit := "deliveries"
		if e.Deliveries == 1 {
			unit = "delivery"
		}
		row("attempts", "%d %s, the last by worker %s", e.Deliveries, unit, e.Worker)
	}
	if e.ActivationID != "" {
		row("activation", "%s", e.ActivationID)
	}
	t := e.Trigger
	row("trigger", "id %q source %q type %q on %s (TRIGGERS seq %d)", t.ID, t.Source, t.Type, t.Subject, t.Seq)
	row("subject", "%s", e.Subject)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		raw  json.RawMessage
	}{{"inputs", e.Inputs}, {"trigger data", e.Data}} {
		if len(d.raw) == 0 {
			continue
		}
		var buf bytes.Buffer
		if json.Indent(&buf, d.raw, "  ", "  ") != nil {
			buf.Reset()
			buf.Write(d.raw)
		}
		fmt.Fprintf(w, "\n%s:\n  %s\n", d.name, buf.String())
	}
	if len(e.History) > 0 {
		fmt.Fprintln(w, "\nhistory (skills tried before, in order):")
		for _, a := range e.History {
			fmt.Fprintf(w, "  %s  %s  %s after %d deliveries: %s\n", a.Skill, a.ExecutionID, a.Class, a.Deliveries, a.Error)
		}
	}
	var l workflow.Log
	if len(e.Log) > 0 && json.Unmarshal(e.Log, &l) == nil && len(l.Steps) > 0 {
		fmt.Fprintln(w)
		if err := workflow.Format(w, &l); err != nil {
			return err
		}
	}
	if len(e.Replays) > 0 {
		fmt.Fprintln(w, "\nreplays:")
		for _, r := range e.Replays {
			target := r.ExecutionID
			if target == "" {
				target = "trigger " + r.TriggerID
			} else {
				target = "execution " + target
				if r.Version != "" {
					target += " of " + r.Skill + " " + r.Version
				}
				if r.Pinned {
					target += " (pinned)"
				}
			}
			fmt.Fprintf(w, "  #%d  %s by %s at %s: %s\n", r.Replay, target, r.By, r.At.Local().Format(time.RFC3339), r.Outcome)
		}
	}
	switch {
	case e.Kind == dlq.KindUnreadable:
	case len(e.Replays) > 0:
		fmt.Fprintf(w, "\nreplayed already; to replay it once more: skillbus dlq replay %s --again\n", e.ID)
	default:
		fmt.Fprintf(w, "\nreplay it: skillbus dlq replay %s\n", e.ID)
	}
	return nil
}

func dlqReplayCommand(c *common, stdout io.Writer) *cobra.Command {
	var sel dlqFilter
	var opt dlq.ReplayOptions
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "replay [ID]",
		Short: "Publish dead-letter entries again as new attempts, and record it",
		Long: `replay publishes an entry again: a job as a new execution of its skill with the
same inputs (the skill's current catalog version, unless --pin), a rejected trigger as
a new trigger that the router routes afresh. Each replay is recorded in the DLQ and on
the new execution's events as io.skillbus.dlq.replayed, with --by and the time.

The new execution's id is derived from the entry and the replay's number, so running
the same replay twice publishes it once: an entry replayed before is reported, not
replayed again. --again replays it once more (and is not idempotent across retries).

Without an ID, replay replays every entry that --skill, --since and --id select
(--all: every entry).`,
		Example: `  skillbus dlq replay 3f2a9c1d
  skillbus dlq replay 3f2a9c1d --pin            # the version that died, not the current one
  skillbus dlq replay --skill check-url --since 2h --by ada
  skillbus dlq replay trigger.812 --json`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := sel.filter()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if sel.id != "" || sel.skill != "" || sel.since != "" {
					return usage("an ID names one entry: drop --id, --skill and --since, or drop the ID to replay what they select")
				}
				f.ID = args[0]
			}
			if f.ID == "" && f.Skill == "" && f.Since.IsZero() && !all {
				return usage("name what to replay: an entry id, or --skill, --since or --id (--all replays every entry)")
			}
			if opt.By == "" {
				opt.By = whoAmI()
			}
			q, done, err := c.queue()
			if err != nil {
				return err
			}
			defer done()
			var results []dlq.Result
			if len(args) == 1 || (sel.id != "" && sel.skill == "" && sel.since == "") {
				// One entry: an unknown id is an error, not an empty selection.
				r, err := q.Replay(cmd.Context(), f.ID, opt)
				if err != nil {
					return dlqError(err)
				}
				results = []dlq.Result{{EntryID: r.EntryID, Replayed: r}}
			} else {
				results, err = q.ReplayAll(cmd.Context(), f, opt)
				if err != nil {
					return dlqError(err)
				}
			}
			failed := 0
			for _, r := range results {
				if r.Error != "" {
					failed++
				}
			}
			if asJSON {
				if err := json.NewEncoder(stdout).Encode(results); err != nil {
					return err
				}
			} else if err := printReplays(stdout, results); err != nil {
				return err
			}
			if failed > 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d entries not replayed", failed, len(results)), Quiet: asJSON}
			}
			return nil
		},
	}
	sel.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&opt.Pin, "pin", false, "run the skill version that died instead of the catalog's current one")
	fl.BoolVar(&opt.Again, "again", false, "replay entries that were replayed before once more")
	fl.StringVar(&opt.By, "by", "", "who replays, for the record (default: $USER, else the login name, else user@host)")
	fl.BoolVar(&all, "all", false, "replay every entry (with no other selection)")
	fl.BoolVar(&asJSON, "json", false, "print a JSON array of results")
	return cmd
}

func printReplays(w io.Writer, results []dlq.Result) error {
	if len(results) == 0 {
		fmt.Fprintln(w, "no dead letters selected")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTRY\tREPLAY\tNEW EXECUTION\tSKILL\tVERSION\tRESULT")
	for _, res := range results {
		r := res.Replayed
		if r == nil {
			fmt.Fprintf(tw, "%s\t\t\t\t\tnot replayed: %s\n", res.EntryID, res.Error)
			continue
		}
		target := r.ExecutionID
		if target == "" {
			target = "trigger " + r.TriggerID
		}
		v := r.Version
		if r.Pinned {
			v += " (pinned)"
		}
		result := "published"
		if r.Existing {
			result = fmt.Sprintf("replayed before by %s at %s; not published again (--again to replay once more)", r.By, r.At.Local().Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s\t#%d\t%s\t%s\t%s\t%s\n", res.EntryID, r.Replay, target, r.Skill, v, result)
	}
	return tw.Flush()
}

// usageArgs makes a wrong number of arguments a usage error (exit 2); an error
// that already is one stands.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		var xe *ExitError
		if err == nil || errors.As(err, &xe) {
			return err
		}
		return usage("%v\nRun '%s --help' for usage.", err, cmd.CommandPath())
	}
}
