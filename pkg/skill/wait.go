package skill

import (
	"errors"
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
			if ok && matchAt(d, p.v, pf, s) {
				w.Match = strings.TrimSpace(s)
			}
		case "timeout":
			v, ok := d.duration(p.v, pf)
			if ok && v <= 0 {
				d.errAt(p.v, pf, "write how long to wait, e.g. timeout: 1h", "wait_for_event.timeout must be positive")
				continue
			}
			if ok {
				w.Timeout = v
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

// matchAt compiles a wait_for_event match, reporting an error at its position in
// the file; false when it does not compile.
func matchAt(d *decoder, n *yaml.Node, field, src string) bool {
	_, err := flow.CompileWaitMatch(src)
	if err == nil {
		return true
	}
	var fe *flow.Error
	if !errors.As(err, &fe) {
		d.errAt(n, field, "", "%s: %v", field, err)
		return false
	}
	line, col := d.exprPos(n, fe.Line, fe.Column)
	hint := "CEL over event (id, type, source, subject, time, data), inputs and steps; see docs/authoring.md, Sleeps and waits"
	d.add(SeverityError, line, col, field, hint, "%s is not a valid expression: %s", field, fe.Msg)
	return false
}
