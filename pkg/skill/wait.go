package skill

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

// WaitForEvent is a step that parks its run until an event of Type for which
// Match is true arrives as a trigger, or Timeout passes. The matched event's data
// is the step's result; a timeout is the step's error, handled as its on_error
// says. The run holds no worker while it waits.
type WaitForEvent struct {
	// Type is the CloudEvent type of the event waited for, exactly.
	Type string `json:"type"`
	// Match is a CEL expression over event, inputs and steps (package flow,
	// CompileWaitMatch); "" takes the first event of Type.
	Match string `json:"match,omitempty"`
	// Timeout bounds the wait; DefaultWaitTimeout when not written.
	Timeout Duration `json:"timeout"`
}

// DefaultWaitTimeout is how long a wait_for_event waits when it does not say.
const DefaultWaitTimeout = 24 * time.Hour

// DefaultEventsRetention is how long a new events stream keeps events (skillbus
// --keep-events, 7 days): a wait_for_event that times out later ends then.
const DefaultEventsRetention = 7 * 24 * time.Hour

// MaxParkedDefault is the longest a run may sleep or wait on a fleet that keeps
// events DefaultEventsRetention: a minute less, as the worker allows.
const MaxParkedDefault = DefaultEventsRetention - time.Minute

// retentionHint says how to sleep or wait d: less, or on a fleet that keeps
// events longer.
func retentionHint(d time.Duration) string {
	days := (d+time.Minute)/(24*time.Hour) + 1
	return fmt.Sprintf("make it at most %dh, or run the fleet with --keep-events %dd (the events stream's retention; $SKILLBUS_KEEP_EVENTS)", (DefaultEventsRetention-time.Hour)/time.Hour, days)
}

// fmtDays writes d in days when it is whole days ("7d").
func fmtDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

var waitKeys = []string{"type", "match", "timeout"}

func decodeStepWait(sb *stepBuild, d *decoder, e pair, f string) {
	sb.waitN = e.v
	const hint = "write wait_for_event: {type: com.example.order.paid, match: event.data.order == inputs.order, timeout: 1h}"
	ps, ok := d.pairs(e.v, f, hint)
	if !ok {
		return
	}
	w := WaitForEvent{Timeout: Duration(DefaultWaitTimeout)}
	var typeN *yaml.Node
	for _, p := range ps {
		pf := f + "." + p.key
		switch p.key {
		case "type":
			typeN = p.v
			s, ok := d.strictStr(p.v, pf, "write the CloudEvent type, e.g. com.example.order.paid")
			if !ok {
				continue
			}
			if prob := subjectTokenProblem(s); prob != "" {
				d.errAt(p.v, pf, "write one CloudEvent type, e.g. com.example.order.paid, without wildcards", "wait_for_event.type %q is not a CloudEvent type: it %s", s, prob)
				continue
			}
			w.Type = s
		case "match":
			s, ok := d.strictStr(p.v, pf, "write a CEL expression: event.data.order == inputs.order")
			if !ok {
				continue
			}
			if m := waitMatchAt(d, p.v, pf, s); m != nil {
				w.Match = strings.TrimSpace(s)
				sb.info.match, sb.info.matchN = m, p.v
			}
		case "timeout":
			v, ok := d.duration(p.v, pf)
			if ok && v <= 0 {
				d.errAt(p.v, pf, "write how long to wait, e.g. timeout: 1h", "wait_for_event.timeout must be positive")
				continue
			}
			if ok {
				w.Timeout = v
				if time.Duration(v) > MaxParkedDefault {
					// The timeout is a scheduled message in the events stream, which keeps
					// it only so long: a worker ends the wait at the retention instead.
					d.warnAt(p.v, pf, retentionHint(time.Duration(v)),
						"wait_for_event.timeout %s is longer than a run may wait where events are kept %s, the default (their retention less a minute): the wait ends then", time.Duration(v), fmtDays(DefaultEventsRetention))
				}
			}
		default:
			d.errAt(p.k, pf, hintFor(p.key, waitKeys), "unknown field %s", pf)
		}
	}
	if typeN == nil {
		d.errAt(e.v, f, hint, "wait_for_event needs type")
	}
	sb.st.WaitForEvent = &w
}

// waitMatchAt compiles a wait_for_event match, reporting an error at its position
// in the file; nil when it does not compile.
func waitMatchAt(d *decoder, n *yaml.Node, field, src string) *flow.WaitMatch {
	m, err := flow.CompileWaitMatch(src)
	if err != nil {
		d.celError(n, field, src, err, "CEL over event (id, type, source, subject, time, data), inputs and steps; see docs/authoring.md, Sleeps and waits")
	}
	return m
}

// checkWaitMatches checks the inputs and steps each wait_for_event's match selects
// by name, as the templates' names are checked: a declared input, and a step before
// the wait (by id or output name). A misspelt one would never match: the wait would
// time out.
func (wb *workflowBuilder) checkWaitMatches(nc nameCheck) {
	for i, info := range wb.steps {
		if info.match == nil {
			continue
		}
		f := info.field + ".wait_for_event.match"
		earlier := wb.visible(i)
		for _, r := range info.match.Refs() {
			line, col := wb.d.exprPos(info.matchN, r.Line, r.Column)
			if r.Root == "inputs" {
				wb.checkInput(at{line: line, col: col}, f, nc.inputNames, r.Name)
				continue
			}
			k, defined := nc.definedBy[r.Name]
			switch {
			case slices.Contains(earlier, r.Name):
			case defined && k == i:
				wb.d.add(SeverityError, line, col, f, "a wait reads the steps before it; its own result is the event it waits for",
					"steps.%s is the result of this step, which is not available yet", r.Name)
			case defined:
				wb.d.add(SeverityError, line, col, f, "a wait reads the steps before it; move step "+wb.w.Steps[k].ID+" before "+wb.w.Steps[i].ID,
					"step %s (line %d) runs after this wait", r.Name, wb.w.Steps[k].Line)
			case len(earlier) == 0:
				wb.d.add(SeverityError, line, col, f, "a wait reads the steps before it, by id or output name; none runs before this one",
					"unknown step %s", r.Name)
			default:
				hint := "steps before this one: " + strings.Join(earlier, ", ")
				if len(earlier) > 12 {
					hint = "a wait reads the steps before it, by id or output name"
				}
				wb.d.add(SeverityError, line, col, f, hint, "unknown step %s%s", r.Name, didYouMean(r.Name, earlier))
			}
		}
	}
}
