package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Exit codes of `skillbus trigger --wait`.
const (
	exitFailed    = 1 // the execution failed
	exitUnmatched = 3 // no skill took the trigger, or the trigger was rejected
	exitTimeout   = 4 // no result within --timeout
)

func triggerCommand(c *common, stdout io.Writer) *cobra.Command {
	var (
		skillName, data, source, id string
		wait, asJSON                bool
		timeout                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "trigger [TYPE]",
		Short: "Publish a trigger event, and optionally wait for its result",
		Long: `trigger publishes a CloudEvent (binary content mode) on skillbus.trigger.<TYPE>, or with
--skill on skillbus.trigger.skill.<NAME> to invoke one skill explicitly. The data must
be JSON; a JSON object becomes the skill's inputs.

With --wait it follows the activation: the routing decision, each step, retries and
fallbacks, and the result. The exit code is 0 when the execution completed, 1 when it
failed, 3 when no skill took the trigger, 4 on --timeout.`,
		Example: `  skillbus trigger --skill hello --data '{"name":"Ada"}' --wait
  skillbus trigger com.example.order.created --data @order.json --wait
  echo '{"name":"Grace"}' | skillbus trigger --skill hello --data - --wait --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			typ := "io.skillbus.invoke"
			if len(args) == 1 {
				typ = args[0]
			} else if skillName == "" {
				return usage("give an event TYPE, or --skill NAME to invoke a skill explicitly")
			}
			if err := bus.CheckType(typ); err != nil {
				return usage("%v", err)
			}
			if skillName != "" {
				if err := bus.CheckToken("--skill", skillName); err != nil {
					return usage("%v", err)
				}
			}
			payload, err := readData(data, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if id == "" {
				id = uuid.NewString()
			}
			b, err := c.connect("skillbus-cli")
			if err != nil {
				return err
			}
			defer b.NC.Close()

			e := event.New()
			e.SetID(id)
			e.SetSource(source)
			e.SetType(typ)
			e.SetTime(time.Now())
			if len(payload) > 0 {
				e.SetDataContentType("application/json")
				e.DataEncoded = payload
			}
			subject := b.Subjects.Trigger(typ)
			if skillName != "" {
				subject = b.Subjects.TriggerSkill(skillName)
			}
			actID := events.ActivationID(source, id)

			var w *watcher
			if wait {
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				if w, err = newWatcher(ctx, b, actID, stdout, asJSON); err != nil {
					return err
				}
				defer w.stop()
			}
			ack, err := b.JS.PublishMsg(ctx, bus.Encode(subject, id, &e))
			if err != nil {
				if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
					return fmt.Errorf("publish %s: no stream takes it (%v); is skillbus running against %s with prefix %q?", subject, err, c.natsURL, c.prefix)
				}
				return fmt.Errorf("publish %s: %w", subject, err)
			}
			if !wait {
				if asJSON {
					return json.NewEncoder(stdout).Encode(map[string]any{"id": id, "source": source, "subject": subject, "seq": ack.Sequence, "activation_id": actID})
				}
				fmt.Fprintf(stdout, "published %s id=%s seq=%d activation=%s\n", subject, id, ack.Sequence, actID)
				return nil
			}
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return w.follow(wctx)
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
	return cmd
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

// watcher follows the events of one activation.
type watcher struct {
	b      *bus.Bus
	actID  string
	out    io.Writer
	asJSON bool
	cons   jetstream.ConsumeContext
	msgs   chan jetstream.Msg
}

func newWatcher(ctx context.Context, b *bus.Bus, actID string, out io.Writer, asJSON bool) (*watcher, error) {
	w := &watcher{b: b, actID: actID, out: out, asJSON: asJSON, msgs: make(chan jetstream.Msg, 256)}
	if err := w.watch(ctx, actID); err != nil {
		return nil, err
	}
	return w, nil
}

// watch replaces the consumer by one on the events of id (an activation or an
// execution), from the start, so nothing published before it is missed.
func (w *watcher) watch(ctx context.Context, id string) error {
	if w.cons != nil {
		w.cons.Stop()
	}
	c, err := w.b.JS.OrderedConsumer(ctx, w.b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{w.b.Subjects.Events(id)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("no %s stream: is skillbus running against this NATS server?", w.b.StreamEvents())
		}
		return fmt.Errorf("watch events: %w", err)
	}
	msgs := w.msgs
	w.cons, err = c.Consume(func(m jetstream.Msg) { msgs <- m })
	return err
}

func (w *watcher) stop() {
	if w.cons != nil {
		w.cons.Stop()
	}
}

// follow prints events until the activation ends.
func (w *watcher) follow(ctx context.Context) error {
	for {
		var m jetstream.Msg
		select {
		case m = <-w.msgs:
		case <-ctx.Done():
			return &ExitError{Code: exitTimeout, Err: fmt.Errorf("no result for activation %s yet: %w (see 'skillbus runs' or raise --timeout)", w.actID, ctx.Err())}
		}
		e, err := bus.Decode(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		if err != nil {
			continue
		}
		w.print(e)
		switch e.Type() {
		case events.TypeRouteUnmatched:
			var d events.RouteUnmatched
			_ = json.Unmarshal(e.Data(), &d)
			return &ExitError{Code: exitUnmatched, Err: fmt.Errorf("not routed (%s): %s", d.Code, d.Reason), Quiet: true}
		case events.TypeRouteDecided:
			var d events.RouteDecided
			_ = json.Unmarshal(e.Data(), &d)
			if err := w.watch(ctx, d.Plan.Primary.ExecutionID); err != nil {
				return err
			}
		case events.TypeExecutionFallback:
			var d events.ExecutionFallback
			_ = json.Unmarshal(e.Data(), &d)
			if err := w.watch(ctx, d.NextExecutionID); err != nil {
				return err
			}
		case events.TypeExecutionCompleted:
			return nil
		case events.TypeExecutionFailed:
			var d events.ExecutionFailed
			_ = json.Unmarshal(e.Data(), &d)
			return &ExitError{Code: exitFailed, Err: fmt.Errorf("execution failed (%s): %s", d.Class, d.Error), Quiet: true}
		}
	}
}

func (w *watcher) print(e *event.Event) {
	if w.asJSON {
		var data any
		_ = json.Unmarshal(e.Data(), &data)
		_ = json.NewEncoder(w.out).Encode(map[string]any{"type": e.Type(), "id": e.ID(), "time": e.Time(), "data": data})
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
	case events.TypeRouteUnmatched:
		fmt.Fprintf(w.out, "✗ not routed: %s: %s\n", str("code"), str("reason"))
	case events.TypeExecutionStarted:
		fmt.Fprintf(w.out, "  %s started (attempt %v)\n", str("skill"), num("attempt"))
	case events.TypeStepStarted:
		what := str("step_type")
		if t := str("tool"); t != "" {
			what = "tool " + t
		}
		fmt.Fprintf(w.out, "    ▸ %s (%s)\n", str("step_id"), what)
	case events.TypeStepCompleted:
		if e := str("error"); e != "" {
			fmt.Fprintf(w.out, "    ✓ %s failed, continuing: %s\n", str("step_id"), e)
		} else {
			fmt.Fprintf(w.out, "    ✓ %s %.1fms\n", str("step_id"), num("duration_ms"))
		}
	case events.TypeStepSkipped:
		fmt.Fprintf(w.out, "    – %s skipped: %s\n", str("step_id"), str("reason"))
	case events.TypeStepFailed:
		fmt.Fprintf(w.out, "    ✗ %s failed (%s): %s\n", str("step_id"), str("class"), str("error"))
	case events.TypeExecutionRetrying:
		fmt.Fprintf(w.out, "  ↻ retrying in %.0fms (attempt %v of %v): %s\n", num("delay_ms"), num("attempt"), num("max_retries")+1, str("error"))
	case events.TypeExecutionFallback:
		fmt.Fprintf(w.out, "  ↪ %s failed (%s), falling back to %s: %s\n", str("skill"), str("class"), str("next"), str("error"))
	case events.TypeExecutionDeadlettered:
		fmt.Fprintf(w.out, "  ☠ dead-lettered to %s\n", str("subject"))
	case events.TypeExecutionCompleted:
		out, _ := json.MarshalIndent(d["outputs"], "", "  ")
		fmt.Fprintf(w.out, "✔ %s completed in %.1fms\n%s\n", str("skill"), num("duration_ms"), out)
	case events.TypeExecutionFailed:
		fmt.Fprintf(w.out, "✘ %s failed (%s): %s\n", str("skill"), str("class"), str("error"))
	}
}
