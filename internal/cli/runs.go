package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/schedule"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func runsCommand(c *common, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Inspect executions, answer their confirmations, cancel them, pause skills",
		Example: `  skillbus runs list
  skillbus runs show 3f2a...                # an execution id from 'runs list' or trigger --wait
  skillbus runs confirm 3f2a... --by ada
  skillbus runs confirm 3f2a... --deny --reason "not during the freeze"
  skillbus runs cancel 3f2a... --reason "wrong customer"
  skillbus runs delayed                      # triggers stored to be published later
  skillbus runs pause --skill send-report   # its new runs wait until resume`,
	}
	cmd.AddCommand(runsListCommand(c, stdout), runsShowCommand(c, stdout), runsConfirmCommand(c, stdout),
		runsCancelCommand(c, stdout), runsPauseCommand(c, stdout), runsResumeCommand(c, stdout), runsDelayedCommand(c, stdout))
	return cmd
}

func runsListCommand(c *common, stdout io.Writer) *cobra.Command {
	var limit int
	var since time.Duration
	var asJSON bool
	var skillName string
	var statuses []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List recent executions: finished, paused or waiting at a step, held before they start, and parked for a repair",
		Example: `  skillbus runs list
  skillbus runs list --skill send-report --status failed,cancelled
  skillbus runs list --limit 100 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usage("--limit must be at least 1")
			}
			if skillName != "" {
				if err := events.CheckToken("skill", skillName); err != nil {
					return usage("--skill: %v", err)
				}
			}
			wanted := map[string]bool{}
			for _, st := range statuses {
				if !slices.Contains(runStatuses, st) {
					return usage("--status %q: one of %s", st, strings.Join(runStatuses, ", "))
				}
				wanted[st] = true
			}
			ctx := cmd.Context()
			b, kv, err := c.runsBucket(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			type row struct {
				ID      string    `json:"execution_id"`
				Skill   string    `json:"skill"`
				Version string    `json:"version,omitempty"` // of the skill the run runs: a ramp shows here
				Status  string    `json:"status"`
				Detail  string    `json:"detail"`
				At      time.Time `json:"at"`
			}
			var rows []row
			outcomes, err := recentOutcomes(ctx, b, since)
			if err != nil {
				return err
			}
			for _, r := range outcomes {
				detail := r.Error
				switch r.Status {
				case run.StatusCompleted:
					detail = fmt.Sprintf("%.1fms, attempt %d", r.DurationMS, r.Attempt)
				case run.StatusFallback:
					detail = "fell back: " + r.Error
				}
				rows = append(rows, row{r.ExecutionID, r.Skill, r.Version, r.Status, detail, r.FinishedAt})
			}
			lister, err := kv.ListKeys(ctx)
			if err != nil {
				return err
			}
			for k := range lister.Keys() {
				if _, ok := events.HeldExecution(k); ok {
					if e, err := kv.Get(ctx, k); err == nil {
						var h run.Held
						if json.Unmarshal(e.Value(), &h) == nil {
							_, version := skillOf(h.Job)
							rows = append(rows, row{h.ExecutionID, h.Skill, version, "held", heldDetail(&h), h.At})
						}
					}
					continue
				}
				if _, ok := events.PausedExecution(k); !ok {
					continue
				}
				e, err := kv.Get(ctx, k)
				if err != nil {
					continue
				}
				var p run.Paused
				switch {
				case json.Unmarshal(e.Value(), &p) != nil:
				case p.Kind != "":
					name, version := skillOf(p.Job)
					rows = append(rows, row{p.ExecutionID, name, version, "waiting", "step " + p.Step + " " + p.Waiting(), e.Created()})
				default:
					name, version := skillOf(p.Job)
					rows = append(rows, row{p.ExecutionID, name, version, "paused", "confirm step " + p.Step + " by " + p.TimeoutAt.Format(time.RFC3339), e.Created()})
				}
			}
			if repairs := repairsBucket(ctx, b); repairs != nil {
				parked, recs, err := service.AllParked(ctx, repairs)
				if err != nil {
					return err
				}
				for _, p := range parked {
					detail := "repair " + service.ShortID(p.RepairID) + " requested"
					if rec := recs[p.RepairID]; rec != nil {
						f := rec.Diagnosis.Fault
						detail = fmt.Sprintf("repair %s %s: %s %q in step %s", service.ShortID(p.RepairID), service.Waiting(rec), f.Kind, f.Name, orDash(f.Step))
					}
					rows = append(rows, row{p.ExecutionID, p.Job.Skill.Name, p.Job.Skill.Version, "repairing", detail, p.ParkedAt})
				}
			}
			rows = slices.DeleteFunc(rows, func(r row) bool {
				return skillName != "" && r.Skill != skillName || len(wanted) > 0 && !wanted[r.Status]
			})
			sort.Slice(rows, func(i, j int) bool { return rows[i].At.After(rows[j].At) })
			rows = rows[:min(limit, len(rows))]
			if asJSON {
				if rows == nil {
					rows = []row{}
				}
				return json.NewEncoder(stdout).Encode(rows)
			}
			if len(rows) == 0 {
				if skillName != "" || len(wanted) > 0 {
					fmt.Fprintf(stdout, "no execution ended in the last %v, nor paused, waiting, held or repairing now, matches --skill or --status\n", since)
				} else {
					fmt.Fprintf(stdout, "no execution ended in the last %v, nor is one paused, waiting, held or repairing now\n", since)
				}
				fmt.Fprintln(stdout, "(a run queued or running records nothing until it ends: 'skillbus runs show EXECUTION' or the console follows it)")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EXECUTION\tSKILL\tVERSION\tSTATUS\tWHEN\tDETAIL")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Skill, orDash(r.Version), r.Status, r.At.Local().Format("15:04:05"), truncate(r.Detail, 70))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many executions to list, newest first")
	cmd.Flags().DurationVar(&since, "since", 24*time.Hour, "list executions that ended within this long")
	cmd.Flags().StringVar(&skillName, "skill", "", "only this skill's executions")
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only executions in these states, comma-separated: "+strings.Join(runStatuses, ", "))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// runStatuses are the states runs list shows: the outcomes, and the runs paused
// for a confirmation, waiting at a step, held before they start (by a paused
// skill, for a concurrency slot, or for a throttle's turn), or parked for a
// repair.
var runStatuses = []string{run.StatusCompleted, run.StatusFailed, run.StatusFallback, run.StatusCancelled, "paused", "waiting", "held", "repairing"}

// heldDetail says what holds a run back before it starts.
func heldDetail(h *run.Held) string {
	switch {
	case h.Gate != "":
		return fmt.Sprintf("waits for a concurrency slot (%d at once)", h.Limit)
	case !h.Until.IsZero():
		return "throttled: starts at " + h.Until.Local().Format(time.RFC3339)
	}
	return h.Skill + " is paused: skillbus runs resume --skill " + h.Skill
}

// skillOf is the name and version of the skill a paused job runs.
func skillOf(job json.RawMessage) (name, version string) {
	var j events.Job
	_ = json.Unmarshal(job, &j)
	return j.Skill.Name, j.Skill.Version
}

func runsShowCommand(c *common, stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "show EXECUTION",
		Long: `show prints an execution: its events in order, its step-by-step log and how
it ended. EXECUTION is its id, or the beginning of it (at least 4 characters) when
that names one execution: queued, running or ended among the last 100,000 jobs
(their ids are read), or paused, held, repairing or ended in the last 7 days.`,
		Short: "Show an execution: its events in order, its step log and its outcome",
		Example: `  skillbus runs show 3f2a9c...
  skillbus runs show 3f2a9c... --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			if err := events.CheckToken("execution id", id); err != nil {
				return usage("%v", err)
			}
			b, kv, err := c.runsBucket(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			if id, err = resolveExecution(ctx, b, kv, id, false); err != nil {
				return err
			}
			evStream, err := b.Stream(ctx, b.StreamEvents())
			if err != nil {
				return fmt.Errorf("no %s stream: is skillbus running there? %w", b.StreamEvents(), err)
			}
			rec, err := run.Load(ctx, evStream, b.Subjects, id)
			if err != nil {
				return err
			}
			paused, _, err := run.LoadPaused(ctx, kv, id)
			if err != nil {
				return err
			}
			var parked *service.Parked
			var repairRec *service.Record
			if repairs := repairsBucket(ctx, b); repairs != nil && rec == nil {
				if parked, repairRec, err = service.FindParked(ctx, repairs, id); err != nil {
					return err
				}
			}
			evs, err := executionEvents(ctx, b, id)
			if err != nil {
				return err
			}
			// A run that has not ended and is not parked may be set aside before it
			// starts: waiting for a concurrency slot or held by its paused skill
			// (a held record), or throttled (the start it waits for); or queued or
			// running, which stores nothing until it ends.
			var waiting waitingRun
			if rec == nil && paused == nil && parked == nil {
				if waiting, err = loadWaiting(ctx, b, kv, id, len(evs) == 0); err != nil {
					return err
				}
			}
			if rec == nil && paused == nil && parked == nil && len(evs) == 0 && !waiting.any() {
				// The activation trigger --at/--in printed, of a trigger not yet due.
				if len(id) == executionIDLen {
					if p, err := schedule.Waiting(ctx, b, id); err != nil {
						return err
					} else if p != nil {
						return &ExitError{Code: 1, Err: fmt.Errorf("%s is the activation of a delayed trigger for %s (source %s, id %s), due at %s (%s): nothing has run yet. 'skillbus runs delayed' lists it; 'skillbus runs cancel %s' cancels it",
							id, delayedTarget(*p), orDash(p.Source), orDash(p.ID), p.At.Local().Format(time.RFC3339), dueIn(p.At, time.Now()), id)}
					}
					// An activation id, as the gateway and trigger print it: its jobs
					// name its executions.
					if ctl, err := control.New(ctx, b); err == nil {
						xs, err := ctl.ActivationExecutions(ctx, id)
						if err != nil {
							return err
						}
						if len(xs) > 0 {
							var list []string
							for _, x := range xs {
								list = append(list, fmt.Sprintf("%s (%s)", x.ExecutionID, x.Skill))
							}
							return &ExitError{Code: 1, Err: fmt.Errorf("%s is an activation (what a sender is given for its event), not an execution; its executions: %s. skillbus runs show %s",
								id, strings.Join(list, ", "), xs[0].ExecutionID)}
						}
					}
				}
				return &ExitError{Code: 1, Err: fmt.Errorf("no execution %s (outcomes and events are kept as long as the events stream keeps them: 7 days by default)", id)}
			}
			if asJSON {
				out := map[string]any{"record": rec, "paused": paused, "events": slices.DeleteFunc(slices.Clone(evs), isScheduled)}
				if line := waiting.line(id); line != "" {
					out["waiting"] = line
				}
				if parked != nil {
					out["repairing"] = map[string]any{"repair_id": parked.RepairID, "step": parked.Step, "error": parked.Error, "parked_at": parked.ParkedAt, "line": service.Repairing(parked, repairRec)}
				}
				return json.NewEncoder(stdout).Encode(out)
			}
			var line bytes.Buffer
			w := &watcher{out: &line}
			for _, e := range evs {
				line.Reset()
				w.print(e)
				if line.Len() == 0 {
					continue // an event that says nothing new (a step resumed from its checkpoint)
				}
				at := e.Time()
				if t, ok := client.Scheduled(e); ok {
					at = t // when the run parked; e's time is when it wakes
				}
				fmt.Fprintf(stdout, "%s %s", at.Local().Format("15:04:05.000"), line.Bytes())
			}
			var logJSON json.RawMessage
			switch {
			case paused != nil:
				logJSON = paused.Log
			case rec != nil:
				logJSON = rec.Log
			}
			var l workflow.Log
			if len(logJSON) > 0 && json.Unmarshal(logJSON, &l) == nil && len(l.Steps) > 0 {
				fmt.Fprintln(stdout)
				if err := workflow.Format(stdout, &l); err != nil {
					return err
				}
			}
			switch {
			case paused != nil && paused.Kind != "":
				fmt.Fprintf(stdout, "\nwaiting: step %s is %s\n", paused.Step, paused.Waiting())
			case paused != nil:
				fmt.Fprintf(stdout, "\npaused: waiting for confirmation of step %s until %s\n  skillbus runs confirm %s          (or --deny)\n", paused.Step, paused.TimeoutAt.Local().Format(time.RFC3339), id)
			case parked != nil:
				short := service.ShortID(parked.RepairID)
				fmt.Fprintf(stdout, "\n%s\n  %s\n  skillbus repair show %s          (then approve or reject)\n", service.Repairing(parked, repairRec), firstLineOf(parked.Error), short)
			case rec != nil && rec.Status == run.StatusCancelled:
				// rec.Error says who cancelled and why: "cancelled by ada: wrong customer".
				if rec.Worker == "" {
					fmt.Fprintf(stdout, "\n%s, before a worker ran it\n", rec.Error)
				} else {
					fmt.Fprintf(stdout, "\n%s, on worker %s, attempt %d, in %.1fms\n", rec.Error, rec.Worker, rec.Attempt, rec.DurationMS)
				}
			case rec != nil:
				fmt.Fprintf(stdout, "\n%s by worker %s, attempt %d, in %.1fms (this delivery's time: its claim, its steps and its outcome)\n", rec.Status, rec.Worker, rec.Attempt, rec.DurationMS)
				if id, digest := repairOf(evs); id != "" {
					fmt.Fprintf(stdout, "ran on version %s (%s) after repair %s   (skillbus repair show %s)\n", rec.Version, shortDigest(digest), id, shortDigest(id))
				}
			case waiting.any():
				fmt.Fprintf(stdout, "\n%s\n", waiting.line(id))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// waitingRun is what runs show knows of a run that has neither ended nor parked.
type waitingRun struct {
	held      *run.Held // for a concurrency slot (Gate), or by its paused skill
	throttled time.Time // the start a throttled run waits for, if still to come
	queued    bool      // its job is in the jobs stream
}

func (w waitingRun) any() bool { return w.held != nil || !w.throttled.IsZero() || w.queued }

// line says what the run waits for, and what to do about it.
func (w waitingRun) line(id string) string {
	switch {
	case w.held != nil && w.held.Gate != "":
		return fmt.Sprintf("waiting: for a concurrency slot of %s (%d at once), since %s; it holds no worker meanwhile\n  skillbus runs cancel %s          (to drop it)",
			w.held.Skill, w.held.Limit, w.held.At.Local().Format(time.RFC3339), id)
	case w.held != nil && !w.held.Until.IsZero():
		return fmt.Sprintf("throttled: it starts at %s, its turn under %s's throttle; it holds no worker meanwhile", w.held.Until.Local().Format(time.RFC3339), w.held.Skill)
	case w.held != nil:
		return fmt.Sprintf("held: %s is paused, since %s; it runs when the skill is resumed\n  skillbus runs resume --skill %s          (or skillbus runs cancel %s)",
			w.held.Skill, w.held.At.Local().Format(time.RFC3339), w.held.Skill, id)
	case !w.throttled.IsZero():
		return fmt.Sprintf("throttled: it starts at %s, its turn under its skill's throttle; it holds no worker meanwhile", w.throttled.Local().Format(time.RFC3339))
	case w.queued:
		return "queued or running: a run stores nothing until it ends (or a step that acts finishes); 'skillbus trigger --wait' and the console follow it live"
	}
	return ""
}

// loadWaiting reads what holds run id back: its held record, its throttled start
// and, when lookJobs and neither says, whether its job is queued.
func loadWaiting(ctx context.Context, b *bus.Bus, kv jetstream.KeyValue, id string, lookJobs bool) (waitingRun, error) {
	var w waitingRun
	e, err := kv.Get(ctx, events.RunHeldKey(id))
	switch {
	case err == nil:
		var h run.Held
		if json.Unmarshal(e.Value(), &h) == nil {
			w.held = &h
			return w, nil
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return w, err
	}
	e, err = kv.Get(ctx, events.RunThrottleKey(id))
	switch {
	case err == nil:
		// <start in ns>/<the throttle it was taken under>
		ns, _, _ := strings.Cut(string(e.Value()), "/")
		if n, err := strconv.ParseInt(ns, 10, 64); err == nil && time.Unix(0, n).After(time.Now()) {
			w.throttled = time.Unix(0, n)
			return w, nil
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return w, err
	}
	if lookJobs {
		ctl, err := control.New(ctx, b)
		if err != nil {
			return w, err
		}
		if w.queued, err = ctl.Queued(ctx, id); err != nil {
			return w, err
		}
	}
	return w, nil
}

// repairOf returns the repair an execution's outcome names, and the digest the
// execution ran on, if it waited for a repair.
func repairOf(evs []*event.Event) (id, digest string) {
	for _, e := range evs {
		if !events.Outcome(e.Type()) {
			continue
		}
		var d struct {
			RepairID string `json:"repair_id"`
			Digest   string `json:"digest"`
		}
		if json.Unmarshal(e.Data(), &d) == nil && d.RepairID != "" {
			return d.RepairID, d.Digest
		}
	}
	return "", ""
}

// isScheduled reports whether e is a scheduled message rather than an event.
func isScheduled(e *event.Event) bool {
	_, ok := client.Scheduled(e)
	return ok
}

// executionEvents reads every event of an execution from the EVENTS stream, and
// the sleep's or wait's end scheduled while it is parked, marked as such (see
// client.Scheduled). A confirmation's scheduled timeout is left out: the
// confirmation.requested event says when it falls due.
func executionEvents(ctx context.Context, b *bus.Bus, id string) ([]*event.Event, error) {
	cons, err := b.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{b.Subjects.Events(id)}})
	if err != nil {
		return nil, err
	}
	var out []*event.Event
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			timer := events.TimerOf(m.Subject())
			if timer == events.TimerConfirmation {
				continue
			}
			e, err := bus.Decode(m)
			if err != nil {
				continue
			}
			if timer == events.TimerWait {
				at := time.Now()
				if md, err := m.Metadata(); err == nil {
					at = md.Timestamp
				}
				client.MarkScheduled(e, at)
			}
			out = append(out, e)
		}
		if n == 0 {
			return out, nil
		}
	}
}

func runsConfirmCommand(c *common, stdout io.Writer) *cobra.Command {
	var step, by, reason string
	var deny bool
	cmd := &cobra.Command{
		Use:   "confirm EXECUTION",
		Short: "Approve (or --deny) the step an execution is paused at",
		Long: `confirm answers the confirmation an execution is waiting for: it publishes
io.skillbus.confirmation.recorded, and a router resumes the execution with the answer.
A denied step is skipped. Without an answer, the confirmation is denied when its
timeout passes. EXECUTION is its id, or the beginning of it (at least 4
characters) when that names one paused execution.`,
		Example: `  skillbus runs confirm 3f2a9c...
  skillbus runs confirm 3f2a9c... --deny --reason "not during the freeze" --by ada`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			if err := events.CheckToken("execution id", id); err != nil {
				return usage("%v", err)
			}
			b, kv, err := c.runsBucket(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			if by == "" {
				by = whoAmI()
			}
			if id, err = resolveExecution(ctx, b, kv, id, true); err != nil {
				return err
			}
			step, err := run.Confirm(ctx, b, kv, run.Confirmation{ExecutionID: id, Step: step, Approved: !deny, By: by, Reason: reason, Source: "skillbus-cli"})
			if errors.Is(err, run.ErrNotPaused) {
				if evStream, serr := b.Stream(ctx, b.StreamEvents()); serr == nil {
					if rec, lerr := run.Load(ctx, evStream, b.Subjects, id); lerr == nil && rec == nil {
						return &ExitError{Code: 1, Err: fmt.Errorf("no execution %s (see 'skillbus runs list')", id)}
					} else if rec != nil {
						return &ExitError{Code: 1, Err: fmt.Errorf("execution %s is not waiting for a confirmation: it ended (%s)", id, rec.Status)}
					}
				}
				return &ExitError{Code: 1, Err: err}
			}
			if err != nil {
				return err
			}
			verb := "approved"
			if deny {
				verb = "denied"
			}
			fmt.Fprintf(stdout, "%s step %s of %s\n", verb, step, id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&step, "step", "", "the step to answer (default: the one the execution is paused at)")
	f.BoolVar(&deny, "deny", false, "deny instead of approving")
	f.StringVar(&by, "by", "", "who answers (default: $USER, else the login name, else user@host)")
	f.StringVar(&reason, "reason", "", "why, for the record")
	return cmd
}

// runsBucket connects and opens KV runs.
func (c *common) runsBucket(ctx context.Context) (*bus.Bus, jetstream.KeyValue, error) {
	b, err := c.connect("skillbus-cli")
	if err != nil {
		return nil, nil, err
	}
	kv, err := b.KV(ctx, b.BucketRuns())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		b.Close()
		return nil, nil, fmt.Errorf("no %q bucket on %s: is skillbus running there?", b.BucketRuns(), c.natsURL)
	}
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, kv, nil
}

// repairsBucket opens KV repairs, or returns nil when there is none: no worker of
// this fleet repairs.
func repairsBucket(ctx context.Context, b *bus.Bus) jetstream.KeyValue {
	kv, err := b.KV(ctx, b.BucketRepairs())
	if err != nil {
		return nil
	}
	return kv
}

// recentOutcomes reads the outcome events of executions that ended within since.
func recentOutcomes(ctx context.Context, b *bus.Bus, since time.Duration) ([]*run.Record, error) {
	var filters []string
	for _, typ := range run.OutcomeTypes() {
		filters = append(filters, b.Subjects.Event("*", typ))
	}
	cons, err := b.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: filters, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: ptr(time.Now().Add(-since)),
	})
	if err != nil {
		return nil, fmt.Errorf("read outcomes: %w", err)
	}
	var out []*run.Record
	for {
		batch, err := cons.FetchNoWait(512)
		if err != nil {
			return nil, fmt.Errorf("read outcomes: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if r, err := run.FromMsg(m.Headers(), m.Data(), md.Timestamp); err == nil {
				out = append(out, r)
			}
		}
		if n == 0 {
			return out, nil
		}
	}
}

func ptr[T any](v T) *T { return &v }

// executionIDLen is the length of an execution id (hex).
const executionIDLen = 32

// prefixWindow is how far back a shortened execution id is looked for among the
// finished executions.
const prefixWindow = 7 * 24 * time.Hour

// jobsPrefixWindow is how many of the latest jobs a shortened execution id is
// looked for among: a run queued or running, whose record is not written until it
// ends, is known by its job alone.
const jobsPrefixWindow = 100_000

// resolveExecution returns the execution id that id names: id itself when it is
// whole, else the one paused execution, or (unless pausedOnly) the one execution
// queued, running or ended among the last jobsPrefixWindow jobs, or held, parked,
// or ended within prefixWindow, whose id begins with it.
func resolveExecution(ctx context.Context, b *bus.Bus, kv jetstream.KeyValue, id string, pausedOnly bool) (string, error) {
	if len(id) >= executionIDLen {
		return id, nil
	}
	if len(id) < 4 {
		return "", usage("execution id %q is too short: give the whole id, or at least 4 characters of it", id)
	}
	found := map[string]bool{}
	lister, err := kv.ListKeysFiltered(ctx, events.RunsPausedFilter)
	if err != nil {
		return "", err
	}
	for k := range lister.Keys() {
		if x, _ := events.PausedExecution(k); strings.HasPrefix(x, id) {
			found[x] = true
		}
	}
	where := "paused"
	if !pausedOnly {
		held, err := kv.ListKeysFiltered(ctx, events.RunsHeldFilter)
		if err != nil {
			return "", err
		}
		for k := range held.Keys() {
			if x, _ := events.HeldExecution(k); strings.HasPrefix(x, id) {
				found[x] = true
			}
		}
		where = fmt.Sprintf("among the last %d jobs, nor paused, held, repairing or ended in the last %d days,",
			jobsPrefixWindow, prefixWindow/(24*time.Hour))
		ctl, err := control.New(ctx, b)
		if err != nil {
			return "", err
		}
		recent, err := ctl.JobExecutions(ctx, id, jobsPrefixWindow)
		if err != nil {
			return "", err
		}
		for _, x := range recent {
			found[x] = true
		}
		if repairs := repairsBucket(ctx, b); repairs != nil {
			parked, _, err := service.AllParked(ctx, repairs)
			if err != nil {
				return "", err
			}
			for _, p := range parked {
				if strings.HasPrefix(p.ExecutionID, id) {
					found[p.ExecutionID] = true
				}
			}
		}
		outcomes, err := recentOutcomes(ctx, b, prefixWindow)
		if err != nil {
			return "", err
		}
		for _, r := range outcomes {
			if strings.HasPrefix(r.ExecutionID, id) {
				found[r.ExecutionID] = true
			}
		}
	}
	switch ids := slices.Sorted(maps.Keys(found)); len(ids) {
	case 0:
		return "", &ExitError{Code: 1, Err: fmt.Errorf("no execution %s whose id begins with %s (see 'skillbus runs list', or give the whole id)", where, id)}
	case 1:
		return ids[0], nil
	default:
		return "", &ExitError{Code: 1, Err: fmt.Errorf("%d executions have ids beginning with %s: %s; give more of the id", len(ids), id, strings.Join(ids, ", "))}
	}
}

// whoAmI names the person answering when --by is not given: the recorded answer
// always says who.
func whoAmI() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	host, _ := os.Hostname()
	return "uid" + strconv.Itoa(os.Getuid()) + "@" + host
}
