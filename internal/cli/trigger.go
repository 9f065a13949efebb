package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/schedule"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Exit codes of `skillbus trigger --wait`.
const (
	exitFailed    = 1 // the execution failed
	exitUnmatched = 3 // no skill took the trigger, or the trigger was rejected
	exitDeferred  = 7 // taken into a debounced run or a batch, which runs later
	exitTimeout   = 4 // no result within --timeout
	exitRepairing = 5 // the execution is parked on a repair that waits for approval
	exitCancelled = 6 // the execution was cancelled (skillbus runs cancel, cancel_on, the console)
)

func triggerCommand(c *common, getenv Env, stdout io.Writer) *cobra.Command {
	var (
		skillName, data, source, id string
		wait, asJSON                bool
		timeout                     time.Duration
		atArg                       string
		in                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "trigger [TYPE]",
		Short: "Publish a trigger event, and optionally wait for its result",
		Long: `trigger publishes a CloudEvent (binary content mode) on skillbus.trigger.<TYPE>, or with
--skill on skillbus.trigger.skill.<NAME> to invoke one skill explicitly. The data must
be JSON; a JSON object becomes the skill's inputs. A request in words is the type
` + selector.RequestType + ` with its text in "query" (or "text", "message", "prompt"): the
router chooses the skill by relevance, among those whose inputs take that data.

With --wait it follows the activation: the routing decision, each step, retries and
fallbacks, repairs, sleeps and waits, and the result. The exit code is 0 when the
execution completed (or when no skill matches the trigger but it ended a run's
wait_for_event or cancelled runs by their cancel_on, which is what such an event
is sent for), 1 when it failed, 3 when
no skill took the trigger, 7 when a debounced or batched skill took it into a
run that starts later (as its own activation: runs list shows it), 4 on
--timeout (a run that sleeps or waits for an event or a confirmation past it goes
on), 5 when the execution is parked on a repair that waits for approval (skillbus
repair approve ID resumes it; runs list and runs show show it meanwhile), and 6 when
it was cancelled (skillbus runs cancel, a cancel_on event, the console).

With --at TIME (RFC 3339, e.g. 2026-03-02T06:00:00+01:00) or --in DURATION (e.g. 90s,
2h30m) the trigger is published later instead: it is stored in the bus (KV delayed)
and a router publishes it when it is due, so it survives this command exiting and the
routers restarting. One due while no router runs is published when one starts.
'skillbus runs delayed' lists those waiting; 'skillbus runs cancel ACTIVATION' (the
activation printed here) cancels one before it is due.`,
		Example: `  skillbus trigger --skill hello --data '{"name":"Ada"}' --wait
  skillbus trigger ` + selector.RequestType + ` --data '{"query":"what to pack for lisbon"}' --wait
  skillbus trigger com.example.order.created --data @order.json --wait
  echo '{"name":"Grace"}' | skillbus trigger --skill hello --data - --wait --json
  skillbus trigger --skill hello --data '{"name":"Ada"}' --in 10m
  skillbus trigger com.example.reminder --at 2026-03-02T06:00:00+01:00`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			typ := events.TriggerInvoke
			if len(args) == 1 {
				typ = args[0]
			} else if skillName == "" {
				if cmd.Flags().Changed("data") {
					return usage("give an event TYPE, or --skill NAME to invoke a skill explicitly, or send a text request as %s with its text in \"query\":\n  skillbus trigger %s --data '{\"query\": \"what to pack for lisbon\"}' --wait", selector.RequestType, selector.RequestType)
				}
				return usage("give an event TYPE, or --skill NAME to invoke a skill explicitly")
			}
			if err := events.CheckType(typ); err != nil {
				return usage("%v", err)
			}
			if skillName != "" {
				if err := events.CheckToken("--skill", skillName); err != nil {
					return usage("%v", err)
				}
			}
			due, err := dueTime(cmd.Flags().Changed("at"), atArg, cmd.Flags().Changed("in"), in, wait)
			if err != nil {
				return err
			}
			payload, err := readData(data, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if err := client.CheckOutsideSource(source); err != nil {
				return usage("--source: %v", err)
			}
			b, err := c.connect("skillbus-cli")
			if err != nil {
				return err
			}
			defer b.Close()
			// The publish span, exported when OTEL_EXPORTER_OTLP_ENDPOINT is set, is
			// the root of the activation's trace.
			tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "skillbus-cli", Getenv: getenv})
			if err != nil {
				return usage("%v", err)
			}
			defer func() {
				fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
				defer cancel()
				_ = tel.Shutdown(fctx)
			}()
			// --wait ends, with exit 5, when the run parks on a repair that waits
			// for approval.
			cl := client.New(b).StopAtRepair()
			t := client.Trigger{Type: typ, Skill: skillName, Source: source, ID: id, Data: payload}
			if skillName != "" && len(args) == 0 {
				t.Type = ""
			}
			if !due.IsZero() {
				return publishLater(ctx, b, t, due, asJSON, stdout)
			}
			if !wait {
				act, err := cl.Publish(ctx, t)
				if err != nil {
					return err
				}
				if asJSON {
					out := map[string]any{"id": act.EventID, "source": act.Source, "subject": act.Subject, "seq": act.Seq, "activation_id": act.ID}
					if act.Duplicate {
						out["duplicate"] = true
					}
					return json.NewEncoder(stdout).Encode(out)
				}
				if act.Duplicate {
					fmt.Fprintf(stdout, "not published: a duplicate of the trigger at seq=%d (same source %s and id %s), activation=%s, which does not run again\n", act.Seq, act.Source, act.EventID, act.ID)
					return nil
				}
				fmt.Fprintf(stdout, "published %s id=%s seq=%d activation=%s\n", act.Subject, act.EventID, act.Seq, act.ID)
				return nil
			}
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			w := &watcher{out: stdout, asJSON: asJSON}
			act, res, err := cl.RunNotify(wctx, t, func(act client.Activation) {
				if act.Duplicate {
					fmt.Fprintf(cmd.ErrOrStderr(), "skillbus: not published: a duplicate of the trigger at seq %d (same source %s and id %s); what follows is that trigger's activation, %s\n", act.Seq, act.Source, act.EventID, act.ID)
				}
			}, w.print)
			switch {
			case err != nil && wctx.Err() != nil && ctx.Err() == nil:
				if w.repair != nil {
					return &ExitError{Code: exitTimeout, Err: fmt.Errorf("no result for activation %s within %v: execution %s is parked on repair %s (see 'skillbus repair show %s', or raise --timeout)",
						act.ID, timeout, w.repair.ExecutionID, shortDigest(w.repair.RepairID), shortDigest(w.repair.RepairID))}
				}
				if p := w.parked; p != nil {
					return &ExitError{Code: exitTimeout, Err: fmt.Errorf("no result for activation %s within %v: in execution %s, step %s (see 'skillbus runs show %s', or raise --timeout)",
						act.ID, timeout, p.exec, p.what, p.exec)}
				}
				if w.exec != "" {
					// It has not ended: runs list, of ended and parked runs, does not have it.
					return &ExitError{Code: exitTimeout, Err: fmt.Errorf("no result for activation %s within %v: execution %s has not ended (see 'skillbus runs show %s', or raise --timeout)",
						act.ID, timeout, w.exec, w.exec)}
				}
				return &ExitError{Code: exitTimeout, Err: fmt.Errorf("no result for activation %s within %v (see 'skillbus runs list', or raise --timeout)", act.ID, timeout)}
			case err != nil:
				return err
			case res.Unmatched != nil && res.Unmatched.Code == events.UnmatchedNoSkill && len(res.Unmatched.EndedWaits)+len(res.Unmatched.Cancelled) > 0:
				return nil // sent to resume waiting runs or to cancel runs, which it did
			case res.Deferred():
				return &ExitError{Code: exitDeferred, Err: res.Err(), Quiet: true}
			case res.Unmatched != nil:
				return &ExitError{Code: exitUnmatched, Err: res.Err(), Quiet: true}
			case res.Failed != nil:
				return &ExitError{Code: exitFailed, Err: res.Err(), Quiet: true}
			case res.Cancelled != nil:
				return &ExitError{Code: exitCancelled, Err: res.Err(), Quiet: true}
			case res.Repairing != nil:
				w.waiting(res.Repairing)
				return &ExitError{Code: exitRepairing, Err: res.Err(), Quiet: true}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&skillName, "skill", "", "invoke this skill explicitly")
	f.StringVarP(&data, "data", "d", "", "event data: JSON, @FILE, or - for standard input")
	f.StringVar(&source, "source", "skillbus-cli", "CloudEvents source of the trigger")
	f.StringVar(&id, "id", "", "CloudEvents id of the trigger (default: a new UUID); the same source and id are deduplicated")
	f.BoolVarP(&wait, "wait", "w", false, "follow the activation and print its progress and result")
	f.BoolVar(&asJSON, "json", false, "print events as JSON lines")
	f.DurationVar(&timeout, "timeout", time.Minute, "with --wait, how long to wait for the result")
	f.StringVar(&atArg, "at", "", "publish the trigger at this time (RFC 3339, e.g. 2026-03-02T06:00:00Z), not now")
	f.DurationVar(&in, "in", 0, "publish the trigger after this long (e.g. 90s, 2h30m), not now")
	return cmd
}

// dueTime is when --at or --in say to publish, or zero for now.
func dueTime(atSet bool, at string, inSet bool, in time.Duration, wait bool) (time.Time, error) {
	now := time.Now()
	var due time.Time
	switch {
	case atSet && inSet:
		return time.Time{}, usage("give --at or --in, not both")
	case atSet:
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return time.Time{}, usage("--at %q is not an RFC 3339 time such as 2026-03-02T06:00:00Z or 2026-03-02T06:00:00+01:00", at)
		}
		if !t.After(now) {
			return time.Time{}, usage("--at %s is in the past (it is %s now)", at, now.UTC().Format(time.RFC3339))
		}
		due = t
	case inSet:
		if in <= 0 {
			return time.Time{}, usage("--in %v: give a positive duration such as 90s or 2h30m", in)
		}
		due = now.Add(in)
	default:
		return time.Time{}, nil
	}
	if wait {
		return time.Time{}, usage("--wait follows a trigger published now; a delayed trigger runs later (see it waiting with skillbus runs delayed, and its run then with skillbus runs)")
	}
	return due, nil
}

// publishLater stores t to be published at due (package schedule).
func publishLater(ctx context.Context, b *bus.Bus, t client.Trigger, due time.Time, asJSON bool, stdout io.Writer) error {
	act, err := schedule.At(ctx, b, t, due)
	if errors.Is(err, schedule.ErrNotFuture) {
		return usage("%v", err)
	}
	if err != nil {
		return err
	}
	at := due.UTC().Format(time.RFC3339)
	if asJSON {
		out := map[string]any{"id": act.EventID, "source": act.Source, "subject": act.Subject, "at": at, "activation_id": act.ID}
		if act.Duplicate {
			out["duplicate"] = true
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if act.Duplicate {
		fmt.Fprintf(stdout, "not stored: a trigger with the same source %s and id %s already waits (activation=%s)\n", act.Source, act.EventID, act.ID)
		return nil
	}
	fmt.Fprintf(stdout, "scheduled %s id=%s at=%s activation=%s\n", act.Subject, act.EventID, at, act.ID)
	fmt.Fprintf(stdout, "  waiting ones: skillbus runs delayed; to cancel this one before it is due: skillbus runs cancel %s\n", act.ID)
	return nil
}

func readData(arg string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case arg == "":
		return nil, nil
	case arg == "-":
		b, err = io.ReadAll(stdin)
	case strings.HasPrefix(arg, "@"):
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, usage("--data: %v", err)
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, usage("--data is not valid JSON: %v", err)
	}
	return b, nil
}

// watcher prints an activation's events for people (or as JSON lines).
type watcher struct {
	out    io.Writer
	asJSON bool
	// repair is the repair the execution was parked on, once it was.
	repair *events.RepairRequested
	// proposed is the proposal of repair that waits for a decision, as far as
	// the events read so far say. It is not printed as waiting for approval
	// when read: the follow reads a repair's history from its start, and the
	// decision may come right after it (the run waits for nobody then), or the
	// follow ends with the run parked on it (waiting prints it then).
	proposed *events.RepairProposed
	// parked is the sleep or wait the run is parked on, as the last scheduled
	// message read says, until the wait ends.
	parked *parkedStep
	// ended holds the executions whose wait (a sleep, a wait_for_event, a
	// confirmation) ended since they last started: their next start is a resume.
	ended map[string]bool
	// settled holds, by execution, the steps whose completion or skip was
	// printed: a resumed run reports them again from their checkpoints.
	settled map[string]map[string]bool
	// exec is the execution the events read last were about (the plan's
	// primary first): what runs show takes when the wait times out.
	exec string
}

// parkedStep is a step that parked its execution until a time.
type parkedStep struct {
	exec, step string
	what       string // "nap sleeps until T", "pay waits for event E until T"
}

// printRepair prints a repair's event with data d.
func (w *watcher) printRepair(typ string, d map[string]any) {
	str := func(k string) string { s, _ := d[k].(string); return s }
	id := shortDigest(str("repair_id"))
	switch typ {
	case events.TypeRepairRequested:
		if w.repair != nil {
			fmt.Fprintf(w.out, "  ⚕ repairing: %s, repair %s requested: %s\n", client.FaultString(w.repair.Fault), shortDigest(w.repair.RepairID), firstLineOf(w.repair.Error))
		}
	case events.TypeRepairProposed:
		if d["auto"] == true {
			fmt.Fprintf(w.out, "  ⚕ repair %s proposed by %s (%s), applied without approval (repair: auto)\n", id, str("by"), str("summary"))
			return
		}
		w.proposed = &events.RepairProposed{RepairID: str("repair_id"), By: str("by"), Summary: str("summary")}
	case events.TypeRepairSucceeded, events.TypeRepairFailed:
		if p := w.proposed; p != nil && p.RepairID == str("repair_id") {
			fmt.Fprintf(w.out, "  ⚕ repair %s proposed by %s: %s\n", id, p.By, p.Summary)
			w.proposed = nil
		}
		if typ == events.TypeRepairSucceeded {
			fmt.Fprintf(w.out, "  ⚕ repair %s applied as version %s; the run goes on on it\n", id, str("version"))
		} else {
			fmt.Fprintf(w.out, "  ⚕ repair %s failed: %s\n", id, str("reason"))
		}
	default:
		fmt.Fprintf(w.out, "  ⚕ %s: %s\n", events.Kind(typ), str("reason"))
	}
}

// waiting prints what a run parked on r waits for, and how to answer.
func (w *watcher) waiting(r *client.Repairing) {
	if w.asJSON {
		return
	}
	id := shortDigest(r.RepairID)
	by := "a repairer"
	if p := w.proposed; p != nil && p.RepairID == r.RepairID && p.By != "" {
		by = p.By
	}
	fmt.Fprintf(w.out, "  ⏸ %s\n    proposed by %s: %s\n    see the patch: skillbus repair show %s   approve: skillbus repair approve %s   (or reject)\n",
		r, by, r.Summary, id, id)
}

// settle notes that a step of an execution finished, and reports whether it had
// already.
func (w *watcher) settle(exec, step string) (again bool) {
	if w.settled == nil {
		w.settled = map[string]map[string]bool{}
	}
	if w.settled[exec] == nil {
		w.settled[exec] = map[string]bool{}
	}
	again = w.settled[exec][step]
	w.settled[exec][step] = true
	return again
}

// waitEnded notes that an execution's wait ended: it resumes next.
func (w *watcher) waitEnded(exec string) {
	if w.ended == nil {
		w.ended = map[string]bool{}
	}
	w.ended[exec] = true
	if w.parked != nil && w.parked.exec == exec {
		w.parked = nil
	}
}

// printScheduled prints a message scheduled when the run parked (see
// client.Scheduled): the wake-up of a sleep, or the timeout of a wait_for_event.
func (w *watcher) printScheduled(e *event.Event) {
	var d events.WaitEnded
	if e.Type() != events.TypeWaitEnded || json.Unmarshal(e.Data(), &d) != nil {
		return
	}
	until := e.Time().UTC().Format(time.RFC3339)
	p := &parkedStep{exec: d.ExecutionID, step: d.StepID}
	switch {
	case d.By == run.PausedSleep:
		p.what = d.StepID + " sleeps until " + until
	case d.EventType != "":
		p.what = d.StepID + " waits for event " + d.EventType + " until " + until
	default:
		p.what = d.StepID + " waits until " + until
	}
	w.parked = p
	fmt.Fprintf(w.out, "  ⏸ step %s\n", p.what)
}

// printWaitEnded prints how a step's sleep or wait ended.
func (w *watcher) printWaitEnded(e *event.Event) {
	var d events.WaitEnded
	if json.Unmarshal(e.Data(), &d) != nil {
		return
	}
	w.waitEnded(d.ExecutionID)
	switch d.By {
	case run.PausedSleep:
		fmt.Fprintf(w.out, "  ▶ step %s woke up\n", d.StepID)
	case "event":
		fmt.Fprintf(w.out, "  ▶ step %s ended its wait: %s\n", d.StepID, d.Reason)
	case "timeout":
		fmt.Fprintf(w.out, "  ▶ step %s timed out: %s\n", d.StepID, d.Reason)
	default:
		fmt.Fprintf(w.out, "  ▶ step %s done waiting (by %s): %s\n", d.StepID, d.By, d.Reason)
	}
}

func (w *watcher) print(e *event.Event) {
	if e.Type() == events.TypeRepairRequested {
		var d events.RepairRequested
		if json.Unmarshal(e.Data(), &d) == nil {
			w.repair = &d
		}
	}
	_, scheduled := client.Scheduled(e)
	if w.asJSON {
		if scheduled {
			return // not an event (yet)
		}
		var data any
		_ = json.Unmarshal(e.Data(), &data)
		_ = json.NewEncoder(w.out).Encode(map[string]any{"type": e.Type(), "id": e.ID(), "time": e.Time(), "data": data})
		return
	}
	if scheduled {
		w.printScheduled(e)
		return
	}
	var d map[string]any
	_ = json.Unmarshal(e.Data(), &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	num := func(k string) float64 { f, _ := d[k].(float64); return f }
	switch e.Type() {
	case events.TypeRouteDecided:
		var rd events.RouteDecided
		_ = json.Unmarshal(e.Data(), &rd)
		fb := "none"
		if n := len(rd.Plan.FallbackChain); n > 0 {
			names := make([]string, n)
			for i, s := range rd.Plan.FallbackChain {
				names[i] = s.Name
			}
			fb = strings.Join(names, " → ")
		}
		fmt.Fprintf(w.out, "→ routed to %s@%s (%s), fallback: %s\n", rd.Plan.Primary.Name, rd.Plan.Primary.Version, rd.Plan.Primary.Source, fb)
		w.exec = cmp.Or(rd.Plan.Primary.ExecutionID, w.exec)
		for _, c := range rd.Candidates {
			if _, why, ok := strings.Cut(c.Reason, selector.InvalidPrefix); ok && c.Name == rd.Plan.Primary.Name {
				// The registry keeps the last good version serving: whoever just
				// edited the skill should hear that this is not their edit.
				why, _, _ = strings.Cut(why, "; ")
				fmt.Fprintf(w.out, "  ! %s's files are invalid now, so its last good version runs: %s\n", c.Name, why)
			}
		}
	case events.TypeRouteUnmatched:
		var u events.RouteUnmatched
		_ = json.Unmarshal(e.Data(), &u)
		if len(u.EndedWaits)+len(u.Cancelled) > 0 && u.Code == events.UnmatchedNoSkill {
			var did []string
			if len(u.EndedWaits) > 0 {
				did = append(did, fmt.Sprintf("ended the wait of %s: %s", plural(len(u.EndedWaits), "run"), strings.Join(u.EndedWaits, ", ")))
			}
			if len(u.Cancelled) > 0 {
				did = append(did, fmt.Sprintf("cancelled %s: %s", plural(len(u.Cancelled), "run"), strings.Join(u.Cancelled, ", ")))
			}
			fmt.Fprintf(w.out, "▶ no skill takes it, but it %s\n", strings.Join(did, "; it "))
			return
		}
		if events.Deferred(u.Code) {
			// Taken, not refused: a skill runs it later, as its own activation.
			what := "one run with the burst's last trigger, when the burst ends"
			if u.Code == events.UnmatchedBatched {
				what = "the batch's run, when the batch is full or its time is up"
			}
			fmt.Fprintf(w.out, "⏸ %s: %s\n  it runs in %s, as its own activation: 'skillbus runs list' shows it\n", u.Code, u.Reason, what)
			return
		}
		fmt.Fprintf(w.out, "✗ not routed: %s: %s\n", str("code"), str("reason"))
		if len(u.EndedWaits) > 0 {
			fmt.Fprintf(w.out, "  it ended the wait of %s: %s\n", plural(len(u.EndedWaits), "run"), strings.Join(u.EndedWaits, ", "))
		}
		if len(u.Cancelled) > 0 {
			fmt.Fprintf(w.out, "  it cancelled %s: %s\n", plural(len(u.Cancelled), "run"), strings.Join(u.Cancelled, ", "))
		}
	case events.TypeExecutionStarted:
		w.exec = cmp.Or(str("execution_id"), w.exec)
		if exec := str("execution_id"); w.ended[exec] {
			delete(w.ended, exec)
			fmt.Fprintf(w.out, "  ▶ %s resumed\n", str("skill"))
			return
		}
		if num("attempt") == 1 {
			// Its id, once: what runs show and runs cancel take while it runs.
			fmt.Fprintf(w.out, "  %s started (attempt 1), execution %s\n", str("skill"), str("execution_id"))
			return
		}
		fmt.Fprintf(w.out, "  %s started (attempt %v)\n", str("skill"), num("attempt"))
	case events.TypeExecutionWaiting:
		w.exec = cmp.Or(str("execution_id"), w.exec)
		switch str("for") {
		case "throttle":
			fmt.Fprintf(w.out, "  ⧗ %s waits for its throttle (%s); it holds no worker meanwhile\n", str("skill"), str("detail"))
		case "pause":
			fmt.Fprintf(w.out, "  ⧗ %s is paused (%s); it holds no worker meanwhile\n", str("skill"), str("detail"))
		default:
			fmt.Fprintf(w.out, "  ⧗ %s waits for a concurrency slot (%s); it holds no worker meanwhile\n", str("skill"), str("detail"))
		}
	case events.TypeStepStarted:
		if w.settled[str("execution_id")][str("step_id")] {
			// Run again on a retry or after a resume, and done before: its
			// completion is not printed again (below), so neither is its start.
			return
		}
		what := str("step_type")
		if t := str("tool"); t != "" {
			what = "tool " + t
		}
		fmt.Fprintf(w.out, "    ▸ %s (%s)\n", str("step_id"), what)
	case events.TypeStepCompleted:
		if w.settle(str("execution_id"), str("step_id")) || d["resumed"] == true {
			return // done by an earlier delivery, and reported then
		}
		if e := str("error"); e != "" {
			fmt.Fprintf(w.out, "    ✓ %s failed, continuing: %s\n", str("step_id"), e)
		} else {
			fmt.Fprintf(w.out, "    ✓ %s %.1fms\n", str("step_id"), num("duration_ms"))
		}
	case events.TypeStepSkipped:
		if w.settle(str("execution_id"), str("step_id")) {
			return
		}
		fmt.Fprintf(w.out, "    – %s skipped: %s\n", str("step_id"), str("reason"))
	case events.TypeStepFailed:
		fmt.Fprintf(w.out, "    ✗ %s failed (%s): %s\n", str("step_id"), str("class"), str("error"))
	case events.TypeExecutionRetrying:
		// Attempt is the one that failed; the run gets max_retries+1 in all.
		fmt.Fprintf(w.out, "  ↻ attempt %v of %v failed; attempt %v in %.0fms: %s\n", num("attempt"), num("max_retries")+1, num("attempt")+1, num("delay_ms"), str("error"))
	case events.TypeExecutionFallback:
		fmt.Fprintf(w.out, "  ↪ %s failed (%s), falling back to %s: %s\n", str("skill"), str("class"), str("next"), str("error"))
	case events.TypeConfirmationRequested:
		fmt.Fprintf(w.out, "  ⏸ waiting for confirmation of step %s: %s\n    answer with: skillbus runs confirm %s   (or --deny); unanswered, denied at %s\n",
			str("step_id"), str("message"), str("execution_id"), str("timeout_at"))
	case events.TypeConfirmationRecorded:
		verdict := "denied"
		if d["approved"] == true {
			verdict = "approved"
		}
		by := str("by")
		if by == "" {
			by = "someone unnamed"
		}
		fmt.Fprintf(w.out, "  ▶ step %s %s by %s\n", str("step_id"), verdict, by)
		w.waitEnded(str("execution_id"))
	case events.TypeWaitEnded:
		w.printWaitEnded(e)
	case events.TypeAutohealTriggered:
		fmt.Fprintf(w.out, "    ✚ auto-heal: %s failed (%s), running %s\n", str("step_id"), str("failure_type"), str("action"))
	case events.TypeRepairRequested, events.TypeRepairProposed, events.TypeRepairSucceeded, events.TypeRepairFailed,
		events.TypeRepairNoImprovement, events.TypeRepairSkipped:
		w.printRepair(e.Type(), d)
	case events.TypeExecutionDeadlettered:
		// Printed with execution.failed, which names the dead letter and comes first.
	case events.TypeDLQReplayed:
		fmt.Fprintf(w.out, "↻ replay #%d of dead letter %s, by %s\n", int(num("replay")), str("entry_id"), str("by"))
	case events.TypeExecutionCompleted:
		out, _ := json.MarshalIndent(d["outputs"], "", "  ")
		fmt.Fprintf(w.out, "✔ %s completed in %.1fms\n%s\n", str("skill"), num("duration_ms"), out)
	case events.TypeExecutionFailed:
		if dl := str("dead_letter"); dl != "" {
			fmt.Fprintf(w.out, "  ☠ dead-lettered to %s\n", dl)
		}
		class := str("class")
		if n := num("attempt"); class == string(failure.Retryable) && n > 1 {
			// Its retries ran out: retryable says what kind of failure, not
			// that another attempt comes.
			class = fmt.Sprintf("%s, after %v attempts", class, n)
		}
		fmt.Fprintf(w.out, "✘ %s failed (%s): %s\n", str("skill"), class, str("error"))
	case events.TypeExecutionCancelled:
		w.parked = nil
		fmt.Fprintf(w.out, "✘ %s %s\n", str("skill"), run.CancelText(str("by"), str("reason")))
	}
}
