package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/schedule"
)

// stateDelayed is the state runs cancel --json gives a delayed trigger it
// cancelled before a router published it.
const stateDelayed = "delayed"

func runsCancelCommand(c *common, stdout io.Writer) *cobra.Command {
	var skillName, since, by, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel EXECUTION|ACTIVATION... | --skill SKILL [--since T]",
		Short: "Cancel executions: queued ones never start, running ones stop at their next step",
		Long: `cancel ends executions as cancelled, across the fleet: the outcome of each is
io.skillbus.execution.cancelled, recorded with who cancelled it (--by) and why
(--reason), exactly once.

  - a queued execution (or one waiting for a retry) never starts;
  - a running one stops at its next step boundary: no further step starts, and
    the processes of a running exec step get SIGTERM, then SIGKILL after the
    worker's grace (5s by default). A step that completes before that is kept;
    a run whose last step completes before the cancel arrives stays completed;
  - one paused (waiting for a confirmation or sleeping), held by a paused
    skill, or parked for a repair is ended at once, without waiting for its
    answer or its wake-up, and is reported "was paused", "was held" or "was
    repairing".

EXECUTION is an execution's id, or the beginning of it (at least 4 characters)
when that names one execution, as 'runs show' reads it.

The request is recorded in KV runs, so it holds for a worker that starts later
or was disconnected. An execution that ended already is reported as such
("already ended (completed)") and the command exits 1. So it does for an id
nothing knows of — no outcome, job, claim, or paused, held or parked record: a
mistyped id — which it reports as "no such execution: <id>", recording nothing.
An execution that fell back to another skill is followed: the skill still
running it is cancelled.

--skill cancels every execution of a skill that has not ended and whose job was
published since --since (a duration back from now, or an RFC 3339 time; default:
as far back as the JOBS stream keeps jobs), and the delayed triggers that invoke
the skill by name and wait to be published ('runs delayed'), and lists what it
cancelled. A debounced burst or a batch of the skill pending now is cancelled
when it comes due, before any worker starts it; one that takes a trigger after
the cancel is not.

An ACTIVATION of a delayed trigger (what 'trigger --at/--in' printed, or 'runs
delayed' lists) cancels that trigger before it is due: it is deleted, and no
router publishes it. One due at that very moment may be published all the same,
by a router that read it first; the line says so.`,
		Example: `  skillbus runs cancel 3f2a9c... --reason "wrong customer"
  skillbus runs cancel 3f2a9c... 77b0e1...
  skillbus runs cancel --skill send-report --since 1h --reason "bad template"
  skillbus runs cancel 9d41c7...             # the activation a trigger --in printed`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (skillName == "") == (len(args) == 0) {
				return usage("give execution ids or --skill, not both")
			}
			if since != "" && skillName == "" {
				return usage("--since goes with --skill")
			}
			from, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := events.CheckToken("execution id", id); err != nil {
					return usage("%v", err)
				}
			}
			if skillName != "" {
				if err := events.CheckToken("skill", skillName); err != nil {
					return usage("--skill: %v", err)
				}
			}
			if by == "" {
				by = whoAmI()
			}
			ctx := cmd.Context()
			b, kv, err := c.runsBucket(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			ctl, err := control.New(ctx, b)
			if err != nil {
				return err
			}
			req := control.Request{By: by, Reason: reason, Source: "skillbus-cli"}
			var out []control.Cancellation
			var delayed []schedule.Pending // delayed triggers cancelled before they were published
			var missing []error
			ended := 0
			if skillName != "" {
				// The delayed triggers first: one published while the skill's
				// executions are read then has its execution among them.
				waiting, err := delayedOf(ctx, b, skillName)
				if err != nil {
					return err
				}
				for _, p := range waiting {
					p, err := schedule.Cancel(ctx, b, p.ActivationID)
					if errors.Is(err, schedule.ErrNoDelayed) {
						continue // published since it was listed: its execution was not
					}
					if err != nil {
						return err
					}
					delayed = append(delayed, p)
				}
				if out, err = ctl.CancelSkill(ctx, skillName, from, req); err != nil {
					return err
				}
			}
			for _, id := range args {
				// The activation of a delayed trigger not yet published (trigger
				// --in prints it): nothing runs yet; the trigger is deleted.
				triedDelayed := false
				if len(id) == executionIDLen {
					p, err := schedule.Cancel(ctx, b, id)
					if err == nil {
						delayed = append(delayed, p)
						continue
					}
					if !errors.Is(err, schedule.ErrNoDelayed) && !errors.Is(err, jetstream.ErrBucketNotFound) {
						return err
					}
					triedDelayed = true
				}
				if id, err = resolveExecution(ctx, b, kv, id, false); err != nil {
					return err
				}
				res, err := ctl.Cancel(ctx, id, req)
				if errors.Is(err, control.ErrNoExecution) {
					if triedDelayed {
						// The activation of a delayed trigger published already
						// is not an execution: say where to look.
						err = fmt.Errorf("%w, nor a delayed trigger waiting with that activation ('runs delayed' lists those; one published already runs as its own execution: 'runs list')", err)
					}
					missing = append(missing, err) // the others are still cancelled
					continue
				}
				if err != nil {
					return err
				}
				if res.State == control.StateEnded {
					ended++
				}
				out = append(out, res)
			}
			if asJSON {
				type row struct {
					control.Cancellation
					ExecutionID string `json:"execution_id,omitempty"` // a delayed trigger has none
					// A delayed trigger's: the activation it would have set off,
					// and when it was due (state "delayed").
					ActivationID string     `json:"activation_id,omitempty"`
					At           *time.Time `json:"at,omitempty"`
				}
				rows := []row{}
				for _, r := range out {
					rows = append(rows, row{Cancellation: r, ExecutionID: r.ExecutionID})
				}
				for _, p := range delayed {
					rows = append(rows, row{Cancellation: control.Cancellation{Skill: p.Skill, State: stateDelayed}, ActivationID: p.ActivationID, At: &p.At})
				}
				if err := json.NewEncoder(stdout).Encode(rows); err != nil {
					return err
				}
			} else {
				if skillName != "" && len(out) == 0 && len(delayed) == 0 {
					fmt.Fprintf(stdout, "no execution of %s to cancel\n", skillName)
				}
				if skillName != "" {
					defer fmt.Fprintf(stdout, "a debounced burst or a batch of %s pending now, if any, is cancelled when it comes due\n", skillName)
				}
				for _, r := range out {
					fmt.Fprintln(stdout, r.String())
				}
				now := time.Now()
				for _, p := range delayed {
					fmt.Fprintln(stdout, delayedCancelled(p, now))
				}
			}
			if len(missing) > 0 {
				return &ExitError{Code: 1, Err: errors.Join(missing...)}
			}
			if ended > 0 {
				return &ExitError{Code: 1, Quiet: true, Err: fmt.Errorf("%d of the executions had ended already", ended)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&skillName, "skill", "", "cancel every execution of this skill that has not ended")
	f.StringVar(&since, "since", "", "with --skill: only executions whose job was published since then (1h, or 2026-01-02T15:04:05Z)")
	f.StringVar(&by, "by", "", "who cancels (default: $USER, else the login name, else user@host)")
	f.StringVar(&reason, "reason", "", "why, for the record")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time. Empty
// is the zero time: no bound.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, usage("--since %s: give a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usage("--since %q: want a duration (1h30m) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return t, nil
}

func runsPauseCommand(c *common, stdout io.Writer) *cobra.Command {
	var skillName, by, reason string
	cmd := &cobra.Command{
		Use:   "pause --skill SKILL",
		Short: "Pause a skill: its new runs wait, holding no worker, until it is resumed",
		Long: `pause stops a skill's executions from starting, across the fleet: every job of
the skill a worker takes from then on is held — kept whole in KV runs and acked,
so it holds no worker slot and uses none of its retries — until 'runs resume'
publishes it again. Executions already running go on (cancel them with 'runs
cancel --skill'). Nothing is lost: a worker that dies holding a job leaves it to be
delivered again.

A pause lasts until 'runs resume', however long that is: the pause and the jobs
it holds are kept in KV runs exempt from the bucket's 7-day expiry. 'skills list'
and the console show paused skills.`,
		Example: `  skillbus runs pause --skill send-report --reason "mail server migration"
  skillbus runs resume --skill send-report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ctl, done, err := c.skillControl(ctx, skillName, &by)
			if err != nil {
				return err
			}
			defer done()
			paused, err := ctl.Pause(ctx, skillName, control.Request{By: by, Reason: reason, Source: "skillbus-cli"})
			if err != nil {
				return err
			}
			if !paused {
				fmt.Fprintf(stdout, "%s was paused already\n", skillName)
				return nil
			}
			fmt.Fprintf(stdout, "paused %s: its new runs wait until 'skillbus runs resume --skill %s'\n", skillName, skillName)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&skillName, "skill", "", "the skill to pause")
	f.StringVar(&by, "by", "", "who pauses (default: $USER, else the login name, else user@host)")
	f.StringVar(&reason, "reason", "", "why, for the record")
	return cmd
}

func runsResumeCommand(c *common, stdout io.Writer) *cobra.Command {
	var skillName, by string
	cmd := &cobra.Command{
		Use:   "resume --skill SKILL",
		Short: "Resume a paused skill: the runs it held start, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ctl, done, err := c.skillControl(ctx, skillName, &by)
			if err != nil {
				return err
			}
			defer done()
			n, was, err := ctl.Resume(ctx, skillName, control.Request{By: by, Source: "skillbus-cli"})
			if err != nil {
				return err
			}
			if !was {
				fmt.Fprintf(stdout, "%s was not paused\n", skillName)
				return nil
			}
			fmt.Fprintf(stdout, "resumed %s: %s held and now released\n", skillName, plural(n, "run"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&skillName, "skill", "", "the skill to resume")
	f.StringVar(&by, "by", "", "who resumes (default: $USER, else the login name, else user@host)")
	return cmd
}

// pausedNote is what skills list adds to a paused skill's state.
func pausedNote(p control.PausedSkill) string {
	s := "paused"
	if p.Held > 0 {
		s += fmt.Sprintf(" (%d held)", p.Held)
	}
	return strings.TrimSpace(s)
}

// skillControl checks a pause or resume's --skill, fills in --by, and opens the
// execution control on the bus; done closes the connection.
func (c *common) skillControl(ctx context.Context, skillName string, by *string) (ctl *control.Controller, done func(), err error) {
	if skillName == "" {
		return nil, nil, usage("--skill is required")
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return nil, nil, usage("--skill: %v", err)
	}
	if *by == "" {
		*by = whoAmI()
	}
	b, _, err := c.runsBucket(ctx)
	if err != nil {
		return nil, nil, err
	}
	if ctl, err = control.New(ctx, b); err != nil {
		b.Close()
		return nil, nil, err
	}
	return ctl, func() { b.Close() }, nil
}
